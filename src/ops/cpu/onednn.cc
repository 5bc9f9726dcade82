// oneDNN plumbing (engine, stream, version, ISA) and the activations as oneDNN eltwise/softmax primitives.
// Convolution and pooling are in onednn_conv.cc, dense and batch normalisation in onednn_dense_norm.cc.
#include "ops/cpu/onednn.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/cpu/onednn_common.h"

namespace systolic::ops::onednn {

namespace detail {
dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& stream() {
  // One per thread: CPU replicas run their ops from several threads at once, and a stream is not to be shared
  // between threads executing concurrently.
  thread_local dnnl::stream s(engine());
  return s;
}
dnnl::algorithm eltwise_algorithm(const Activation& a) {
  switch (a.kind) {
    case Activation::relu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::sigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case Activation::tanh:
      return dnnl::algorithm::eltwise_tanh;
    default:
      break;
  }
  fail("oneDNN activation: no eltwise algorithm for {}", activation_name(a));
}
bool native_bf16() {
  static const bool native = [] {
    auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return native;
}
}  // namespace detail

using namespace detail;

bool runs_bf16() {
  return native_bf16();
}

std::string version() {
  const auto* v = dnnl::version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

std::string cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::all:
      return "all";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
  }
  return "unknown";
}

namespace {

// Element-wise activations run over the tensor as one flat vector: their layout does not matter and a 1-D
// descriptor lets oneDNN split the work evenly whatever the tensor's rank.
dnnl::memory::desc flat_md(const Tensor& t) {
  return md({t.numel()}, t.dtype(), tag::a);
}
// Softmax runs over rows of the last axis.
dnnl::memory::desc rows_md(const Tensor& t) {
  std::int64_t C = t.dim(-1);
  return md({t.numel() / C, C}, t.dtype(), tag::ab);
}

// The backward algorithms take the forward OUTPUT (the _use_dst_for_bwd variants), which is what the contract
// hands to activation_backward.
dnnl::algorithm backward_algorithm(const Activation& a) {
  switch (a.kind) {
    case Activation::relu:
      return dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    case Activation::sigmoid:
      return dnnl::algorithm::eltwise_logistic_use_dst_for_bwd;
    case Activation::tanh:
      return dnnl::algorithm::eltwise_tanh_use_dst_for_bwd;
    default:
      break;
  }
  fail("oneDNN activation: no eltwise algorithm for {}", activation_name(a));
}

struct Prim {
  dnnl::primitive prim;
};

}  // namespace

void activation_forward(const Activation& a, const Tensor& x, Tensor& y) {
  if (x.numel() == 0) return;
  if (a == Activation::linear) {
    if (y.raw_data() != x.raw_data()) y.copy_from(x);
    return;
  }
  guarded("activation_forward", x.numel(), [&] {
    thread_local PrimitiveCache<Prim> cache;
    if (a == Activation::softmax) {
      auto md = rows_md(x);
      auto& e = cache.get(
          {0, static_cast<int>(a.kind), md.dims()[0], md.dims()[1], static_cast<int>(x.dtype())}, [&] {
            dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, 1);
            return Prim{dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(d, engine()))};
          });
      e.prim.execute(stream(), {{DNNL_ARG_SRC, wrap(md, x)}, {DNNL_ARG_DST, wrap(md, y)}});
      return;
    }
    auto md = flat_md(x);
    auto& e = cache.get({1, static_cast<int>(a.kind), x.numel(), static_cast<int>(x.dtype())}, [&] {
      dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, eltwise_algorithm(a), md, 0.f, 0.f);
      return Prim{dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, engine()))};
    });
    e.prim.execute(stream(), {{DNNL_ARG_SRC, wrap(md, x)}, {DNNL_ARG_DST, wrap(md, y)}});
  });
}

void activation_backward(const Activation& a, const Tensor& y, const Tensor& dy, Tensor& dx) {
  if (y.numel() == 0) return;
  if (a == Activation::linear) {
    if (dx.raw_data() != dy.raw_data()) dx.copy_from(dy);
    return;
  }
  guarded("activation_backward", y.numel(), [&] {
    thread_local PrimitiveCache<Prim> cache;
    if (a == Activation::softmax) {
      auto md = rows_md(y);
      auto& e = cache.get(
          {0, static_cast<int>(a.kind), md.dims()[0], md.dims()[1], static_cast<int>(y.dtype())}, [&] {
            // The backward primitive descriptor needs a forward one as a hint (layouts, algorithm).
            dnnl::softmax_forward::primitive_desc hint(
                dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, md, 1), engine());
            dnnl::softmax_backward::desc d(md, md, 1);
            return Prim{dnnl::softmax_backward(dnnl::softmax_backward::primitive_desc(d, engine(), hint))};
          });
      e.prim.execute(stream(), {{DNNL_ARG_DST, wrap(md, y)},
                                {DNNL_ARG_DIFF_DST, wrap(md, dy)},
                                {DNNL_ARG_DIFF_SRC, wrap(md, dx)}});
      return;
    }
    auto md = flat_md(y);
    auto& e = cache.get({1, static_cast<int>(a.kind), y.numel(), static_cast<int>(y.dtype())}, [&] {
      auto alg = backward_algorithm(a);
      dnnl::eltwise_forward::primitive_desc hint(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, md, 0.f, 0.f), engine());
      dnnl::eltwise_backward::desc d(alg, md, md, 0.f, 0.f);
      return Prim{dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(d, engine(), hint))};
    });
    e.prim.execute(
        stream(),
        {{DNNL_ARG_DST, wrap(md, y)}, {DNNL_ARG_DIFF_DST, wrap(md, dy)}, {DNNL_ARG_DIFF_SRC, wrap(md, dx)}});
  });
}

}  // namespace systolic::ops::onednn
