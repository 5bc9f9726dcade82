// bfloat16 data on the CPU for every op of the list. Ops with native bfloat16 kernels (oneDNN's convolution,
// pooling, matmul, batch norm and eltwise primitives) run it directly where the CPU has bfloat16 instructions
// (onednn::runs_bf16()). Every other op, and those ops on other CPUs, run a bfloat16 call by widening each
// bfloat16 tensor argument to a float32 copy, running the float32 implementation, and rounding each written
// argument (a non-const Tensor: outputs, accumulated gradients, updated state) back to bfloat16, to nearest even.
// That is what a bfloat16 kernel with float32 accumulation computes (oneDNN's and cuDNN's bf16 primitives,
// TensorFlow's CPU kernels on machines without bf16 instructions): inputs rounded to bfloat16, arithmetic in
// float32, outputs rounded once. Parameters that stay float32 under mixed precision (biases, batch-norm
// statistics, weight gradients) pass through untouched.
//
// The CPU backend's table (backend.cc) wraps every op in Bf16Emulated and adds bfloat16 to the dtypes of every
// op that takes float32 and float64; an op that takes bfloat16 itself (fill, copy, cast, and the ops with native
// kernels) is called directly, and an op with native kernels widens through Widened<&op>::run where the CPU
// lacks them. Written arguments are widened first too, so accumulating ops (dw +=, moving averages) see their
// current values; two arguments that alias (activation_forward's y = x) become two copies, and the op's float32
// implementation writes the output copy from the input copy, which is what aliasing asks.
#pragma once

#include <systolic/ops.h>

#include <tuple>
#include <type_traits>
#include <vector>

#include "ops/backend.h"

namespace systolic::ops::cpu {

void cast(const Tensor& src, Tensor& dst);

namespace bf16_emulation {

inline bool is_bf16(const Tensor& t) {
  return t.defined() && t.dtype() == DType::bfloat16;
}
inline Tensor widened(const Tensor& t) {
  Tensor f(t.shape(), DType::float32, t.device());
  cpu::cast(t, f);
  return f;
}

// One argument of the call: `get()` is what the float32 implementation receives, `finish()` writes back.
template <class T>
struct Adapt {  // anything but a tensor: passed as it is
  T& value;
  explicit Adapt(T& v) : value(v) {}
  T& get() { return value; }
  void finish() {}
};
template <>
struct Adapt<const Tensor> {
  const Tensor& original;
  Tensor wide;
  explicit Adapt(const Tensor& t) : original(t), wide(is_bf16(t) ? widened(t) : Tensor()) {}
  const Tensor& get() { return wide.defined() ? wide : original; }
  void finish() {}
};
template <>
struct Adapt<Tensor> {
  Tensor& original;
  Tensor wide;
  explicit Adapt(Tensor& t) : original(t), wide(is_bf16(t) ? widened(t) : Tensor()) {}
  Tensor& get() { return wide.defined() ? wide : original; }
  void finish() {
    if (wide.defined()) cpu::cast(wide, original);
  }
};
template <>
struct Adapt<const std::vector<Tensor>> {
  const std::vector<Tensor>& original;
  std::vector<Tensor> wide;
  explicit Adapt(const std::vector<Tensor>& ts) : original(ts) {
    for (const Tensor& t : ts) wide.push_back(is_bf16(t) ? widened(t) : t);
  }
  const std::vector<Tensor>& get() { return wide; }
  void finish() {}
};
template <>
struct Adapt<std::vector<Tensor>> {
  std::vector<Tensor>& original;
  std::vector<Tensor> wide;
  explicit Adapt(std::vector<Tensor>& ts) : original(ts) {
    for (Tensor& t : ts) wide.push_back(is_bf16(t) ? widened(t) : t);
  }
  std::vector<Tensor>& get() { return wide; }
  void finish() {
    for (std::size_t i = 0; i < wide.size(); ++i)
      if (is_bf16(original[i])) cpu::cast(wide[i], original[i]);
  }
};

template <class T>
bool holds_bf16(const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return is_bf16(v);
  } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
    for (const Tensor& t : v)
      if (is_bf16(t)) return true;
    return false;
  } else {
    return false;
  }
}

}  // namespace bf16_emulation

// Widened<&op>::run has op's signature: it runs op on float32 copies of the call's bfloat16 tensors (see the top
// of this file).
template <auto F>
struct Widened;
template <class... A, void (*F)(A...)>
struct Widened<F> {
  static void run(A... args) {
    using namespace bf16_emulation;
    std::tuple<Adapt<std::remove_reference_t<A>>...> adapted(args...);
    std::apply([](auto&... a) { F(a.get()...); }, adapted);
    std::apply([](auto&... a) { (a.finish(), ...); }, adapted);
  }
};

// Bf16Emulated<&op, &op_dtypes>::run has op's signature: op itself when it takes the call's dtypes, else widened.
template <auto F, const DTypes* D>
struct Bf16Emulated;
template <class... A, void (*F)(A...), const DTypes* D>
struct Bf16Emulated<F, D> {
  static void run(A... args) {
    using namespace bf16_emulation;
    if (D->contains(DType::bfloat16) || !(holds_bf16<std::remove_cvref_t<A>>(args) || ...))
      return F(std::forward<A>(args)...);
    Widened<F>::run(std::forward<A>(args)...);
  }
};

// The dtypes the table gives an op: its own, and bfloat16 wherever it takes float32 and float64 (the ops on
// model data; augment_images and random_image_transforms work on float32 images and transforms alone).
constexpr DTypes with_bf16_emulation(DTypes own) {
  return own.contains(DType::float32) && own.contains(DType::float64) ? own.with(DType::bfloat16) : own;
}

}  // namespace systolic::ops::cpu
