// The one backend-parity harness: every op of the list (SYSTOLIC_OPS, include/systolic/ops.h), on every backend
// present, in every dtype the backend takes (ops::supports), against the CPU's float64 loops on the same values.
//
// A case names its tensor arguments (shape, role, how their values are drawn) and how to call the op. For each
// backend and dtype the harness draws fresh values (twice, with two seeds: a backend that caches plans must read
// each call's data), rounds them to the dtype so the reference sees exactly what the backend sees, runs the
// reference on the CPU in float64 (float32 for ops that take nothing else; the same dtype for integer data),
// runs the backend with its outputs poisoned (NaN; a pattern for integers) and its accumulators holding random
// values (they must add to them), and compares every output and accumulator: the max error normalised by the
// reference's scale, within the tolerance of the op's family and the dtype. A case may also ask for a result
// equal bit for bit to the CPU's in the same dtype (dropout: the masks and the scaling).
//
// Adding an op: add its cases to `cases()` below (one entry with a name, the arguments and a call). An op of the
// list without cases fails OpHarness.EveryOpOfTheListHasCases. GPU cases (CudaOps.*) carry the CTest label gpu and
// skip visibly without a GPU or without the CUDA build.
#include <gmock/gmock.h>
#include <systolic/ops.h>
#include <systolic/system.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/xla/trace.h"
#include "gpu_test_util.h"
#include "ops/cpu/onednn.h"
#include "ops/optimizer_math.h"
#include "test_util.h"
#include "xla_test_util.h"

namespace systolic::ops {
namespace {

using systolic::testing::error_of;
using systolic::testing::normalised_max_error;
using ::testing::HasSubstr;

// ------------------------------------------------------------------------------------------------ a case

enum class Role {
  input,        // drawn values, read by the op
  output,       // poisoned, written by the op, compared
  accumulator,  // drawn values, added to by the op, compared
  inout,        // drawn values, overwritten in place by the op, compared
  absent,       // an undefined tensor
};
// The dtype of an argument: the case's (data), the case's but float32 under bfloat16 (parameters, statistics),
// or a fixed one (labels, indices, counters, data-set sources).
enum class Kind { data, param, fixed };
enum class Values {
  uniform,        // in [lo, hi]
  integers,       // whole numbers in [lo, hi]
  constant,       // lo
  tie_free,       // images (N, H, W, C) whose values differ within every pooling window, exact in bfloat16
  probabilities,  // in [lo, hi], the first three set to 0, 1 and 1e-9 (clipped by the loss)
};

struct Arg {
  std::string name;
  Shape shape;
  Role role = Role::input;
  Kind kind = Kind::data;
  DType fixed = DType::float32;
  Values values = Values::uniform;
  double lo = -1, hi = 1;
  std::int64_t offset =
      0;  // > 0: a view this many elements into a larger buffer, whose head must stay untouched
};

Arg in(std::string name, Shape s, double lo = -1, double hi = 1) {
  return {.name = std::move(name), .shape = std::move(s), .lo = lo, .hi = hi};
}
Arg out(std::string name, Shape s) {
  return {.name = std::move(name), .shape = std::move(s), .role = Role::output};
}
Arg acc(std::string name, Shape s, double lo = -1, double hi = 1) {
  return {.name = std::move(name), .shape = std::move(s), .role = Role::accumulator, .lo = lo, .hi = hi};
}
Arg inout(std::string name, Shape s, double lo = -1, double hi = 1) {
  return {.name = std::move(name), .shape = std::move(s), .role = Role::inout, .lo = lo, .hi = hi};
}
Arg none(std::string name) {
  return {.name = std::move(name), .shape = {}, .role = Role::absent};
}
Arg param(Arg a) {
  a.kind = Kind::param;
  return a;
}
Arg fixed(Arg a, DType t) {
  a.kind = Kind::fixed;
  a.fixed = t;
  return a;
}
Arg at_offset(Arg a, std::int64_t offset) {
  a.offset = offset;
  return a;
}
Arg labels(std::int64_t n, std::int64_t classes) {
  return fixed(
      {.name = "labels", .shape = {n}, .values = Values::integers, .lo = 0, .hi = double(classes - 1)},
      DType::int32);
}
Arg counter(std::string name, double value) {
  return fixed({.name = std::move(name), .shape = {1}, .values = Values::constant, .lo = value},
               DType::float64);
}
Arg total() {
  return fixed({.name = "total", .shape = {1}, .role = Role::accumulator, .lo = 0, .hi = 3}, DType::float64);
}
// A float64 accumulator of n counts (whole numbers 0..3 to start from).
Arg counts(std::int64_t n) {
  return fixed({.name = "counts",
                .shape = {n},
                .role = Role::accumulator,
                .values = Values::integers,
                .lo = 0,
                .hi = 3},
               DType::float64);
}

// Tolerance families: elementwise arithmetic, reductions (sums over rows or channels, softmax, losses), matrix
// products (TF32 on GPUs, as TensorFlow allows).
enum class Family { elementwise, reduction, matmul };

struct Case {
  std::string name;
  std::vector<Arg> args;
  std::function<void(std::vector<Tensor>&)> call;
  Family family = Family::elementwise;
  bool equal_to_cpu = false;  // also bit for bit equal to the CPU in the same (float32) dtype
  bool cpu_paths = false;     // a size for the CPU's size-dependent paths alone: other backends skip it
};

double tolerance(Family f, DType t, Device d) {
  if (t == DType::float64) return 1e-12;
  if (t == DType::int32 || t == DType::uint8) return 0;
  if (t == DType::bfloat16) return f == Family::elementwise ? 1e-2 : 3e-2;
  switch (f) {
    case Family::elementwise:
      return 1e-5;
    case Family::reduction:
      return 1e-4;
    case Family::matmul:
      return d.is_cuda() ? 5e-3 : 1e-4;  // TF32 on GPUs
  }
  return 0;
}

DType arg_dtype(const Arg& a, DType t) {
  if (a.kind == Kind::fixed) return a.fixed;
  if (a.kind == Kind::param && t == DType::bfloat16) return DType::float32;
  return t;
}

bool is_integer(DType t) {
  return t == DType::int32 || t == DType::uint8;
}

// The arguments' values as float64 on the host, drawn for `seed` and rounded to what `t` holds.
std::vector<Tensor> draw(const Case& c, DType t, std::uint64_t seed) {
  std::vector<Tensor> values;
  for (std::size_t k = 0; k < c.args.size(); ++k) {
    const Arg& a = c.args[k];
    if (a.role == Role::absent || a.role == Role::output) {
      values.emplace_back();
      continue;
    }
    DType dt = arg_dtype(a, t);
    Generator g(seed * 1000 + k);
    Tensor v(a.shape, DType::float64);
    double* p = v.data<double>();
    const std::int64_t n = v.numel();
    for (std::int64_t i = 0; i < n; ++i) {
      double u = g.uniform();
      switch (a.values) {
        case Values::uniform:
        case Values::probabilities:
          p[i] = is_integer(dt) && a.kind != Kind::fixed ? std::round(100 * u) : a.lo + (a.hi - a.lo) * u;
          break;
        case Values::integers:
          p[i] = std::floor(a.lo + (a.hi - a.lo + 1) * u);
          if (p[i] > a.hi) p[i] = a.hi;
          break;
        case Values::constant:
          p[i] = a.lo;
          break;
        case Values::tie_free:
          p[i] = 0;
          break;
      }
    }
    if (a.values == Values::probabilities)
      for (std::int64_t i = 0; i < std::min<std::int64_t>(3, n); ++i)
        p[i] = i == 0 ? 0.0 : i == 1 ? 1.0 : 1e-9;
    if (a.values == Values::tie_free) {
      const std::int64_t N = a.shape[0], H = a.shape[1], W = a.shape[2], C = a.shape[3];
      const std::int64_t shift = std::int64_t(seed % 97);
      for (std::int64_t b = 0; b < N; ++b)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t w = 0; w < W; ++w)
            for (std::int64_t ch = 0; ch < C; ++ch)
              p[((b * H + h) * W + w) * C + ch] =
                  double(((h * W + w) * 37 + ch * 11 + b * 5 + shift) % 251 - 125) / 128.0;
    }
    values.push_back(v.to(dt).to(DType::float64));  // what dt holds
  }
  return values;
}

// The tensors of one run on `device` in dtype `t`: drawn values, poisoned outputs, undefined absent ones. Views at
// an offset get their buffer's head filled with 7s (checked afterwards by untouched_heads).
struct Run {
  std::vector<Tensor> args, buffers;
};
Run make_run(const Case& c, const std::vector<Tensor>& values, DType t, Device device) {
  Run r;
  for (std::size_t k = 0; k < c.args.size(); ++k) {
    const Arg& a = c.args[k];
    if (a.role == Role::absent) {
      r.args.emplace_back();
      r.buffers.emplace_back();
      continue;
    }
    DType dt = arg_dtype(a, t);
    Tensor host({a.offset + a.shape.numel()}, dt);
    host.fill(7);
    Tensor body = host.view(a.offset, a.shape);
    if (a.role == Role::output) {
      if (is_integer(dt)) {
        std::memset(body.raw_data(), 0x5A, body.nbytes());
      } else {
        body.fill(std::nan(""));
      }
    } else {
      body.copy_from(values[k].to(dt));
    }
    Tensor buffer = host.to(device);
    r.buffers.push_back(buffer);
    r.args.push_back(buffer.view(a.offset, a.shape));
  }
  return r;
}

// Which arguments are compared: what the op writes.
bool written(const Arg& a) {
  return a.role == Role::output || a.role == Role::accumulator || a.role == Role::inout;
}

void expect_untouched_heads(const Case& c, const Run& r) {
  for (std::size_t k = 0; k < c.args.size(); ++k) {
    if (c.args[k].offset == 0 || !r.buffers[k].defined()) continue;
    auto head = r.buffers[k].view(0, {c.args[k].offset}).to_doubles();
    for (double v : head) EXPECT_EQ(v, 7.0) << c.args[k].name << ": the op wrote before its view";
  }
}

void expect_bitwise_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  Tensor g = got.to(Device::cpu()), w = want.to(Device::cpu());
  ASSERT_EQ(g.nbytes(), w.nbytes()) << what;
  EXPECT_EQ(std::memcmp(g.raw_data(), w.raw_data(), g.nbytes()), 0) << what << ": not bit for bit the CPU's";
}

// The dtypes a backend may run an op on; the CPU's reference dtype for `t`.
constexpr DType kDTypes[] = {DType::float32, DType::bfloat16, DType::float64, DType::int32, DType::uint8};

DType reference_dtype(Op op, DType t) {
  if (is_integer(t)) return t;
  return supports(op, DType::float64, Device::cpu()) ? DType::float64 : DType::float32;
}

// Runs every case of `op` on `device` in every dtype it supports there. Returns how many (case, dtype) runs
// compared something.
int check_op(Op op, const std::vector<Case>& cases, Device device) {
  int runs = 0;
  for (DType t : kDTypes) {
    if (!supports(op, t, device)) continue;
    DType ref_t = reference_dtype(op, t);
    if (device.is_cpu() && ref_t == t) continue;  // the reference itself
    for (const Case& c : cases) {
      if (c.cpu_paths && !device.is_cpu()) continue;
      for (std::uint64_t seed : {1, 2}) {
        SCOPED_TRACE(fmt::format("{} on {} in {}, seed {}", c.name, device.str(), dtype_name(t), seed));
        std::vector<Tensor> values = draw(c, t, seed);
        Run ref = make_run(c, values, ref_t, Device::cpu());
        Run got = make_run(c, values, t, device);
        c.call(ref.args);
        c.call(got.args);
        synchronize(device);
        const double tol = tolerance(c.family, t, device);
        for (std::size_t k = 0; k < c.args.size(); ++k) {
          if (!written(c.args[k])) continue;
          const double arg_tol = tolerance(c.family, arg_dtype(c.args[k], t), device);
          EXPECT_LE(normalised_max_error(got.args[k].to(Device::cpu()), ref.args[k]), std::max(tol, arg_tol))
              << c.args[k].name;
        }
        expect_untouched_heads(c, got);
        if (c.equal_to_cpu && !device.is_cpu() && t == DType::float32) {
          Run cpu = make_run(c, values, t, Device::cpu());
          c.call(cpu.args);
          for (std::size_t k = 0; k < c.args.size(); ++k)
            if (written(c.args[k])) expect_bitwise_equal(got.args[k], cpu.args[k], c.args[k].name);
        }
        ++runs;
      }
    }
  }
  return runs;
}

// ---------------------------------------------------------------------------------------------- the cases

Conv2DParams conv_params(int sh, int sw, int dh, int dw, int pt, int pb, int pl, int pr,
                         Activation act = Activation::linear) {
  Conv2DParams p;
  p.stride_h = sh, p.stride_w = sw, p.dilation_h = dh, p.dilation_w = dw;
  p.pad_top = pt, p.pad_bottom = pb, p.pad_left = pl, p.pad_right = pr;
  p.activation = act;
  return p;
}

Conv2DParams grouped(Conv2DParams p, int groups) {
  p.groups = groups;
  return p;
}

struct ConvShape {
  std::string name;
  std::int64_t N, H, W, C, KH, KW, F;
  Conv2DParams p;
  bool bias = true;
  Shape x() const { return {N, H, W, C}; }
  Shape w() const { return {KH, KW, C / p.groups, F}; }
  Shape y() const {
    return {N, (H + p.pad_top + p.pad_bottom - ((KH - 1) * p.dilation_h + 1)) / p.stride_h + 1,
            (W + p.pad_left + p.pad_right - ((KW - 1) * p.dilation_w + 1)) / p.stride_w + 1, F};
  }
};

std::vector<ConvShape> conv_shapes() {
  return {
      // The seed CNN (batch 4): 32x32x3 -> same 32 -> valid 32 -> pool -> same 64 -> valid 64.
      {"seed conv1 same", 4, 32, 32, 3, 3, 3, 32, conv_params(1, 1, 1, 1, 1, 1, 1, 1)},
      {"seed conv2 valid", 2, 32, 32, 32, 3, 3, 32, conv_params(1, 1, 1, 1, 0, 0, 0, 0)},
      {"seed conv4 valid, no bias", 2, 15, 15, 64, 3, 3, 64, conv_params(1, 1, 1, 1, 0, 0, 0, 0), false},
      {"1 sample, 5x7, 3x3 same", 1, 5, 7, 3, 3, 3, 4, conv_params(1, 1, 1, 1, 1, 1, 1, 1)},
      // Keras 'same' with stride 2 on an even input: the padding goes after (bottom/right).
      {"stride 2 same asymmetric", 3, 8, 8, 5, 3, 3, 6, conv_params(2, 2, 1, 1, 0, 1, 0, 1)},
      {"stride 2 even kernel same", 2, 9, 9, 8, 4, 4, 16, conv_params(2, 2, 1, 1, 1, 2, 1, 2)},
      {"even kernel same, no bias", 2, 10, 10, 6, 2, 2, 8, conv_params(1, 1, 1, 1, 0, 1, 0, 1), false},
      {"dilation 2, no bias", 2, 9, 11, 7, 3, 3, 9, conv_params(1, 1, 2, 2, 2, 2, 2, 2), false},
      {"dilation 3 asymmetric", 2, 12, 10, 4, 2, 2, 5, conv_params(1, 1, 3, 3, 1, 2, 1, 2)},
      {"mixed strides, asymmetric in W", 3, 7, 7, 17, 2, 3, 33, conv_params(1, 2, 1, 2, 0, 1, 2, 1)},
      {"1x1", 3, 6, 5, 16, 1, 1, 10, conv_params(1, 1, 1, 1, 0, 0, 0, 0)},
      {"5x5 stride 2", 1, 10, 10, 3, 5, 5, 32, conv_params(2, 2, 1, 1, 1, 2, 1, 2)},
      {"fused relu", 2, 9, 9, 8, 3, 3, 12, conv_params(1, 1, 1, 1, 1, 1, 1, 1, Activation::relu)},
      // Grouped (Conv2D groups) and depthwise (groups = C, F = C * depth_multiplier) convolutions.
      {"groups 2 stride 2 same", 2, 9, 8, 6, 3, 3, 4, grouped(conv_params(2, 2, 1, 1, 1, 1, 0, 1), 2)},
      {"groups 4 dilation 2, no bias", 2, 10, 9, 8, 3, 3, 12, grouped(conv_params(1, 1, 2, 2, 2, 2, 2, 2), 4),
       false},
      {"groups 3 mixed strides 2x3", 1, 7, 9, 9, 2, 3, 6, grouped(conv_params(1, 2, 1, 1, 0, 1, 1, 1), 3)},
      {"depthwise 3x3 stride 2 same, multiplier 2", 2, 8, 8, 5, 3, 3, 10,
       grouped(conv_params(2, 2, 1, 1, 0, 1, 0, 1), 5)},
      {"depthwise 7x7 same (ConvNeXt)", 1, 9, 9, 8, 7, 7, 8, grouped(conv_params(1, 1, 1, 1, 3, 3, 3, 3), 8)},
      {"depthwise 5x5 stride 2 valid, many channels", 2, 11, 11, 32, 5, 5, 32,
       grouped(conv_params(2, 2, 1, 1, 0, 0, 0, 0), 32)},
      {"depthwise dilation 2 same", 2, 9, 9, 6, 3, 3, 6, grouped(conv_params(1, 1, 2, 2, 2, 2, 2, 2), 6)},
      {"depthwise fused relu", 2, 6, 7, 4, 3, 3, 4,
       grouped(conv_params(1, 1, 1, 1, 1, 1, 1, 1, Activation::relu), 4)},
  };
}

void conv_cases(std::map<Op, std::vector<Case>>& m) {
  for (const ConvShape& s : conv_shapes()) {
    Conv2DParams p = s.p;
    m[Op::conv2d_forward].push_back({s.name,
                                     {in("x", s.x()), in("w", s.w(), -0.5, 0.5),
                                      s.bias ? param(in("b", {s.F})) : none("b"), out("y", s.y())},
                                     [p](auto& t) { conv2d_forward(t[0], t[1], t[2], t[3], p); },
                                     Family::matmul});
    if (p.activation != Activation::linear) continue;
    m[Op::conv2d_backward].push_back(
        {s.name,
         {in("x", s.x()), in("w", s.w(), -0.5, 0.5), in("dy", s.y()), out("dx", s.x()),
          param(acc("dw", s.w())), param(acc("db", {s.F}))},
         [p](auto& t) { conv2d_backward(t[0], t[1], t[2], t[3], t[4], t[5], p); },
         Family::matmul});
  }
  // Any subset of dx, dw, db; the others are left alone.
  ConvShape s{"subsets", 3, 8, 9, 5, 3, 3, 6, conv_params(2, 2, 1, 1, 0, 1, 1, 1)};
  for (int mask = 1; mask < 8; ++mask) {
    Conv2DParams p = s.p;
    m[Op::conv2d_backward].push_back(
        {fmt::format("subset dx {} dw {} db {}", mask & 1, (mask >> 1) & 1, (mask >> 2) & 1),
         {in("x", s.x()), in("w", s.w()), in("dy", s.y()), mask & 1 ? out("dx", s.x()) : none("dx"),
          mask & 2 ? param(acc("dw", s.w())) : none("dw"), mask & 4 ? param(acc("db", {s.F})) : none("db")},
         [p](auto& t) { conv2d_backward(t[0], t[1], t[2], t[3], t[4], t[5], p); },
         Family::matmul});
  }
  // The data gradient alone without x (Conv2DTranspose's forward), plain and depthwise.
  for (const ConvShape& t :
       {ConvShape{"dx without x", 2, 7, 8, 5, 3, 3, 6, conv_params(2, 2, 1, 1, 1, 1, 0, 1)},
        ConvShape{"depthwise dx without x", 2, 7, 8, 4, 3, 3, 8,
                  grouped(conv_params(2, 2, 1, 1, 1, 1, 0, 1), 4)}}) {
    Conv2DParams p = t.p;
    m[Op::conv2d_backward].push_back(
        {t.name,
         {none("x"), in("w", t.w()), in("dy", t.y()), out("dx", t.x()), none("dw"), none("db")},
         [p](auto& a) { conv2d_backward(a[0], a[1], a[2], a[3], a[4], a[5], p); },
         Family::matmul});
  }
}

Pool2DParams pool_params(PoolKind kind, int wh, int ww, int sh, int sw, int pt, int pb, int pl, int pr) {
  Pool2DParams p;
  p.kind = kind, p.window_h = wh, p.window_w = ww, p.stride_h = sh, p.stride_w = sw;
  p.pad_top = pt, p.pad_bottom = pb, p.pad_left = pl, p.pad_right = pr;
  return p;
}

void pool_cases(std::map<Op, std::vector<Case>>& m) {
  const PoolKind mx = PoolKind::max, avg = PoolKind::average;
  struct PoolShape {
    std::string name;
    std::int64_t N, H, W, C;
    Pool2DParams p;
  };
  std::vector<PoolShape> shapes = {
      {"seed max 2x2", 4, 30, 30, 32, pool_params(mx, 2, 2, 2, 2, 0, 0, 0, 0)},
      {"max 2x2 valid, odd input (last row and column get no gradient)", 2, 13, 13, 9,
       pool_params(mx, 2, 2, 2, 2, 0, 0, 0, 0)},
      {"max 3x3 stride 2 same (asymmetric)", 3, 8, 8, 5, pool_params(mx, 3, 3, 2, 2, 0, 1, 0, 1)},
      {"max 3x3 stride 1 same (overlapping)", 2, 7, 9, 4, pool_params(mx, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"max 2x3 mixed", 1, 8, 7, 33, pool_params(mx, 2, 3, 2, 1, 0, 1, 1, 1)},
      {"avg 3x3 stride 1 same", 2, 7, 9, 4, pool_params(avg, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"avg 2x2 stride 2 same (asymmetric)", 2, 15, 15, 8, pool_params(avg, 2, 2, 2, 2, 0, 1, 0, 1)},
      {"avg 3x3 stride 2 same (asymmetric)", 3, 8, 8, 5, pool_params(avg, 3, 3, 2, 2, 0, 1, 0, 1)},
      {"avg 2x3 mixed padding", 2, 9, 10, 6, pool_params(avg, 2, 3, 1, 2, 0, 1, 1, 1)},
      {"avg 2x2 valid", 4, 10, 10, 3, pool_params(avg, 2, 2, 2, 2, 0, 0, 0, 0)},
  };
  for (const PoolShape& s : shapes) {
    Pool2DParams p = s.p;
    Shape xs{s.N, s.H, s.W, s.C};
    Shape ys{s.N, (s.H + p.pad_top + p.pad_bottom - p.window_h) / p.stride_h + 1,
             (s.W + p.pad_left + p.pad_right - p.window_w) / p.stride_w + 1, s.C};
    Arg x = in("x", xs);
    x.values = Values::tie_free;  // no ties: on ties a backend may route the gradient to another tied cell
    // Inference (no workspace) and training (a workspace for backward).
    m[Op::pool2d_forward].push_back({s.name + ", inference",
                                     {x, out("y", ys)},
                                     [p](auto& t) {
                                       Tensor none;
                                       pool2d_forward(t[0], t[1], none, p);
                                     },
                                     Family::reduction});
    m[Op::pool2d_forward].push_back({s.name + ", training",
                                     {x, out("y", ys)},
                                     [p](auto& t) {
                                       Tensor workspace(Shape{0}, DType::uint8, t[0].device());
                                       pool2d_forward(t[0], t[1], workspace, p);
                                     },
                                     Family::reduction});
    // Backward after a training forward (its workspace), and without one (forward ran as inference).
    for (bool with_workspace : {true, false})
      m[Op::pool2d_backward].push_back(
          {s.name + (with_workspace ? ", workspace" : ", no workspace"),
           {x, in("dy", ys), out("dx", xs)},
           [p, with_workspace, ys](auto& t) {
             Tensor y(ys, t[0].dtype(), t[0].device());
             Tensor workspace = with_workspace ? Tensor(Shape{0}, DType::uint8, t[0].device()) : Tensor();
             pool2d_forward(t[0], y, workspace, p);
             pool2d_backward(t[0], y, t[1], workspace, t[2], p);
           },
           Family::reduction});
  }
}

void batch_norm_cases(std::map<Op, std::vector<Case>>& m) {
  const double eps = 1e-3;
  struct NormShape {
    Shape x;
    double lo, hi;
  };
  // Offset data (a non-zero mean; counts small enough that biased and unbiased variance differ), rows, rank 3, a
  // large mean over a small spread (the variance must not cancel).
  std::vector<NormShape> shapes = {{{3, 5, 7, 6}, 1, 4},
                                   {{1, 4, 4, 17}, -1, 3},
                                   {{64, 10}, -2, 3},
                                   {{2, 3, 9}, -1, 3},
                                   {{4, 8, 8, 32}, 1, 4},
                                   {{8, 16, 16, 8}, 999, 1001},
                                   // few channels (an image's 3; rows not a multiple of the loops' 8)
                                   {{5, 3, 3, 3}, -1, 3},
                                   {{37, 2}, 1, 4}};
  for (const NormShape& s : shapes) {
    const std::int64_t C = s.x[-1];
    std::string name = fmt::format("{} in [{}, {}]", s.x.str(), s.lo, s.hi);
    m[Op::batch_norm_forward_training].push_back(
        {name,
         {in("x", s.x, s.lo, s.hi), param(in("gamma", {C}, 0.5, 1.5)), param(in("beta", {C})), out("y", s.x),
          param(out("mean", {C})), param(out("var", {C}))},
         [eps](auto& t) { batch_norm_forward_training(t[0], t[1], t[2], t[3], t[4], t[5], eps, nullptr); },
         Family::reduction});
    m[Op::batch_norm_forward_inference].push_back(
        {name,
         {in("x", s.x, s.lo, s.hi), param(in("gamma", {C}, 0.5, 1.5)), param(in("beta", {C})),
          param(in("mean", {C}, s.lo, s.hi)), param(in("var", {C}, 0.2, 2.0)), out("y", s.x)},
         [eps](auto& t) { batch_norm_forward_inference(t[0], t[1], t[2], t[3], t[4], t[5], eps); },
         Family::reduction});
    if (s.lo > 100) continue;
    for (int mask : {7, 1, 6}) {  // everything, dx alone, the parameter gradients alone
      m[Op::batch_norm_backward].push_back(
          {fmt::format("{}, dx {} dgamma/dbeta {}", name, mask & 1, mask >> 1),
           {in("x", s.x, s.lo, s.hi), param(in("gamma", {C}, 0.5, 1.5)), param(in("mean", {C}, s.lo, s.hi)),
            param(in("var", {C}, 0.2, 2.0)), in("dy", s.x), mask & 1 ? out("dx", s.x) : none("dx"),
            mask & 2 ? param(acc("dgamma", {C})) : none("dgamma"),
            mask & 4 ? param(acc("dbeta", {C})) : none("dbeta")},
           [eps](auto& t) {
             batch_norm_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], eps, nullptr);
           },
           Family::reduction});
    }
  }
  // Keras's scale=False and center=False: no gamma (1) and no beta (0).
  Shape xs{3, 5, 7, 6};
  m[Op::batch_norm_forward_training].push_back(
      {"no gamma, no beta",
       {in("x", xs), none("gamma"), none("beta"), out("y", xs), param(out("mean", {6})),
        param(out("var", {6}))},
       [eps](auto& t) { batch_norm_forward_training(t[0], t[1], t[2], t[3], t[4], t[5], eps, nullptr); },
       Family::reduction});
  m[Op::batch_norm_forward_inference].push_back(
      {"no gamma, no beta",
       {in("x", xs), none("gamma"), none("beta"), param(in("mean", {6})), param(in("var", {6}, 0.2, 2)),
        out("y", xs)},
       [eps](auto& t) { batch_norm_forward_inference(t[0], t[1], t[2], t[3], t[4], t[5], eps); },
       Family::reduction});
  m[Op::batch_norm_backward].push_back(
      {"no gamma",
       {in("x", xs), none("gamma"), param(in("mean", {6})), param(in("var", {6}, 0.2, 2)), in("dy", xs),
        out("dx", xs), param(acc("dgamma", {6})), param(acc("dbeta", {6}))},
       [eps](auto& t) { batch_norm_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], eps, nullptr); },
       Family::reduction});
  // Synchronised over replicas (here two identical ones: every sum doubles, the statistics stay).
  m[Op::batch_norm_forward_training].push_back(
      {"synchronised",
       {in("x", xs, 1, 4), param(in("gamma", {6}, 0.5, 1.5)), param(in("beta", {6})), out("y", xs),
        param(out("mean", {6})), param(out("var", {6}))},
       [eps](auto& t) {
         CrossReplica twins{[](Tensor& sums) { scale_shift(sums, sums, 2.0, 0.0); }};
         batch_norm_forward_training(t[0], t[1], t[2], t[3], t[4], t[5], eps, &twins);
       },
       Family::reduction});
  m[Op::batch_norm_backward].push_back(
      {"synchronised",
       {in("x", xs, 1, 4), param(in("gamma", {6}, 0.5, 1.5)), param(in("mean", {6}, 1, 4)),
        param(in("var", {6}, 0.2, 2)), in("dy", xs), out("dx", xs), param(acc("dgamma", {6})),
        param(acc("dbeta", {6}))},
       [eps](auto& t) {
         CrossReplica twins{[](Tensor& sums) { scale_shift(sums, sums, 2.0, 0.0); }};
         batch_norm_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], eps, &twins);
       },
       Family::reduction});
}

void dense_cases(std::map<Op, std::vector<Case>>& m) {
  struct DenseShape {
    std::string name;
    Shape x;
    std::int64_t U;
    bool bias = true;
  };
  std::vector<DenseShape> shapes = {
      {"seed 2304 -> 512", {4, 2304}, 512},  {"seed 512 -> 10", {8, 512}, 10},
      {"M 13, odd sizes", {13, 70}, 33},     {"rank 3 input", {2, 5, 16}, 7},
      {"no bias", {9, 40}, 24, false},       {"one row, one unit", {1, 1}, 1},
      {"wide output", {33, 257}, 65, false}, {"batch 1, a head on an LSTM(64)", {1, 64}, 2},
  };
  for (const DenseShape& s : shapes) {
    Shape ys = s.x;
    ys[-1] = s.U;
    const std::int64_t K = s.x[-1];
    m[Op::dense_forward].push_back(
        {s.name,
         {in("x", s.x), in("w", {K, s.U}), s.bias ? param(in("b", {s.U})) : none("b"), out("y", ys)},
         [](auto& t) { dense_forward(t[0], t[1], t[2], t[3]); },
         Family::matmul});
    m[Op::dense_backward].push_back({s.name,
                                     {in("x", s.x), in("w", {K, s.U}), in("dy", ys), out("dx", s.x),
                                      param(acc("dw", {K, s.U})), param(acc("db", {s.U}))},
                                     [](auto& t) { dense_backward(t[0], t[1], t[2], t[3], t[4], t[5]); },
                                     Family::matmul});
  }
  // Parameters as views into one flat buffer at offsets that are not 16-byte aligned (as weights inside a model's
  // flat parameter buffer are).
  const std::int64_t M = 13, K = 70, U = 33;
  m[Op::dense_forward].push_back({"unaligned parameter views",
                                  {in("x", {M, K}), at_offset(in("w", {K, U}), 1),
                                   at_offset(param(in("b", {U})), 1 + K * U), out("y", {M, U})},
                                  [](auto& t) { dense_forward(t[0], t[1], t[2], t[3]); },
                                  Family::matmul});
  m[Op::dense_backward].push_back(
      {"unaligned parameter views",
       {in("x", {M, K}), at_offset(in("w", {K, U}), 1), in("dy", {M, U}), out("dx", {M, K}),
        at_offset(param(acc("dw", {K, U})), 1), at_offset(param(acc("db", {U})), 3)},
       [](auto& t) { dense_backward(t[0], t[1], t[2], t[3], t[4], t[5]); },
       Family::matmul});
  for (int mask = 1; mask < 8; ++mask)
    m[Op::dense_backward].push_back(
        {fmt::format("subset dx {} dw {} db {}", mask & 1, (mask >> 1) & 1, (mask >> 2) & 1),
         {in("x", {M, K}), in("w", {K, U}), in("dy", {M, U}), mask & 1 ? out("dx", {M, K}) : none("dx"),
          mask & 2 ? param(acc("dw", {K, U})) : none("dw"), mask & 4 ? param(acc("db", {U})) : none("db")},
         [](auto& t) { dense_backward(t[0], t[1], t[2], t[3], t[4], t[5]); },
         Family::matmul});
}

// Every activation of the list, with default and other parameters; elementwise ones on a large odd size too.
std::vector<Activation> activations() {
  std::vector<Activation> all;
#define SYSTOLIC_TEST_ACTIVATION(kind, name, alias) all.push_back(Activation::kind);
  SYSTOLIC_ACTIVATIONS(SYSTOLIC_TEST_ACTIVATION)
#undef SYSTOLIC_TEST_ACTIVATION
  Activation a = Activation::relu;
  a.max_value = 6;  // ReLU(max_value=6): relu6's path
  all.push_back(a);
  a.max_value = 2.5, a.alpha = 0.1, a.threshold = 0.3;  // every ReLU parameter
  all.push_back(a);
  a = Activation::relu;
  a.alpha = 0.2;  // leaky through relu's negative_slope
  all.push_back(a);
  a = Activation::leaky_relu;
  a.alpha = 0.01;
  all.push_back(a);
  a = Activation::elu;
  a.alpha = 0.5;
  all.push_back(a);
  a = Activation::gelu;
  a.approximate = true;
  all.push_back(a);
  return all;
}

std::string describe(const Activation& a) {
  std::string s = activation_name(a);
  if (!(a == Activation(a.kind)))
    s += fmt::format(" (alpha {}, max_value {}, threshold {}, approximate {})", a.alpha, a.max_value,
                     a.threshold, a.approximate);
  return s;
}

void activation_cases(std::map<Op, std::vector<Case>>& m) {
  for (const Activation& a : activations()) {
    const Family f = a.over_last_axis() ? Family::reduction : Family::elementwise;
    // The CPU runs activations of fewer than kOneDnnMinWork (4096) float32 values in its own loops, more through
    // oneDNN: shapes on both sides ({3, 1000} and {64, 100} for those paths alone: the other backends skip them).
    std::vector<Shape> shapes = {{5, 3, 37}, {3, 1000}, {1}, {64, 100}};
    if (!a.over_last_axis()) shapes.push_back({1000003});
    for (const Shape& s : shapes) {
      std::string name = describe(a) + " " + s.str();
      const bool cpu_paths = s == Shape({3, 1000}) || s == Shape({64, 100});
      m[Op::activation_forward].push_back({.name = name,
                                           .args = {in("x", s, -4, 4), out("y", s)},
                                           .call = [a](auto& t) { activation_forward(a, t[0], t[1]); },
                                           .family = f,
                                           .cpu_paths = cpu_paths});
      // Backward from the forward's own output (relu's zeros included).
      m[Op::activation_backward].push_back({.name = name,
                                            .args = {in("x", s, -4, 4), in("dy", s), out("dx", s)},
                                            .call =
                                                [a, s](auto& t) {
                                                  Tensor y(s, t[0].dtype(), t[0].device());
                                                  activation_forward(a, t[0], y);
                                                  activation_backward(a, t[0], y, t[1], t[2]);
                                                },
                                            .family = f,
                                            .cpu_paths = cpu_paths});
    }
    // In place: y aliases x; dx aliases dy, without x when the gradient needs only y.
    Shape s{4, 3, 3, 10};
    m[Op::activation_forward].push_back({describe(a) + " in place",
                                         {inout("x", s, -4, 4)},
                                         [a](auto& t) { activation_forward(a, t[0], t[0]); },
                                         f});
    m[Op::activation_backward].push_back({describe(a) + " in place",
                                          {in("x", s, -4, 4), inout("dy", s)},
                                          [a, s](auto& t) {
                                            Tensor y(s, t[0].dtype(), t[0].device());
                                            activation_forward(a, t[0], y);
                                            Tensor x = a.backward_needs_input() ? t[0] : Tensor();
                                            activation_backward(a, x, y, t[1], t[1]);
                                          },
                                          f});
  }
}

void elementwise_cases(std::map<Op, std::vector<Case>>& m) {
  const Shape big{1000003}, image{3, 5, 7, 6};
  for (const Shape& s : {big, Shape{37, 27}}) {
    m[Op::fill].push_back({"fill " + s.str(), {out("x", s)}, [](auto& t) { fill(t[0], 2.7); }});
    m[Op::fill].push_back({"fill 200 " + s.str(), {out("x", s)}, [](auto& t) { fill(t[0], 200); }});
    m[Op::copy].push_back(
        {"copy " + s.str(), {in("src", s), out("dst", s)}, [](auto& t) { copy(t[0], t[1]); }});
    m[Op::accumulate].push_back(
        {"accumulate " + s.str(), {in("src", s), acc("dst", s)}, [](auto& t) { accumulate(t[0], t[1]); }});
    m[Op::scale_shift].push_back({"scale_shift " + s.str(), {in("x", s), out("y", s)}, [](auto& t) {
                                    scale_shift(t[0], t[1], -0.37, 1.25);
                                  }});
    m[Op::moving_average].push_back({"moving_average " + s.str(),
                                     {param(acc("moving", s)), param(in("value", s))},
                                     [](auto& t) { moving_average(t[0], t[1], 0.99); }});
  }
  m[Op::copy].push_back({"copy to another shape, same count",
                         {in("src", {37, 27}), out("dst", {999})},
                         [](auto& t) { copy(t[0], t[1]); }});
  m[Op::fill].push_back(
      {"fill a step counter", {fixed(out("step", {1}), DType::float64)}, [](auto& t) { fill(t[0], 41); }});
  m[Op::scale_shift].push_back(
      {"scale_shift in place", {inout("x", big)}, [](auto& t) { scale_shift(t[0], t[0], 3.0, -0.5); }});
  m[Op::scale_shift].push_back({"the step counter advances three times",
                                {fixed(inout("step", {1}, 0, 5), DType::float64)},
                                [](auto& t) {
                                  for (int i = 0; i < 3; ++i) scale_shift(t[0], t[0], 1.0, 1.0);
                                }});

  // cast: from each float type (fixed) into the case's.
  for (DType from : {DType::float32, DType::bfloat16, DType::float64})
    m[Op::cast].push_back({fmt::format("cast from {}", dtype_name(from)),
                           {fixed(in("src", {1000003}, -300, 300), from), out("dst", {1000003})},
                           [](auto& t) { cast(t[0], t[1]); }});

  // cast to int32 (Embedding's ids): whole and fractional values of both signs, huge ones and the int32 limits.
  {
    Case ids{"cast float ids to int32 (toward zero; out of range: INT32_MIN)",
             {fixed(in("src", {4099}, -3e9, 3e9), DType::float32), fixed(out("dst", {4099}), DType::int32)},
             [](auto& t) { cast(t[0], t[1]); }};
    m[Op::cast].push_back(ids);
    m[Op::cast].push_back(
        {"cast small ids to int32",
         {fixed(in("src", {1001}, -20.5, 20.5), DType::float64), fixed(out("dst", {1001}), DType::int32)},
         [](auto& t) { cast(t[0], t[1]); }});
  }

  // add_n: 3 inputs; 11 (more than one CUDA launch takes) into its first input; none (zeros).
  {
    Case three{"add_n of 3", {in("x0", big), in("x1", big), in("x2", big), out("y", big)}, [](auto& t) {
                 add_n({t[0], t[1], t[2]}, t[3]);
               }};
    m[Op::add_n].push_back(three);
    Case eleven{"add_n of 11 into its first input", {}, [](auto& t) { add_n(t, t[0]); }};
    eleven.args.push_back(inout("x0", {1001}));
    for (int k = 1; k < 11; ++k) eleven.args.push_back(in(fmt::format("x{}", k), {1001}));
    m[Op::add_n].push_back(eleven);
    m[Op::add_n].push_back({"add_n of none", {out("y", {17})}, [](auto& t) { add_n({}, t[0]); }});
  }

  // dropout: masks for several steps and rates, an undefined step (step 0), in place backward. Values without
  // zeros, so a dropped element shows.
  for (double step : {0.0, 5.0, 123456.0})
    for (double rate : {0.1, 0.5}) {
      std::string name = fmt::format("step {} rate {}", step, rate);
      m[Op::dropout_forward].push_back({name,
                                        {in("x", big, 0.5, 1.5), out("y", big), counter("step", step)},
                                        [rate](auto& t) { dropout_forward(t[0], t[1], rate, 99, t[2]); },
                                        Family::elementwise,
                                        true});
      m[Op::dropout_backward].push_back({name + ", in place",
                                         {inout("dy", big, 0.5, 1.5), counter("step", step)},
                                         [rate](auto& t) { dropout_backward(t[0], t[0], rate, 99, t[1]); },
                                         Family::elementwise,
                                         true});
    }
  m[Op::dropout_forward].push_back({"undefined step",
                                    {in("x", {4099}, 0.5, 1.5), out("y", {4099}), none("step")},
                                    [](auto& t) { dropout_forward(t[0], t[1], 0.3, 7, t[2]); },
                                    Family::elementwise,
                                    true});
  m[Op::dropout_backward].push_back({"undefined step",
                                     {in("dy", {4099}, 0.5, 1.5), out("dx", {4099}), none("step")},
                                     [](auto& t) { dropout_backward(t[0], t[1], 0.3, 7, t[2]); },
                                     Family::elementwise,
                                     true});

  // Padding, asymmetric.
  for (Pad2D p : {Pad2D{1, 2, 0, 3}, Pad2D{0, 0, 0, 0}, Pad2D{2, 2, 2, 2}}) {
    Shape ys{3, 5 + p.top + p.bottom, 7 + p.left + p.right, 6};
    std::string name = fmt::format("pad top {} bottom {} left {} right {}", p.top, p.bottom, p.left, p.right);
    m[Op::pad2d_forward].push_back(
        {name, {in("x", image), out("y", ys)}, [p](auto& t) { pad2d_forward(t[0], t[1], p); }});
    m[Op::pad2d_backward].push_back(
        {name, {in("dy", ys), out("dx", image)}, [p](auto& t) { pad2d_backward(t[0], t[1], p); }});
  }

  // Concatenation on axes 0, 1 and 3; backward with the middle gradient undefined.
  for (int axis : {0, 1, 3}) {
    std::vector<Shape> parts = {{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}};
    parts[1][axis] = 1;
    parts[2][axis] = 7;
    Shape ys = parts[0];
    ys[axis] += 1 + 7;
    std::string name = fmt::format("axis {}", axis);
    m[Op::concat_forward].push_back(
        {name, {in("x0", parts[0]), in("x1", parts[1]), in("x2", parts[2]), out("y", ys)}, [axis](auto& t) {
           concat_forward({t[0], t[1], t[2]}, t[3], axis);
         }});
    m[Op::concat_backward].push_back(
        {name,
         {in("dy", ys), out("dx0", parts[0]), out("dx1", parts[1]), out("dx2", parts[2])},
         [axis](auto& t) {
           std::vector<Tensor> dxs = {t[1], t[2], t[3]};
           concat_backward(t[0], dxs, axis);
         }});
    m[Op::concat_backward].push_back({name + ", middle gradient undefined",
                                      {in("dy", ys), out("dx0", parts[0]), none("dx1"), out("dx2", parts[2])},
                                      [axis](auto& t) {
                                        std::vector<Tensor> dxs = {t[1], t[2], t[3]};
                                        concat_backward(t[0], dxs, axis);
                                      }});
  }

  // Gathering rows: uint8 images, float64 rows, int32 labels; repeated and reversed indices.
  Arg idx =
      fixed({.name = "indices", .shape = {7}, .values = Values::integers, .lo = 0, .hi = 49}, DType::int32);
  m[Op::gather_rows].push_back(
      {"uint8 images",
       {fixed(in("src", {50, 4, 5, 3}, 0, 255), DType::uint8), idx, out("dst", {7, 4, 5, 3})},
       [](auto& t) { gather_rows(t[0], t[1], t[2]); }});
  m[Op::gather_rows].push_back({"float64 rows",
                                {fixed(in("src", {50, 6}), DType::float64), idx, out("dst", {7, 6})},
                                [](auto& t) { gather_rows(t[0], t[1], t[2]); }});
  m[Op::gather_rows].push_back({"int32 labels",
                                {fixed(labels(50, 10), DType::int32), idx, out("dst", {7})},
                                [](auto& t) { gather_rows(t[0], t[1], t[2]); }});

  // Scattering rows back (Embedding's gradient): repeated indices add up, into float32 or float64 tables.
  Arg many =
      fixed({.name = "indices", .shape = {300}, .values = Values::integers, .lo = 0, .hi = 9}, DType::int32);
  m[Op::scatter_add_rows].push_back({"300 rows into 10, repeated",
                                     {in("src", {300, 8}), many, param(acc("dst", {10, 8}))},
                                     [](auto& t) { scatter_add_rows(t[0], t[1], t[2]); },
                                     Family::reduction});
  m[Op::scatter_add_rows].push_back({"rows of (4, 3) into a table of 50",
                                     {in("src", {7, 4, 3}), idx, param(acc("dst", {50, 4, 3}))},
                                     [](auto& t) { scatter_add_rows(t[0], t[1], t[2]); }});

  // Masks: rows of three 0-or-1 values (some all 0), compared with 0; ids (one column) compared with 0; rows of
  // values compared with 0.5 (none equal: every row kept).
  m[Op::compute_mask].push_back(
      {"rows of 0 and 1 against 0",
       {{.name = "x", .shape = {64, 3}, .values = Values::integers, .lo = 0, .hi = 1}, out("mask", {64})},
       [](auto& t) { compute_mask(t[0], 0.0, t[1]); }});
  m[Op::compute_mask].push_back(
      {"ids against 0",
       {{.name = "x", .shape = {5, 13}, .values = Values::integers, .lo = 0, .hi = 3}, out("mask", {5, 13})},
       [](auto& t) { compute_mask(t[0], 0.0, t[1]); }});
  m[Op::compute_mask].push_back({"values against 0.5",
                                 {in("x", {7, 4, 6}), out("mask", {7, 4})},
                                 [](auto& t) { compute_mask(t[0], 0.5, t[1]); }});

  // Recurrent cells: each kind with and without a mask (some rows masked), and LSTM with other activations; each
  // kind also over values as large as +-40 (the float32 CPU's rows clamp exp's argument) and 37 units (vector
  // lengths and a tail).
  for (double range : {2.0, 40.0}) {
    const std::int64_t N = 5, u = range > 2 ? 37 : 7;
    struct Cell {
      std::string name;
      RnnCellParams p;
    };
    RnnCellParams other{.cell = RnnCell::lstm,
                        .activation = Activation::softsign,
                        .recurrent_activation = Activation::hard_sigmoid};
    for (const Cell& cell : {Cell{"simple", {.cell = RnnCell::simple}}, Cell{"lstm", {.cell = RnnCell::lstm}},
                             Cell{"gru", {.cell = RnnCell::gru}},
                             Cell{"gru reset_after=False", {.cell = RnnCell::gru, .reset_after = false}},
                             Cell{"lstm softsign hard_sigmoid", other}})
      for (bool masked : {false, true}) {
        const RnnCellParams p = cell.p;
        const bool lstm = p.cell == RnnCell::lstm, gru = p.cell == RnnCell::gru;
        const std::int64_t G = (lstm ? 4 : gru ? 3 : 1) * u;
        if (range > 2 && p.activation.kind != Activation::tanh) continue;
        std::string name = cell.name + (masked ? ", rows masked" : "") + (range > 2 ? ", large values" : "");
        Arg mask = masked ? Arg{.name = "mask", .shape = {N}, .values = Values::integers, .lo = 0, .hi = 1}
                          : none("mask");
        m[Op::rnn_cell_forward].push_back(
            {name,
             {in("x_part", {N, G}, -range, range), in("h_part", {N, G}, -range, range), in("h_prev", {N, u}),
              lstm ? in("c_prev", {N, u}, -range, range) : none("c_prev"), mask, out("h", {N, u}),
              lstm ? out("c", {N, u}) : none("c"), out("z", {N, G})},
             [p](auto& t) { rnn_cell_forward(p, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]); }});
        m[Op::rnn_cell_backward].push_back(
            {name,
             {gru ? in("h_part", {N, G}, -range, range) : none("h_part"),
              gru ? in("h_prev", {N, u}) : none("h_prev"),
              lstm ? in("c_prev", {N, u}, -range, range) : none("c_prev"), in("z", {N, G}, -range, range),
              lstm ? in("c", {N, u}, -range, range) : none("c"), mask, in("dh", {N, u}),
              lstm ? in("dc", {N, u}) : none("dc"), out("dx_part", {N, G}), out("dh_part", {N, G}),
              out("dh_prev", {N, u}), lstm ? out("dc_prev", {N, u}) : none("dc_prev")},
             [p](auto& t) {
               rnn_cell_backward(p, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11]);
             }});
      }
  }

  // The whole recurrence (oneDNN's RNN primitives on the CPU, against the float64 loops): each cell with the
  // activations the op takes, both directions, with and without initial states (and their gradients), forward in
  // inference and training, backward after a training forward (its workspace) and without one; 37 units and 11
  // features for the vector tails.
  {
    struct Cell {
      std::string name;
      RnnCellParams p;
    };
    const std::vector<Cell> cells{
        {"simple tanh", {.cell = RnnCell::simple}},
        {"simple relu", {.cell = RnnCell::simple, .activation = Activation::relu}},
        {"simple sigmoid", {.cell = RnnCell::simple, .activation = Activation::sigmoid}},
        {"lstm", {.cell = RnnCell::lstm}},
        {"gru", {.cell = RnnCell::gru}},
        {"gru reset_after=False", {.cell = RnnCell::gru, .reset_after = false}}};
    for (const Cell& cell : cells)
      for (bool reverse : {false, true})
        for (bool given : {false, true}) {
          const RnnCellParams p = cell.p;
          const bool lstm = p.cell == RnnCell::lstm, two = p.cell == RnnCell::gru && p.reset_after;
          const std::int64_t T = 5, N = given ? 3 : 4, F = given ? 4 : 11, u = given ? 6 : 37;
          const std::int64_t G = (lstm ? 4 : p.cell == RnnCell::gru ? 3 : 1) * u;
          const Shape bias = two ? Shape{2, G} : Shape{G};
          const double w = given ? 0.5 : 0.2;  // the weights' range: pre-activations of a few units
          const std::string name =
              cell.name + (reverse ? ", reverse" : "") + (given ? ", initial states" : "");
          const bool training = reverse != given;
          auto state = [&](const char* n, bool wanted) { return wanted ? in(n, {N, u}) : none(n); };
          m[Op::rnn_sequence_forward].push_back(
              {name + (training ? ", training" : ", inference"),
               {in("x", {T, N, F}), in("kernel", {F, G}, -w, w), in("recurrent", {u, G}, -w, w),
                in("bias", bias, -w, w), state("h0", given), state("c0", given && lstm), out("y", {T, N, u}),
                out("h_last", {N, u}), lstm ? out("c_last", {N, u}) : none("c_last")},
               [p, reverse, training](auto& t) {
                 Tensor ws = training ? Tensor(Shape{0}, DType::uint8, t[0].device()) : Tensor();
                 rnn_sequence_forward(p, reverse, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], ws);
               },
               Family::matmul});
          m[Op::rnn_sequence_backward].push_back(
              {name + (training ? ", workspace" : ", no workspace"),
               {in("x", {T, N, F}), in("kernel", {F, G}, -w, w), in("recurrent", {u, G}, -w, w),
                in("bias", bias, -w, w), state("h0", given), state("c0", given && lstm), in("dy", {T, N, u}),
                in("dh_last", {N, u}), lstm ? in("dc_last", {N, u}) : none("dc_last"), out("dx", {T, N, F}),
                acc("dkernel", {F, G}), acc("drecurrent", {u, G}), acc("dbias", bias),
                given ? out("dh0", {N, u}) : none("dh0"), given && lstm ? out("dc0", {N, u}) : none("dc0")},
               [p, reverse, training, T, N, u](auto& t) {
                 Tensor y({T, N, u}, t[0].dtype(), t[0].device()), none;
                 Tensor ws = training ? Tensor(Shape{0}, DType::uint8, t[0].device()) : Tensor();
                 rnn_sequence_forward(p, reverse, t[0], t[1], t[2], t[3], t[4], t[5], y, none, none, ws);
                 rnn_sequence_backward(p, reverse, t[0], t[1], t[2], t[3], t[4], t[5], y, ws, t[6], t[7],
                                       t[8], t[9], t[10], t[11], t[12], t[13], t[14]);
               },
               Family::matmul});
        }
    // The CPU runs inference of at most 2^17 multiply-adds (the smaller cases above) in its own loops, and more
    // through oneDNN's primitive: 96 rows and steps of 37 units for the latter.
    for (const Cell& cell : cells) {
      const RnnCellParams p = cell.p;
      const bool lstm = p.cell == RnnCell::lstm, two = p.cell == RnnCell::gru && p.reset_after;
      const std::int64_t T = 12, N = 8, F = 11, u = 37;
      const std::int64_t G = (lstm ? 4 : p.cell == RnnCell::gru ? 3 : 1) * u;
      m[Op::rnn_sequence_forward].push_back(
          {cell.name + ", inference over 96 rows and steps",
           {in("x", {T, N, F}), in("kernel", {F, G}, -0.2, 0.2), in("recurrent", {u, G}, -0.2, 0.2),
            in("bias", two ? Shape{2, G} : Shape{G}, -0.2, 0.2), none("h0"), none("c0"), out("y", {T, N, u}),
            out("h_last", {N, u}), lstm ? out("c_last", {N, u}) : none("c_last")},
           [p](auto& t) {
             Tensor ws;
             rnn_sequence_forward(p, false, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], ws);
           },
           Family::matmul});
    }
    // One step of one row (a streaming LSTM(64) at batch 1), and a GRU without biases, in the CPU's loops.
    for (const Cell& cell : {cells[3], cells[4]}) {
      const RnnCellParams p = cell.p;
      const bool lstm = p.cell == RnnCell::lstm;
      const std::int64_t u = lstm ? 64 : 9, G = (lstm ? 4 : 3) * u, T = lstm ? 1 : 3, F = lstm ? 1 : 2;
      m[Op::rnn_sequence_forward].push_back(
          {cell.name + (lstm ? ", one step of one row" : ", no bias, inference"),
           {in("x", {T, 1, F}), in("kernel", {F, G}, -0.3, 0.3), in("recurrent", {u, G}, -0.3, 0.3),
            lstm ? in("bias", {G}, -0.3, 0.3) : none("bias"), in("h0", {1, u}),
            lstm ? in("c0", {1, u}) : none("c0"), out("y", {T, 1, u}), out("h_last", {1, u}),
            lstm ? out("c_last", {1, u}) : none("c_last")},
           [p](auto& t) {
             Tensor ws;
             rnn_sequence_forward(p, false, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], ws);
           },
           Family::matmul});
    }
  }

  // No step at all: the final states are the initial ones, and their gradients pass straight back.
  {
    const RnnCellParams p{.cell = RnnCell::lstm};
    const std::int64_t N = 3, F = 4, u = 5, G = 4 * u;
    m[Op::rnn_sequence_forward].push_back(
        {"lstm, no steps",
         {in("x", {0, N, F}), in("kernel", {F, G}), in("recurrent", {u, G}), in("bias", {G}),
          in("h0", {N, u}), in("c0", {N, u}), out("y", {0, N, u}), out("h_last", {N, u}),
          out("c_last", {N, u})},
         [p](auto& t) {
           Tensor none;
           rnn_sequence_forward(p, false, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], none);
         },
         Family::matmul});
    m[Op::rnn_sequence_backward].push_back(
        {"lstm, no steps",
         {in("x", {0, N, F}), in("kernel", {F, G}), in("recurrent", {u, G}), in("bias", {G}),
          in("h0", {N, u}), in("c0", {N, u}), in("y", {0, N, u}), in("dh_last", {N, u}),
          in("dc_last", {N, u}), acc("dkernel", {F, G}), out("dh0", {N, u}), out("dc0", {N, u})},
         [p](auto& t) {
           Tensor none;
           rnn_sequence_backward(p, false, t[0], t[1], t[2], t[3], t[4], t[5], t[6], none, none, t[7], t[8],
                                 none, t[9], none, none, t[10], t[11]);
         },
         Family::matmul});
  }

  // Augmentation: fill nearest and constant, small and large shifts, flips; one channel as (N, H, W).
  for (bool constant : {false, true})
    for (double range : {0.2, 3.5}) {
      AugmentParams p{.width_shift_range = range,
                      .height_shift_range = range * 0.7,
                      .horizontal_flip = true,
                      .fill_constant = constant,
                      .cval = -2};
      m[Op::augment_images].push_back({fmt::format("constant {} range {}", constant, range),
                                       {in("x", {9, 13, 11, 3}, 0, 255), out("y", {9, 13, 11, 3})},
                                       [p](auto& t) { augment_images(t[0], t[1], p, 5, 17); }});
    }
  m[Op::augment_images].push_back(
      {"one channel (N, H, W)", {in("x", {4, 6, 6}, 0, 1), out("y", {4, 6, 6})}, [](auto& t) {
         augment_images(t[0], t[1], {.width_shift_range = 0.3, .horizontal_flip = true}, 8, 0);
       }});
}

void loss_cases(std::map<Op, std::vector<Case>>& m) {
  for (std::int64_t C : {10, 37, 1000}) {
    const std::int64_t N = C == 1000 ? 64 : 300;
    Shape ps{N, C};
    for (bool sparse : {true, false}) {
      std::string name = fmt::format("{} C {}", sparse ? "sparse" : "dense", C);
      Arg y = sparse ? labels(N, C) : param(in("labels", ps, 0, 1));
      // Keras's sample weights (some 0) on one class count of each kind.
      const bool weighted = C == 37;
      Arg w = weighted ? param(in("weights", {N}, 0, 3)) : none("weights");
      if (weighted) name += ", sample weights";
      m[Op::softmax_cross_entropy].push_back(
          {name,
           {in("logits", ps, -5, 5), y, w, total(), out("dlogits", ps)},
           [N](auto& t) { softmax_cross_entropy(t[0], t[1], t[2], t[3], t[4], 1.0 / N); },
           Family::reduction});
      m[Op::softmax_cross_entropy].push_back(
          {name + ", no gradient",
           {in("logits", ps, -5, 5), y, w, total(), none("dlogits")},
           [](auto& t) { softmax_cross_entropy(t[0], t[1], t[2], t[3], t[4], 1.0); },
           Family::reduction});
      Arg probs = in("probabilities", ps, 0.01, 0.99);
      probs.values = Values::probabilities;
      m[Op::crossentropy_from_probabilities].push_back(
          {name + ", clipped values",
           {probs, y, w, total(), out("dprobs", ps)},
           [](auto& t) { crossentropy_from_probabilities(t[0], t[1], t[2], t[3], t[4], 0.5, 1e-7); },
           Family::reduction});
      // Whole numbers: many tied maxima (predictions and dense labels), where the first one counts on every backend.
      Arg pred = in("predictions", ps, 0, 2), tied = param(in("labels", ps, 0, 2));
      pred.values = tied.values = Values::integers;
      // k = 1 (argmax) and k = 3 (in_top_k, where ties at the boundary count as in).
      for (int k : {1, 3}) {
        m[Op::accuracy_count].push_back({fmt::format("{}, ties, k {}", name, k),
                                         {pred, sparse ? labels(N, C) : tied, w, total()},
                                         [k](auto& t) { accuracy_count(t[0], t[1], t[2], t[3], k); },
                                         Family::reduction});
        m[Op::accuracy_count].push_back({fmt::format("{}, k {}", name, k),
                                         {in("predictions", ps), y, w, total()},
                                         [k](auto& t) { accuracy_count(t[0], t[1], t[2], t[3], k); },
                                         Family::reduction});
      }
    }
  }
  // Sequences: predictions [N, T, C] are T rows per sample, which a loss and accuracy mean over the sample; labels one
  // per row; weights one per sample, or one per row (a mask's, ops::mask_weights: some 0).
  {
    const std::int64_t N = 6, T = 5, C = 7;
    const Shape ps{N, T, C};
    for (int weighting : {0, 1, 2}) {
      const std::string name = fmt::format("sequences [6, 5, 7]{}", weighting == 0   ? ""
                                                                    : weighting == 1 ? ", sample weights"
                                                                                     : ", row weights");
      auto w = [&] {
        return weighting == 0   ? none("weights")
               : weighting == 1 ? param(in("weights", {N}, 0, 3))
                                : param(in("weights", {N, T}, 0, 2));
      };
      for (bool sparse : {true, false}) {
        auto y = [&] {
          return sparse ? fixed({.name = "labels",
                                 .shape = {N, T},
                                 .values = Values::integers,
                                 .lo = 0,
                                 .hi = double(C - 1)},
                                DType::int32)
                        : param(in("labels", ps, 0, 1));
        };
        const std::string what = name + (sparse ? ", sparse" : ", dense");
        m[Op::softmax_cross_entropy].push_back(
            {what,
             {in("logits", ps, -5, 5), y(), w(), total(), out("dlogits", ps)},
             [N](auto& t) { softmax_cross_entropy(t[0], t[1], t[2], t[3], t[4], 1.0 / N); },
             Family::reduction});
        Arg probs = in("probabilities", ps, 0.01, 0.99);
        probs.values = Values::probabilities;
        m[Op::crossentropy_from_probabilities].push_back(
            {what,
             {probs, y(), w(), total(), out("dprobs", ps)},
             [](auto& t) { crossentropy_from_probabilities(t[0], t[1], t[2], t[3], t[4], 0.5, 1e-7); },
             Family::reduction});
        m[Op::accuracy_count].push_back({what,
                                         {in("predictions", ps), y(), w(), total()},
                                         [](auto& t) { accuracy_count(t[0], t[1], t[2], t[3], 1); },
                                         Family::reduction});
      }
      m[Op::elementwise_loss].push_back(
          {name,
           {in("predictions", ps, -2, 2), param(in("targets", ps, -2, 2)), w(), total(), out("dpred", ps)},
           [N](auto& t) {
             elementwise_loss(t[0], t[1], t[2], t[3], t[4], {.kind = ElementLoss::squared_error}, 1.0 / N);
           },
           Family::reduction});
      m[Op::row_loss].push_back(
          {name,
           {in("predictions", ps, -2, 2), param(in("targets", ps, 0, 1)), w(), total(), out("dpred", ps)},
           [N](auto& t) {
             row_loss(t[0], t[1], t[2], t[3], t[4], {.kind = RowLoss::categorical_hinge}, 1.0 / N);
           },
           Family::reduction});
    }
  }
  // Sparse labels out of [0, C) (a loss's ignore_class of -1, a class too many) are misses, for k = 1 and in_top_k.
  for (int k : {1, 3}) {
    Arg outside = fixed({.name = "labels", .shape = {97}, .values = Values::integers, .lo = -2, .hi = 12},
                        DType::int32);
    m[Op::accuracy_count].push_back({fmt::format("sparse C 10, labels -2..12, k {}", k),
                                     {in("predictions", {97, 10}), outside, none("weights"), total()},
                                     [k](auto& t) { accuracy_count(t[0], t[1], t[2], t[3], k); },
                                     Family::reduction});
  }
  // Confusion counts: Keras's AUC thresholds (predictions clipped, some outside [0, 1]; from logits), one
  // threshold (Precision, Recall), one class of several, thresholds given (Keras's lists).
  static constexpr double kGivenThresholds[] = {0.7, -1e-7, 0.3, 0.3, 1.0000001, 0.55};
  struct Confusion {
    std::string name;
    ConfusionParams p;
    Shape s;
    double lo, hi;
  };
  const std::vector<Confusion> confusions{
      {"200 thresholds, clipped", {.thresholds = 200, .clip = true}, {37, 1}, -0.2, 1.2},
      {"50 thresholds from logits", {.thresholds = 50, .from_logits = true, .clip = true}, {29, 2}, -4, 4},
      {"threshold 0.5", {}, {41, 1}, 0, 1},
      {"class 1 of 3 at 0.3", {.threshold = 0.3, .class_id = 1}, {23, 3}, 0, 1},
      {"37 thresholds with exact ends, clipped",
       {.thresholds = 37, .clip = true, .exact_ends = true},
       {31, 2},
       -0.2,
       1.2},
      {"top 2 of 5, ties", {.threshold = -1e10, .top_k = 2}, {27, 5}, 0, 2},
      {"top 1 of 40, class 3", {.threshold = 0.4, .class_id = 3, .top_k = 1}, {19, 40}, 0, 1},
      {"6 thresholds given: unsorted, tied, beyond [0, 1]",
       {.thresholds = 6, .values = kGivenThresholds},
       {33, 2},
       -0.2,
       1.2},
      {"3 thresholds given, from logits",
       {.thresholds = 3, .from_logits = true, .values = std::span(kGivenThresholds).first(3)},
       {21, 1},
       -4,
       4},
  };
  for (const Confusion& k : confusions) {
    Arg y = param(in("labels", k.s, 0, 1));
    y.values = Values::integers;
    Arg pred = in("predictions", k.s, k.lo, k.hi);
    if (k.name.find("ties") != std::string::npos) pred.values = Values::integers;
    ConfusionParams p = k.p;
    // Each case unweighted, and with sample weights in [-0.5, 2] (Keras's weighted_metrics take them as given).
    for (bool weighted : {false, true})
      m[Op::confusion_counts].push_back(
          {k.name + " " + k.s.str() + (weighted ? ", sample weights" : ""),
           {pred, y, weighted ? param(in("weights", {k.s[0]}, -0.5, 2)) : none("weights"),
            counts(4 * k.p.thresholds)},
           [p](auto& t) { confusion_counts(t[0], t[1], t[2], t[3], p); },
           Family::reduction});
  }
  // Class confusion (Keras's IoU metrics): argmax of tied whole-number predictions against int32 labels (some out of
  // range) with an ignored class, against one-hot labels' argmax (more columns than classes: out of range too),
  // class ids as values (fractional, out of range), thresholded predictions against 0/1 labels.
  struct ClassCase {
    std::string name;
    ClassConfusionParams p;
    Shape pred, labels;
    bool int_labels, tied;
    double lo, hi;  // predictions
  };
  const std::vector<ClassCase> class_cases{
      {"argmax of ties, int32 labels, ignore 1",
       {.classes = 4, .argmax_predictions = true, .has_ignore_class = true, .ignore_class = 1},
       {37, 4},
       {37},
       true,
       true,
       0,
       2},
      {"argmax, one-hot argmax, 6 columns of 5 classes",
       {.classes = 5, .argmax_predictions = true, .argmax_labels = true},
       {29, 6},
       {29, 6},
       false,
       false,
       0,
       1},
      {"class ids as values", {.classes = 3}, {41}, {41}, false, false, -0.7, 3.4},
      {"thresholded at 0.4",
       {.classes = 2, .thresholded = true, .threshold = 0.4},
       {31, 1},
       {31, 1},
       false,
       false,
       0,
       1},
  };
  for (const ClassCase& k : class_cases) {
    Arg pred = in("predictions", k.pred, k.lo, k.hi);
    if (k.tied) pred.values = Values::integers;
    Arg y = k.int_labels
                ? fixed({.name = "labels", .shape = k.labels, .values = Values::integers, .lo = -1, .hi = 4},
                        DType::int32)
                : param(in("labels", k.labels, k.p.argmax_labels ? 0 : -0.5, k.p.argmax_labels ? 1 : 3.5));
    // And with sample weights (Keras's weighted_metrics), taken as they are or truncated (the IoUs' int64).
    for (bool weighted : {false, true}) {
      ClassConfusionParams p = k.p;
      p.integer_weights = weighted && k.p.classes % 2 == 0;
      m[Op::class_confusion].push_back(
          {k.name + " " + k.pred.str() + (weighted ? ", sample weights" : "") +
               (p.integer_weights ? " truncated" : ""),
           {pred, y, weighted ? param(in("weights", {k.pred[0]}, -0.5, 2)) : none("weights"),
            counts(k.p.classes * k.p.classes)},
           [p](auto& t) { class_confusion(t[0], t[1], t[2], t[3], p); },
           Family::reduction});
    }
  }
  // ignore_class: labels among which the ignored one (-1, or a class index) and other classes, with and without
  // sample weights (float32 with bfloat16 data, as sample weights are); and a batch whose labels are all ignored.
  for (int ignore : {-1, 2, 5})
    for (bool weighted : {false, true}) {
      Arg y = fixed({.name = "labels",
                     .shape = {37},
                     .values = ignore == 5 ? Values::constant : Values::integers,
                     .lo = ignore == 5 ? 5.0 : -1.0,
                     .hi = 3},
                    DType::int32);
      m[Op::ignore_class].push_back(
          {fmt::format("ignore {}{}", ignore, weighted ? ", weights" : ""),
           {y, weighted ? param(in("weights", {37}, 0, 3)) : none("weights"),
            fixed(out("kept", {37}), DType::int32), param(out("kept_weights", {37}))},
           [ignore](auto& t) {
             Tensor no_mask;
             ignore_class(t[0], ignore, t[1], no_mask, t[2], t[3]);
           },
           Family::elementwise});
    }
  // ignore_class of sequence labels [5, 8] under an output's mask (in the data's dtype, 0s and 1s): the masked
  // labels count as ignored.
  for (bool weighted : {false, true}) {
    Arg y = fixed({.name = "labels", .shape = {5, 8}, .values = Values::integers, .lo = -1.0, .hi = 3},
                  DType::int32);
    Arg mask = in("mask", {5, 8}, 0, 1);
    mask.values = Values::integers;
    m[Op::ignore_class].push_back(
        {fmt::format("ignore -1 of [5, 8], a mask{}", weighted ? ", weights" : ""),
         {y, weighted ? param(in("weights", {5}, 0, 3)) : none("weights"), mask,
          fixed(out("kept", {5, 8}), DType::int32), param(out("kept_weights", {5, 8}))},
         [](auto& t) { ignore_class(t[0], -1, t[1], t[2], t[3], t[4]); },
         Family::elementwise});
  }
  // mask_weights: a mask of 0s and 1s (in the data's dtype), alone, with a weight per sample or per mask value,
  // normalised (a loss's) or not (a metric's); a mask of every value 0 (the loss then weighs nothing).
  for (bool normalize : {true, false})
    for (int weighting : {0, 1, 2})
      for (bool all_masked : {false, true}) {
        if (all_masked && weighting != 1) continue;
        Arg mask = in("mask", {6, 9}, all_masked ? 0 : 0, all_masked ? 0 : 1);
        mask.values = all_masked ? Values::constant : Values::integers;
        Arg w = weighting == 0   ? none("weights")
                : weighting == 1 ? param(in("weights", {6}, 0, 3))
                                 : param(in("weights", {6, 9}, 0, 3));
        m[Op::mask_weights].push_back({fmt::format("mask [6, 9]{}{}{}", all_masked ? " of 0s" : "",
                                                   weighting == 0   ? ""
                                                   : weighting == 1 ? ", sample weights"
                                                                    : ", a weight per value",
                                                   normalize ? ", normalised" : ""),
                                       {mask, w, param(out("out", {6, 9}))},
                                       [normalize](auto& t) { mask_weights(t[0], t[1], normalize, t[2]); },
                                       Family::elementwise});
      }
  // add_sum: sample weights' sums (float32 with bfloat16 data, as sample weights are), of several sizes and none.
  for (std::int64_t n : {0, 1, 37, 4099})
    m[Op::add_sum].push_back({fmt::format("{} values", n),
                              {param(in("x", {n}, 0, 3)), total()},
                              [](auto& t) { add_sum(t[0], t[1]); },
                              Family::reduction});
  // Regression sums: one column and three, offset targets, unweighted and with sample weights.
  for (const Shape& s : {Shape{53, 1}, Shape{31, 3}})
    for (bool weighted : {false, true})
      m[Op::regression_sums].push_back({"columns of " + s.str() + (weighted ? ", sample weights" : ""),
                                        {in("predictions", s, -2, 2), param(in("targets", s, 1, 4)),
                                         weighted ? param(in("weights", {s[0]}, -0.5, 2)) : none("weights"),
                                         fixed(acc("sums", {4 * s[-1]}, 0, 3), DType::float64)},
                                        [](auto& t) { regression_sums(t[0], t[1], t[2], t[3]); },
                                        Family::reduction});
  // F-score counts: the rows' maxima (whole numbers 0..2: tied maxima, some rows of zeros) or one threshold, 0/1 or
  // smoothed labels; 300 classes take two tiles of classes on CUDA.
  struct FScore {
    std::string name;
    FScoreParams p;
    Shape s;
    bool ties, smoothed;
  };
  const std::vector<FScore> f_scores{
      {"argmax, ties", {}, {37, 3}, true, false},
      {"argmax", {}, {19, 300}, false, false},
      {"threshold 0.5", {.argmax = false}, {29, 4}, false, false},
      {"threshold 0.25, smoothed labels", {.argmax = false, .threshold = 0.25}, {23, 300}, false, true},
      {"argmax, smoothed labels", {}, {23, 5}, false, true},
  };
  for (const FScore& k : f_scores) {
    Arg pred = in("predictions", k.s, 0, k.ties ? 2 : 1);
    if (k.ties) pred.values = Values::integers;
    Arg y = param(in("labels", k.s, 0, 1));
    if (!k.smoothed) y.values = Values::integers;
    FScoreParams p = k.p;
    for (bool weighted : {false, true})  // and with sample weights (Keras's weighted_metrics)
      m[Op::f_score_counts].push_back(
          {k.name + " " + k.s.str() + (weighted ? ", sample weights" : ""),
           {pred, y, weighted ? param(in("weights", {k.s[0]}, -0.5, 2)) : none("weights"),
            fixed(acc("counts", {4 * k.s[-1]}, 0, 3), DType::float64)},
           [p](auto& t) { f_score_counts(t[0], t[1], t[2], t[3], p); },
           Family::reduction});
  }
  // Every elementwise kind, on predictions and targets in its domain; squared error also on a long batch.
  using K = ElementLoss;
  struct Kind {
    std::string name;
    ElementLossParams p;
    double lo, hi, tlo, thi;  // predictions, targets
    bool binary_targets = false;
  };
  const std::vector<Kind> kinds{
      {"squared_error", {.kind = K::squared_error}, -2, 2, -2, 2},
      {"absolute_error", {.kind = K::absolute_error}, -2, 2, -2, 2},
      {"absolute_percentage_error", {.kind = K::absolute_percentage_error}, -2, 2, 0.5, 2},
      {"squared_logarithmic_error", {.kind = K::squared_logarithmic_error}, 0.05, 3, 0, 3},
      {"huber", {.kind = K::huber, .delta = 0.7}, -2, 2, -2, 2},
      {"log_cosh", {.kind = K::log_cosh}, -3, 3, -3, 3},
      {"poisson", {.kind = K::poisson}, 0.05, 3, 0, 3},
      {"hinge, 0/1 targets", {.kind = K::hinge}, -2, 2, 0, 1, true},
      {"hinge", {.kind = K::hinge}, -2, 2, -1, 1},
      {"squared_hinge, 0/1 targets", {.kind = K::squared_hinge}, -2, 2, 0, 1, true},
      {"kl_divergence", {.kind = K::kl_divergence}, 0.01, 0.99, 0, 1},
      {"binary_crossentropy", {.kind = K::binary_crossentropy, .label_smoothing = 0.1}, 0.01, 0.99, 0, 1},
      {"binary_crossentropy from logits", {.kind = K::binary_crossentropy, .from_logits = true}, -5, 5, 0, 1},
      {"binary_focal_crossentropy",
       {.kind = K::binary_focal_crossentropy, .gamma = 1.5, .class_balancing = true},
       0.01,
       0.99,
       0,
       1,
       true},
      {"binary_focal_crossentropy from logits",
       {.kind = K::binary_focal_crossentropy, .from_logits = true, .label_smoothing = 0.2},
       -5,
       5,
       0,
       1},
  };
  for (const Kind& k : kinds) {
    const Shape s{37, 5, 3};
    Arg target = param(in("targets", s, k.tlo, k.thi));
    if (k.binary_targets) target.values = Values::integers;
    ElementLossParams p = k.p;
    // Keras's sample weights (one per sample, over its 5 x 3 values) on the first kinds.
    const bool weighted = &k - kinds.data() < 3;
    m[Op::elementwise_loss].push_back(
        {k.name + " " + s.str() + (weighted ? ", sample weights" : ""),
         {in("predictions", s, k.lo, k.hi), target,
          weighted ? param(in("weights", {s[0]}, 0, 3)) : none("weights"), total(), out("dpred", s)},
         [s, p](auto& t) { elementwise_loss(t[0], t[1], t[2], t[3], t[4], p, 1.0 / s[0]); },
         Family::reduction});
  }
  // Every row kind; [29, 3, 5] rows of 5 (3 per sample, sample weights on some), and [7, 70] rows of 70 (more
  // columns than a warp has lanes). Categorical hinge on whole numbers too (tied row maxima).
  using RK = RowLoss;
  struct RowKind {
    std::string name;
    RowLossParams p;
    double lo, hi;  // predictions
    bool integers;  // predictions (whole numbers -2..2) and targets (0/1)
  };
  const std::vector<RowKind> row_kinds{
      {"cosine_similarity", {.kind = RK::cosine_similarity}, -2, 2, false},
      {"categorical_hinge", {.kind = RK::categorical_hinge}, -2, 2, false},
      {"categorical_hinge, ties", {.kind = RK::categorical_hinge}, -2, 2, true},
      {"categorical_focal_crossentropy", {.kind = RK::categorical_focal_crossentropy}, 0.01, 0.99, false},
      {"categorical_focal_crossentropy from logits, smoothing",
       {.kind = RK::categorical_focal_crossentropy,
        .from_logits = true,
        .label_smoothing = 0.1,
        .gamma = 1.5},
       -4,
       4,
       false},
  };
  for (const RowKind& k : row_kinds)
    for (const Shape& s : {Shape{29, 3, 5}, Shape{7, 70}}) {
      Arg pred = in("predictions", s, k.lo, k.hi), target = param(in("targets", s, 0, 1));
      if (k.integers) pred.values = target.values = Values::integers;
      const bool weighted = s.rank() == 3 && (&k - row_kinds.data()) % 2 == 0;
      RowLossParams p = k.p;
      m[Op::row_loss].push_back(
          {k.name + " " + s.str() + (weighted ? ", sample weights" : ""),
           {pred, target, weighted ? param(in("weights", {s[0]}, 0, 3)) : none("weights"), total(),
            out("dpred", s)},
           [s, p](auto& t) { row_loss(t[0], t[1], t[2], t[3], t[4], p, 1.0 / s[0]); },
           Family::reduction});
    }
  const Shape s{1000003, 1};
  m[Op::elementwise_loss].push_back(
      {"squared_error " + s.str(),
       {in("predictions", s), param(in("targets", s)), none("weights"), total(), out("dpred", s)},
       [s](auto& t) { elementwise_loss(t[0], t[1], t[2], t[3], t[4], {}, 1.0 / s[0]); },
       Family::reduction});
}

void optimizer_cases(std::map<Op, std::vector<Case>>& m) {
  const Shape s{100003};
  AdamStep step{.beta_1 = 0.9, .beta_2 = 0.999, .epsilon = 1e-7};
  // Three steps with the counter advanced and the rate doubled on the tensors' device between them, as a training
  // step (replayed from a CUDA graph) sees them change.
  m[Op::decay_weights].push_back({"two decays at two rates", {acc("w", s), counter("lr", 0.01)}, [](auto& t) {
                                    Tensor lr = t[1].clone();
                                    for (int k = 0; k < 2; ++k) {
                                      decay_weights(t[0], lr, 0.04);
                                      scale_shift(lr, lr, 2.0, 0.0);
                                    }
                                  }});
  m[Op::adam_update].push_back({"three steps, the rate and the counter on the device",
                                {acc("w", s), in("g", s), acc("m", s), acc("v", s, 0, 1), counter("lr", 1e-3),
                                 counter("iterations", 0)},
                                [step](auto& t) {
                                  Tensor lr = t[4].clone(), it = t[5].clone();
                                  for (int k = 0; k < 3; ++k) {
                                    adam_update(t[0], t[1], t[2], t[3], step, lr, it);
                                    scale_shift(it, it, 1.0, 1.0);
                                    scale_shift(lr, lr, 2.0, 0.0);
                                  }
                                }});
  m[Op::adam_update].push_back({"undefined counter (step 1)",
                                {acc("w", {4099}), in("g", {4099}), acc("m", {4099}), acc("v", {4099}, 0, 1),
                                 counter("lr", 1e-3), none("iterations")},
                                [step](auto& t) { adam_update(t[0], t[1], t[2], t[3], step, t[4], t[5]); }});
  for (double momentum : {0.0, 0.9})
    for (bool nesterov : {false, true}) {
      m[Op::sgd_update].push_back(
          {fmt::format("momentum {} nesterov {}, two steps at two rates", momentum, nesterov),
           {acc("w", {4099}), in("g", {4099}), momentum ? acc("velocity", {4099}) : none("velocity"),
            counter("lr", 0.01)},
           [momentum, nesterov](auto& t) {
             Tensor lr = t[3].clone();
             for (int k = 0; k < 2; ++k) {
               sgd_update(t[0], t[1], t[2], lr, momentum, nesterov);
               scale_shift(lr, lr, 0.5, 0.0);
             }
           }});
    }
  for (double momentum : {0.0, 0.9})
    m[Op::rmsprop_update].push_back({fmt::format("momentum {}, two steps at two rates", momentum),
                                     {acc("w", {4099}), in("g", {4099}), acc("ms", {4099}, 0, 1),
                                      momentum ? acc("mom", {4099}) : none("mom"), counter("lr", 0.001)},
                                     [momentum](auto& t) {
                                       Tensor lr = t[4].clone();
                                       for (int k = 0; k < 2; ++k) {
                                         rmsprop_update(t[0], t[1], t[2], t[3], lr, 0.9, momentum, 1e-7);
                                         scale_shift(lr, lr, 3.0, 0.0);
                                       }
                                     }});
}

// optimizer_update: every rule, two steps whose values (update::step_values, as the optimizer computes them on the
// host) are written to the tensors' device between them.
void optimizer_rule_cases(std::map<Op, std::vector<Case>>& m) {
  struct Rule {
    std::string name;
    UpdateParams p;
  };
  const std::vector<Rule> rules = {
      {"amsgrad", {.rule = UpdateRule::amsgrad}},
      {"adamax", {.rule = UpdateRule::adamax}},
      {"nadam", {.rule = UpdateRule::nadam, .beta_1 = 0.8, .beta_2 = 0.99}},
      {"adagrad", {.rule = UpdateRule::adagrad}},
      {"adadelta", {.rule = UpdateRule::adadelta, .epsilon = 1e-4}},
      {"lion", {.rule = UpdateRule::lion, .beta_2 = 0.99}},
      {"ftrl", {.rule = UpdateRule::ftrl}},
      {"ftrl with l1, l2, shrinkage, beta",
       {.rule = UpdateRule::ftrl,
        .lr_power = -0.7,
        .l1 = 0.01,
        .l2 = 0.02,
        .l2_shrinkage = 0.03,
        .beta = 0.5}},
      {"lamb: a trust ratio over the whole tensor",
       {.rule = UpdateRule::lamb, .beta_1 = 0.8, .epsilon = 1e-6}},
      {"ema", {.rule = UpdateRule::ema, .beta_1 = 0.9}},
      {"ema overwriting the weights at the second update",
       {.rule = UpdateRule::ema, .beta_1 = 0.8, .ema_overwrite_frequency = 2}},
  };
  // Gradient clipping: each value, the norm of a buffer above the limit and below it (a no-op), a view.
  m[Op::clip_gradients].push_back(
      {"clipvalue 0.3", {inout("g", {4099})}, [](auto& t) { clip_gradients(t[0], false, 0.3); }});
  m[Op::clip_gradients].push_back({"by norm, clipped",
                                   {inout("g", {100003})},
                                   [](auto& t) { clip_gradients(t[0], true, 2.0); },
                                   Family::reduction});
  m[Op::clip_gradients].push_back({"by norm, under the limit",
                                   {inout("g", {1000})},
                                   [](auto& t) { clip_gradients(t[0], true, 1e3); },
                                   Family::reduction});
  m[Op::clip_gradients].push_back({"by norm, a view",
                                   {at_offset(inout("g", {777}), 5)},
                                   [](auto& t) { clip_gradients(t[0], true, 0.5); },
                                   Family::reduction});
  const Shape s{4099};
  for (const Rule& r : rules) {
    const int slots = update::slot_count(r.p.rule);
    // Second moments and accumulators hold values > 0; s0 is a first moment (any sign) but for Adagrad's, Adadelta's
    // and Ftrl's accumulators.
    const bool s0_accumulates =
        r.p.rule == UpdateRule::adagrad || r.p.rule == UpdateRule::adadelta || r.p.rule == UpdateRule::ftrl;
    std::vector<Arg> args = {acc("w", s), in("g", s)};
    for (int k = 0; k < 3; ++k) {
      const std::string name = fmt::format("s{}", k);
      args.push_back(k >= slots ? none(name) : acc(name, s, k == 0 && !s0_accumulates ? -1.0 : 0.1, 1.0));
    }
    UpdateParams p = r.p;
    m[Op::optimizer_update].push_back(
        {r.name + ", two steps at two rates", args,
         [p](auto& t) {
           double u_product = 1.0;
           for (int k = 0; k < 2; ++k) {
             u_product *= update::nadam_u(p.beta_1, k + 1.0);
             auto c = update::step_values(p, 0.01 * (k + 1), k, u_product);
             Tensor values =
                 Tensor::from_vector(std::vector<double>(c.begin(), c.end()), {update::kStepValues});
             optimizer_update(t[0], t[1], t[2], t[3], t[4], p, values.to(t[0].device()));
           }
         },
         update::trust_ratio(p.rule) ? Family::reduction : Family::elementwise});
  }
  // adafactor_update: a factored variable (a conv kernel's [B, R, C]: 3 x 3 positions, 5 inputs, 7 filters; a dense
  // kernel's [1, 33, 17]) and an unfactored one (a bias), two steps at two rates; the second moments > 0.
  const AdafactorStep af{.epsilon_1 = 1e-30, .epsilon_2 = 1e-3, .clip_threshold = 1.0};
  auto adafactor_steps = [](double decay, AdafactorStep s) {
    return [decay, s](auto& t) {
      for (int k = 0; k < 2; ++k) {
        auto c = adafactor::step_values(0.3 * (k + 1), k, decay);
        Tensor values =
            Tensor::from_vector(std::vector<double>(c.begin(), c.end()), {adafactor::kStepValues});
        adafactor_update(t[0], t[1], t[2], t[3], t[4], s, values.to(t[0].device()));
      }
    };
  };
  for (Shape bcr : {Shape{9, 5, 7}, Shape{1, 33, 17}})
    m[Op::adafactor_update].push_back({"factored " + bcr.str(),
                                       {acc("w", bcr), in("g", bcr), acc("r", {bcr[0], bcr[1]}, 0.1, 1.0),
                                        acc("c", {bcr[0], bcr[2]}, 0.1, 1.0), acc("v", bcr, 0.1, 1.0)},
                                       adafactor_steps(-0.8, af),
                                       Family::reduction});
  m[Op::adafactor_update].push_back(
      {"unfactored, the update clipped by its RMS",
       {acc("w", {1031}), in("g", {1031}), none("r"), none("c"), acc("v", {1031}, 0.1, 1.0)},
       adafactor_steps(-0.5, {.epsilon_1 = 1e-6, .epsilon_2 = 1e-2, .clip_threshold = 0.1}),
       Family::reduction});
  // muon_update: a wide matrix and a tall one (orthogonalised transposed), Nesterov's or not, rms_rate None; two
  // steps at two rates. Five Newton-Schulz steps amplify float32's rounding: the matmul family's tolerance.
  struct MuonCase {
    std::string name;
    Shape w;
    MuonStep s;
  };
  const std::vector<MuonCase> muon_cases = {
      {"wide, Nesterov", {6, 11}, {}},
      {"tall, without Nesterov, rms_rate None", {13, 5}, {.steps = 3, .nesterov = false, .scaled = false}},
      {"square, other coefficients",
       {8, 8},
       {.a = 3.0, .b = -3.2, .c = 1.2, .momentum = 0.9, .rms_rate = 0.3}},
  };
  for (const MuonCase& mc : muon_cases) {
    MuonStep s = mc.s;
    m[Op::muon_update].push_back({mc.name + ", two steps at two rates",
                                  {acc("w", mc.w), in("g", mc.w), acc("m", mc.w)},
                                  [s](auto& t) {
                                    for (int k = 0; k < 2; ++k) {
                                      Tensor lr = Tensor::full({1}, 0.01 * (k + 1), DType::float64);
                                      muon_update(t[0], t[1], t[2], s, lr.to(t[0].device()));
                                    }
                                  },
                                  Family::matmul});
  }
}

// norm: normalisations over sets of axes, broadcasting binary ops, Normalization, transposes.
void norm_cases(std::map<Op, std::vector<Case>>& m) {
  // The normalised axes as a set (bit a: axis a): trailing ones (oneDNN's rows for float32 on the CPU), and
  // others (ConvNeXt-free Keras models normalise over any axes): a middle axis, two apart, the batch axis.
  struct LnShape {
    Shape x;
    std::uint32_t axes;
    double lo, hi;
  };
  const std::vector<LnShape> shapes = {{{6, 10}, 0b10, -1, 3},        {{2, 3, 4, 16}, 0b1000, -2, 2},
                                       {{2, 3, 4, 5}, 0b1110, 1, 4},  {{3, 5, 7}, 0b100, -1, 1},
                                       {{4, 33}, 0b10, 99, 101},      {{2, 3, 4, 5}, 0b0010, -1, 2},
                                       {{2, 3, 4, 5}, 0b1010, -1, 2}, {{3, 4, 6}, 0b011, -2, 1}};
  for (const LnShape& s : shapes) {
    std::int64_t K = 1;
    for (int i = 0; i < s.x.rank(); ++i)
      if ((s.axes >> i) & 1u) K *= s.x[i];
    const std::int64_t M = s.x.numel() / K;
    const std::uint32_t axes = s.axes;
    for (NormKind kind : {NormKind::layer, NormKind::rms_scaling, NormKind::unit}) {
      const bool g = kind != NormKind::unit, b = kind == NormKind::layer;
      std::string name = fmt::format("{} over axes {:#b}, kind {}", s.x.str(), axes, int(kind));
      m[Op::layer_norm_forward].push_back(
          {name,
           {in("x", s.x, s.lo, s.hi), g ? param(in("gamma", {K}, 0.5, 1.5)) : none("gamma"),
            b ? param(in("beta", {K})) : none("beta"), out("y", s.x), param(out("mean", {M})),
            param(out("rstd", {M}))},
           [axes, kind](auto& t) {
             layer_norm_forward(t[0], t[1], t[2], t[3], t[4], t[5], axes, kind, 1e-3);
           },
           Family::reduction});
      m[Op::layer_norm_backward].push_back(
          {name,
           {in("x", s.x, s.lo, s.hi), g ? param(in("gamma", {K}, 0.5, 1.5)) : none("gamma"), in("dy", s.x),
            out("dx", s.x), g ? param(acc("dgamma", {K})) : none("dgamma"),
            b ? param(acc("dbeta", {K})) : none("dbeta")},
           [axes, kind, M](auto& t) {
             DType st = t[0].dtype() == DType::float64 ? DType::float64 : DType::float32;
             Tensor mean({M}, st, t[0].device()), rstd({M}, st, t[0].device()),
                 y(t[0].shape(), t[0].dtype(), t[0].device());
             Tensor beta;
             layer_norm_forward(t[0], t[1], beta, y, mean, rstd, axes, kind, 1e-3);
             layer_norm_backward(t[0], t[1], mean, rstd, t[2], t[3], t[4], t[5], axes, kind);
           },
           Family::reduction});
    }
  }
  // The layer norm without gamma or beta (Keras's scale=False, center=False: oneDNN without its scale or shift),
  // and a backward with dx alone (frozen parameters) or the parameter gradients alone.
  for (bool scale : {false, true})
    for (bool center : {false, true}) {
      std::string name = fmt::format("(5, 12) scale {} center {}", scale, center);
      m[Op::layer_norm_forward].push_back(
          {name,
           {in("x", {5, 12}), scale ? param(in("gamma", {12}, 0.5, 1.5)) : none("gamma"),
            center ? param(in("beta", {12})) : none("beta"), out("y", {5, 12}), param(out("mean", {5})),
            param(out("rstd", {5}))},
           [](auto& t) {
             layer_norm_forward(t[0], t[1], t[2], t[3], t[4], t[5], 0b10, NormKind::layer, 1e-5);
           },
           Family::reduction});
    }
  for (bool dx : {false, true})
    m[Op::layer_norm_backward].push_back(
        {fmt::format("(5, 12) {} alone", dx ? "dx" : "dgamma and dbeta"),
         {in("x", {5, 12}), param(in("gamma", {12}, 0.5, 1.5)), in("dy", {5, 12}),
          dx ? out("dx", {5, 12}) : none("dx"), dx ? none("dgamma") : param(acc("dgamma", {12})),
          dx ? none("dbeta") : param(acc("dbeta", {12}))},
         [](auto& t) {
           DType st = t[0].dtype() == DType::float64 ? DType::float64 : DType::float32;
           Tensor mean({5}, st, t[0].device()), rstd({5}, st, t[0].device()),
               y(t[0].shape(), t[0].dtype(), t[0].device()), beta;
           layer_norm_forward(t[0], t[1], beta, y, mean, rstd, 0b10, NormKind::layer, 1e-3);
           layer_norm_backward(t[0], t[1], mean, rstd, t[2], t[3], t[4], t[5], 0b10, NormKind::layer);
         },
         Family::reduction});
  // The unit norm's cap (Keras's 1/epsilon = 1e12) on rows of tiny values, and a row of zeros.
  {
    Arg tiny = in("x", {3, 8}, -1e-13, 1e-13);
    m[Op::layer_norm_forward].push_back(
        {"unit norm of tiny rows",
         {tiny, none("gamma"), none("beta"), out("y", {3, 8}), param(out("mean", {3})),
          param(out("rstd", {3}))},
         [](auto& t) { layer_norm_forward(t[0], t[1], t[2], t[3], t[4], t[5], 0b10, NormKind::unit, 1e-3); },
         Family::reduction});
    Arg zeros = in("x", {2, 5});
    zeros.values = Values::constant;
    zeros.lo = 0;
    m[Op::layer_norm_forward].push_back(
        {"unit norm of zeros",
         {zeros, none("gamma"), none("beta"), out("y", {2, 5}), param(out("mean", {2})),
          param(out("rstd", {2}))},
         [](auto& t) { layer_norm_forward(t[0], t[1], t[2], t[3], t[4], t[5], 0b10, NormKind::unit, 1e-3); },
         Family::reduction});
  }
  // Broadcasting pairs: equal shapes, squeeze-excite (N,H,W,C)*(N,1,1,C), a per-channel vector, both sides
  // broadcast, a lower rank.
  struct Pair2 {
    Shape a, b, y;
  };
  const std::vector<Pair2> pairs = {{{3, 17}, {3, 17}, {3, 17}},
                                    {{2, 4, 5, 6}, {2, 1, 1, 6}, {2, 4, 5, 6}},
                                    {{2, 4, 5, 6}, {6}, {2, 4, 5, 6}},
                                    {{3, 1, 5}, {1, 4, 1}, {3, 4, 5}},
                                    {{4, 1}, {2, 4, 7}, {2, 4, 7}}};
  for (const Pair2& p : pairs)
    for (BinaryKind kind : {BinaryKind::add, BinaryKind::subtract, BinaryKind::multiply, BinaryKind::maximum,
                            BinaryKind::minimum, BinaryKind::divide}) {
      std::string name = fmt::format("{} op{} {}", p.a.str(), int(kind), p.b.str());
      // A divisor away from zero.
      const Arg b = kind == BinaryKind::divide ? in("b", p.b, 0.5, 2) : in("b", p.b);
      m[Op::broadcast_forward].push_back({name, {in("a", p.a), b, out("y", p.y)}, [kind](auto& t) {
                                            broadcast_forward(kind, t[0], t[1], t[2]);
                                          }});
      m[Op::broadcast_backward].push_back(
          {name,
           {in("a", p.a), b, in("dy", p.y), out("da", p.a), out("db", p.b)},
           [kind](auto& t) { broadcast_backward(kind, t[0], t[1], t[2], t[3], t[4]); },
           Family::reduction});
    }
  m[Op::broadcast_backward].push_back(
      {"only db",
       {in("a", {2, 3, 4}), in("b", {4}), in("dy", {2, 3, 4}), none("da"), out("db", {4})},
       [](auto& t) { broadcast_backward(BinaryKind::multiply, t[0], t[1], t[2], t[3], t[4]); },
       Family::reduction});
  // Keras Normalization: statistics of the last axis, of a trailing block, of other axes (a middle one, two apart),
  // one for everything (axis None), a zero variance (the 1e-7 floor).
  struct Kept {
    Shape x;
    std::uint32_t axes;
    std::int64_t k;
  };
  for (bool invert : {false, true}) {
    for (const Kept& c :
         {Kept{{4, 3, 3, 5}, 0b1000, 5}, Kept{{3, 4, 6}, 0b110, 24}, Kept{{4, 3, 2, 5}, 0b0010, 3},
          Kept{{4, 3, 2, 5}, 0b1010, 15}, Kept{{3, 7}, 0, 1}}) {
      std::string name = fmt::format("{} by axes {:#b}, invert {}", c.x.str(), c.axes, invert);
      const std::uint32_t axes = c.axes;
      m[Op::normalize_forward].push_back(
          {name,
           {in("x", c.x), param(in("mean", {c.k})), param(in("variance", {c.k}, 0.1, 3)), out("y", c.x)},
           [invert, axes](auto& t) { normalize_forward(t[0], t[1], t[2], t[3], axes, invert); }});
      m[Op::normalize_backward].push_back(
          {name,
           {param(in("variance", {c.k}, 0.1, 3)), in("dy", c.x), out("dx", c.x)},
           [invert, axes](auto& t) { normalize_backward(t[0], t[1], t[2], axes, invert); }});
    }
    Arg zero = param(in("variance", {4}));
    zero.values = Values::constant;
    zero.lo = 0;
    m[Op::normalize_forward].push_back(
        {fmt::format("zero variance, invert {}", invert),
         {in("x", {3, 4}), param(in("mean", {4})), zero, out("y", {3, 4})},
         [invert](auto& t) { normalize_forward(t[0], t[1], t[2], t[3], 0b10, invert); }});
  }
  for (auto [xs, perm] :
       {std::pair<Shape, std::vector<int>>{{2, 3, 4, 5}, {0, 3, 1, 2}},
        {{3, 4, 5}, {0, 2, 1}},
        {{2, 3, 4, 5}, {0, 2, 3, 1}},
        {{6, 7}, {1, 0}},
        // Trailing axes in place: runs copied whole (a recurrent layer's (N, T, F) <-> (T, N, F)).
        {{3, 4, 5}, {1, 0, 2}},
        {{2, 3, 4, 5}, {1, 0, 2, 3}},
        {{2, 3}, {0, 1}}}) {
    Shape ys = xs;
    for (std::size_t i = 0; i < perm.size(); ++i) ys[int(i)] = xs[perm[i]];
    std::string order;
    for (int p : perm) order += std::to_string(p);
    m[Op::transpose].push_back({fmt::format("{} by {}", xs.str(), order),
                                {in("x", xs), out("y", ys)},
                                [perm](auto& t) { transpose(t[0], t[1], perm); }});
  }
}

// attention: scaled dot-product attention over heads, unmasked and under every mask and rule, grouped heads (GQA),
// dropout on the probabilities (its keep bits drawn again in backward), and the additive score with D, one or no
// weights.
void attention_cases(std::map<Op, std::vector<Case>>& m) {
  struct AttnCase {
    std::string name;
    std::int64_t B, T, S, H, G, D, E;
    bool query_mask, key_mask, pair_mask;
    AttentionParams p;
    std::int64_t score_weights = 0;  // the additive score's weights: D or 1 of them, 0 none
  };
  const AttentionParams additive{.score = AttentionScore::additive};
  const std::vector<AttnCase> shapes{
      {"plain", 2, 5, 4, 2, 2, 3, 4, false, false, false, {.scale = 0.5}},
      {"every mask", 3, 6, 7, 2, 2, 4, 3, true, true, true, {.scale = 0.5}},
      {"every mask, empty rows uniform",
       3,
       6,
       7,
       2,
       2,
       4,
       3,
       true,
       true,
       true,
       {.scale = 0.5, .empty_rows_uniform = true}},
      {"causal, key mask", 2, 6, 6, 2, 2, 5, 5, false, true, false, {.scale = 0.4, .causal = true}},
      {"sliding window", 2, 7, 7, 1, 1, 4, 2, false, false, false, {.scale = 1.0, .window = 2}},
      {"grouped heads", 2, 5, 6, 4, 2, 3, 3, true, false, false, {.scale = 0.6}},
      {"dropout", 2, 9, 8, 2, 1, 4, 4, false, true, false, {.scale = 0.5, .dropout = 0.3, .seed = 11}},
      {"large scores", 2, 4, 5, 2, 2, 8, 3, false, false, false, {.scale = 4.0}},
      {"additive", 2, 5, 4, 2, 2, 3, 4, false, false, false, {.scale = 0.5, .score = additive.score}, 3},
      {"additive, one weight, masks, grouped", 2, 5, 6, 4, 2, 3, 3, true, true, true, additive, 1},
      {"additive, no weights, causal, dropout",
       2,
       6,
       6,
       1,
       1,
       4,
       3,
       false,
       true,
       false,
       {.score = additive.score, .causal = true, .dropout = 0.3, .seed = 5}},
  };
  for (const AttnCase& c : shapes) {
    auto mask = [](const char* name, bool on, Shape s) {
      return on ? Arg{.name = name, .shape = std::move(s), .values = Values::integers, .lo = 0, .hi = 1}
                : none(name);
    };
    const AttentionParams p = c.p;
    const Shape qs{c.B, c.T, c.H, c.D}, ks{c.B, c.S, c.G, c.D}, vs{c.B, c.S, c.G, c.E},
        ys{c.B, c.T, c.H, c.E}, ps{c.B, c.H, c.T, c.S};
    const double range = p.scale > 2 ? 2 : 1;
    std::vector<Arg> operands{
        in("q", qs, -range, range),
        in("k", ks, -range, range),
        in("v", vs),
        c.score_weights ? in("score_weights", {c.score_weights}) : none("score_weights"),
        mask("query_mask", c.query_mask, {c.B, c.T}),
        mask("key_mask", c.key_mask, {c.B, c.S}),
        mask("attention_mask", c.pair_mask, {c.B, c.T, c.S}),
        counter("step", 3)};
    std::vector<Arg> fwd = operands;
    fwd.push_back(out("y", ys));
    fwd.push_back(out("probs", ps));
    m[Op::attention_forward].push_back(
        {c.name, fwd,
         [p](auto& t) { attention_forward(p, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]); },
         Family::matmul});
    // Every gradient, dk alone, then every gradient with one reaching the probabilities too (dprobs).
    for (int wanted = 0; wanted < 3; ++wanted) {
      std::vector<Arg> bwd = operands;
      bwd.push_back(in("dy", ys));
      bwd.push_back(wanted == 2 ? in("dprobs", ps) : none("dprobs"));
      bwd.push_back(wanted != 1 ? out("dq", qs) : none("dq"));
      bwd.push_back(out("dk", ks));
      bwd.push_back(wanted != 1 ? out("dv", vs) : none("dv"));
      bwd.push_back(wanted != 1 && c.score_weights ? out("dscore_weights", {c.score_weights})
                                                   : none("dscore_weights"));
      m[Op::attention_backward].push_back(
          {c.name + (wanted == 1   ? ", dk alone"
                     : wanted == 2 ? ", dprobs"
                                   : ""),
           bwd,
           [p, ps](auto& t) {
             Tensor probs(ps, t[0].dtype(), t[0].device()),
                 y(Shape({t[0].dim(0), t[0].dim(1), t[0].dim(2), t[2].dim(3)}), t[0].dtype(), t[0].device());
             attention_forward(p, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], y, probs);
             attention_backward(p, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], probs, t[8], t[9], t[10],
                                t[11], t[12], t[13]);
           },
           Family::matmul});
    }
  }
}

// regul: regularizers (their penalty into a total, their gradient accumulated) and constraints (in place).
void regul_cases(std::map<Op, std::vector<Case>>& m) {
  const Shape big{100003};
  m[Op::regularize].push_back({"l1 and l2, total and gradient",
                               {in("x", big), total(), acc("dx", big)},
                               [](auto& t) { regularize(t[0], t[1], t[2], 0.01, 0.02, 3.0, 0.5); },
                               Family::reduction});
  m[Op::regularize].push_back({"l2 alone, total only",
                               {in("x", {37, 11}), total(), none("dx")},
                               [](auto& t) { regularize(t[0], t[1], t[2], 0.0, 0.1, 1.0, 0.0); },
                               Family::reduction});
  m[Op::regularize].push_back({"l1 alone, gradient only (zeros have no sign)",
                               {in("x", {4099}, -2, 2), none("total"), acc("dx", {4099})},
                               [](auto& t) {
                                 Tensor head = t[0].view(0, {3});
                                 fill(head, 0.0);
                                 regularize(t[0], t[1], t[2], 0.3, 0.0, 1.0, 1.0 / 64);
                               }});
  for (bool columns : {false, true})
    for (Shape s : {Shape{7, 5}, Shape{3, 64}, Shape{40, 33}})
      m[Op::orthogonal_regularize].push_back(
          {fmt::format("orthogonal {} {}", columns ? "columns" : "rows", s.str()),
           {in("x", s), total(), acc("dx", s)},
           [columns](auto& t) { orthogonal_regularize(t[0], t[1], t[2], 0.02, columns, 5.0, 0.25); },
           Family::reduction});
  m[Op::orthogonal_regularize].push_back(
      {"orthogonal rows, total only",
       {in("x", {6, 9}), total(), none("dx")},
       [](auto& t) { orthogonal_regularize(t[0], t[1], t[2], 0.01, false, 1.0, 0.0); },
       Family::reduction});
  using P = ConstraintParams;
  struct ConstraintCase {
    std::string name;
    Shape s;
    P p;
  };
  std::vector<ConstraintCase> cs = {
      {"max_norm dense axis 0", {20, 8}, {.kind = P::max_norm, .max_value = 1.5, .axes = 1}},
      {"max_norm dense axis 1", {20, 8}, {.kind = P::max_norm, .max_value = 1.0, .axes = 2}},
      {"max_norm conv axes 0,1,2", {3, 3, 4, 6}, {.kind = P::max_norm, .max_value = 2.0, .axes = 7}},
      {"unit_norm conv axes 0,1,2", {3, 3, 4, 6}, {.kind = P::unit_norm, .axes = 7}},
      {"unit_norm bias axis 0", {1000}, {.kind = P::unit_norm, .axes = 1}},
      {"min_max_norm rate 0.5 axis 0",
       {30, 7},
       {.kind = P::min_max_norm, .min_value = 2.5, .max_value = 3.0, .rate = 0.5, .axes = 1}},
      {"min_max_norm rate 1 axes 0,2",
       {5, 4, 6},
       {.kind = P::min_max_norm, .min_value = 0.5, .max_value = 1.0, .rate = 1.0, .axes = 5}},
      {"non_neg", {100003}, {.kind = P::non_neg, .axes = 0}},
  };
  for (auto& c : cs)
    m[Op::constrain].push_back({"constrain " + c.name,
                                {inout("w", c.s)},
                                [p = c.p](auto& t) { constrain(t[0], p); },
                                Family::reduction});
}

// conv area: Conv2DTranspose's bias, UpSampling2D's resize.
void conv_area_cases(std::map<Op, std::vector<Case>>& m) {
  for (Shape s : {Shape{2, 5, 6, 7}, Shape{3, 33}, Shape{1, 4, 4, 130}}) {
    Shape b{s[s.rank() - 1]};
    m[Op::bias_add_forward].push_back({"bias_add " + s.str(),
                                       {in("x", s), param(in("b", b)), out("y", s)},
                                       [](auto& t) { bias_add_forward(t[0], t[1], t[2]); }});
    m[Op::bias_add_forward].push_back({"bias_add in place " + s.str(),
                                       {inout("x", s), param(in("b", b))},
                                       [](auto& t) { bias_add_forward(t[0], t[1], t[0]); }});
    m[Op::bias_add_backward].push_back({"bias_add_backward " + s.str(),
                                        {in("dy", s), param(acc("db", b))},
                                        [](auto& t) { bias_add_backward(t[0], t[1]); },
                                        Family::reduction});
  }
  struct ResizeShape {
    Shape x, y;
  };
  for (Interpolation mode : {Interpolation::nearest, Interpolation::bilinear})
    for (auto [xs, ys] : {ResizeShape{{2, 3, 4, 5}, {2, 6, 8, 5}}, ResizeShape{{1, 4, 3, 3}, {1, 12, 6, 3}},
                          ResizeShape{{2, 5, 7, 2}, {2, 8, 10, 2}}, ResizeShape{{1, 9, 8, 4}, {1, 4, 5, 4}},
                          ResizeShape{{2, 1, 1, 3}, {2, 3, 2, 3}}}) {
      std::string name = std::string(mode == Interpolation::nearest ? "nearest " : "bilinear ") + xs.str() +
                         " -> " + ys.str();
      m[Op::resize2d_forward].push_back(
          {name, {in("x", xs), out("y", ys)}, [mode](auto& t) { resize2d_forward(t[0], t[1], mode); }});
      m[Op::resize2d_backward].push_back({name,
                                          {in("dy", ys), out("dx", xs)},
                                          [mode](auto& t) { resize2d_backward(t[0], t[1], mode); },
                                          Family::reduction});
    }
}

// augment (branch augment): noise and image augmentation.
void augment_cases(std::map<Op, std::vector<Case>>& m) {
  const Shape big{100003};
  for (double step : {0.0, 5.0, 123456.0})
    for (bool mult : {false, true}) {
      NoiseParams p{.stddev = mult ? 0.7 : 0.3, .multiplicative = mult};
      std::string name = fmt::format("step {} {}", step, mult ? "multiplicative" : "additive");
      m[Op::gaussian_noise_forward].push_back(
          {name, {in("x", big, -2, 2), out("y", big), counter("step", step)}, [p](auto& t) {
             gaussian_noise_forward(t[0], t[1], p, 99, t[2]);
           }});
      m[Op::gaussian_noise_backward].push_back(
          {name + ", in place", {inout("dy", big, -2, 2), counter("step", step)}, [p](auto& t) {
             gaussian_noise_backward(t[0], t[0], p, 99, t[1]);
           }});
    }
  m[Op::gaussian_noise_forward].push_back(
      {"odd count, undefined step", {in("x", {4099}), out("y", {4099}), none("step")}, [](auto& t) {
         gaussian_noise_forward(t[0], t[1], {0.5, false}, 7, t[2]);
       }});
  m[Op::gaussian_noise_backward].push_back(
      {"odd count, undefined step", {in("dy", {4099}), out("dx", {4099}), none("step")}, [](auto& t) {
         gaussian_noise_backward(t[0], t[1], {0.5, true}, 7, t[2]);
       }});

  // Every kind of transform, drawn for images 13x11, then sampled with every fill mode and interpolation.
  using K = ImageTransformKind;
  const std::vector<std::pair<std::string, ImageTransformParams>> kinds = {
      {"flip both", {.kind = K::flip, .horizontal = true, .vertical = true}},
      {"flip horizontal", {.kind = K::flip, .horizontal = true}},
      {"translation", {.kind = K::translation, .lower0 = -0.4, .upper0 = 0.3, .lower1 = -0.2, .upper1 = 0.6}},
      {"rotation", {.kind = K::rotation, .lower0 = -0.3, .upper0 = 0.3}},
      {"zoom", {.kind = K::zoom, .lower0 = -0.5, .upper0 = 0.6, .lower1 = -0.3, .upper1 = 0.2}},
      {"zoom, same", {.kind = K::zoom, .lower0 = -0.5, .upper0 = 0.6, .same_zoom = true}},
      {"crop window", {.kind = K::crop, .crop_h = 7, .crop_w = 5}},
      {"crop centred", {.kind = K::crop, .crop_h = 7, .crop_w = 5, .crop_center = true}},
      {"crop resized", {.kind = K::crop, .crop_h = 13, .crop_w = 17}}};
  for (const auto& [name, p] : kinds)
    m[Op::random_image_transforms].push_back(
        {name, {fixed(out("transforms", {9, 8}), DType::float32), counter("step", 3)}, [p](auto& t) {
           random_image_transforms(t[0], p, 13, 11, 5, t[1]);
         }});
  for (const auto& [name, p] : kinds)
    for (FillMode f : {FillMode::reflect, FillMode::wrap, FillMode::constant, FillMode::nearest})
      for (Interpolation i : {Interpolation::nearest, Interpolation::bilinear}) {
        const std::int64_t oh = p.kind == K::crop ? p.crop_h : 13, ow = p.kind == K::crop ? p.crop_w : 11;
        AffineTransformParams s{.fill_mode = f, .interpolation = i, .fill_value = -3};
        m[Op::affine_transform_images].push_back(
            {fmt::format("{}, fill {}, interpolation {}", name, int(f), int(i)),
             {in("x", {9, 13, 11, 3}, 0, 255), fixed(out("transforms", {9, 8}), DType::float32),
              out("y", {9, oh, ow, 3}), counter("step", 11)},
             [p, s](auto& t) {
               random_image_transforms(t[1], p, 13, 11, 2, t[3]);
               affine_transform_images(t[0], t[1], t[2], s);
             }});
      }

  for (double step : {0.0, 17.0})
    m[Op::random_contrast].push_back(
        {fmt::format("step {}", step),
         {in("x", {6, 9, 7, 3}, 0, 255), out("y", {6, 9, 7, 3}), counter("step", step)},
         [](auto& t) {
           random_contrast(t[0], t[1], {0.5, 1.8, 20, 230}, 3, t[2]);
         },
         Family::reduction});
}

const std::map<Op, std::vector<Case>>& cases() {
  static const std::map<Op, std::vector<Case>> m = [] {
    std::map<Op, std::vector<Case>> all;
    conv_cases(all);
    pool_cases(all);
    batch_norm_cases(all);
    dense_cases(all);
    activation_cases(all);
    elementwise_cases(all);
    loss_cases(all);
    optimizer_cases(all);
    optimizer_rule_cases(all);
    norm_cases(all);       // norm
    attention_cases(all);  // attention
    regul_cases(all);      // regul
    conv_area_cases(all);  // conv area
    augment_cases(all);    // augment (branch augment)
    return all;
  }();
  return m;
}

std::vector<Op> every_op() {
  std::vector<Op> ops;
  for (int i = 0; i < kOpCount; ++i) ops.push_back(static_cast<Op>(i));
  return ops;
}

// ----------------------------------------------------------------------------------------------- the tests

TEST(OpHarness, EveryOpOfTheListHasCases) {
  for (Op op : every_op()) {
    auto it = cases().find(op);
    EXPECT_TRUE(it != cases().end() && !it->second.empty())
        << op_name(op) << " has no case in tests/test_ops.cc";
  }
}

// Ops that a backend may leave out (no dtypes; ops.h: the caller then runs other ops): the whole recurrence, which
// the recurrent layers otherwise run step by step. On a backend without them their tests skip, saying so.
bool optional_op(Op op) {
  return op == Op::rnn_sequence_forward || op == Op::rnn_sequence_backward;
}
bool left_out(Op op, Device device) {
  if (!optional_op(op)) return false;
  for (DType t : {DType::float32, DType::bfloat16, DType::float64})
    if (supports(op, t, device)) return false;
  return true;
}

class CpuOps : public ::testing::TestWithParam<Op> {};
class CudaOps : public ::testing::TestWithParam<Op> {};
class XlaOps : public ::testing::TestWithParam<Op> {};

// The CPU's float32 (oneDNN and loops) against its float64 loops.
TEST_P(CpuOps, MatchFloat64) {
  Op op = GetParam();
  int runs = check_op(op, cases().at(op), Device::cpu());
  // Ops that take only float32 (augment_images) are their own reference on the CPU; every other op ran.
  if (reference_dtype(op, DType::float32) == DType::float64) {
    EXPECT_GT(runs, 0) << op_name(op) << " ran no case";
  }
}

TEST_P(CudaOps, MatchTheCpu) {
  SYSTOLIC_REQUIRE_GPU();
  Op op = GetParam();
  if (left_out(op, Device::cuda(0)))
    GTEST_SKIP() << op_name(op) << " is not on the CUDA backend (the layers run other ops)";
  EXPECT_GT(check_op(op, cases().at(op), Device::cuda(0)), 0) << op_name(op) << " ran no case on the GPU";
}

// The XLA backend on the CPU plugin (xla:cpu, PJRT): every op, traced and run, against the CPU's float64 loops.
TEST_P(XlaOps, MatchTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  Op op = GetParam();
  if (left_out(op, systolic::testing::xla_cpu()))
    GTEST_SKIP() << op_name(op) << " is not on the XLA backend (the layers run other ops)";
  auto before = systolic::xla::compile_stats();
  EXPECT_GT(check_op(op, cases().at(op), systolic::testing::xla_cpu()), 0)
      << op_name(op) << " ran no case on XLA";
  auto after = systolic::xla::compile_stats();
  std::printf("%s: %lld XLA programs compiled in %.2f s\n", std::string(op_name(op)).c_str(),
              (long long)(after.compiles - before.compiles), after.seconds - before.seconds);
}

std::string param_name(const ::testing::TestParamInfo<Op>& info) {
  return std::string(op_name(info.param));
}
INSTANTIATE_TEST_SUITE_P(EveryOp, CpuOps, ::testing::ValuesIn(every_op()), param_name);
INSTANTIATE_TEST_SUITE_P(EveryOp, CudaOps, ::testing::ValuesIn(every_op()), param_name);
INSTANTIATE_TEST_SUITE_P(EveryOp, XlaOps, ::testing::ValuesIn(every_op()), param_name);

// ------------------------------------------------------------------------ checks at the entry, on every device

std::vector<Device> devices() {
  std::vector<Device> d{Device::cpu()};
  if (build_info().cuda && device_available(Device::cuda(0))) d.push_back(Device::cuda(0));
  return d;
}

// The same bad calls fail on every device with the same message, naming the op and the tensor.
TEST(OpChecks, BadCallsNameTheOpAndTheTensorOnEveryDevice) {
  for (Device d : devices()) {
    SCOPED_TRACE(d.str());
    std::deque<Tensor> keep;  // the ops take their outputs by reference
    auto t = [&](Shape s, DType dt = DType::float32) -> Tensor& {
      return keep.emplace_back(Tensor::zeros(std::move(s), dt, d));
    };
    Tensor none;
    Conv2DParams same = conv_params(1, 1, 1, 1, 1, 1, 1, 1);
    std::string e = error_of([&] {
      conv2d_forward(t({2, 8, 8, 3}), t({3, 3, 3, 4}), none, t({2, 7, 8, 4}), same);
    });
    EXPECT_THAT(e, HasSubstr("conv2d_forward: y has shape (2, 7, 8, 4), expected (2, 8, 8, 4)"));
    e = error_of([&] {
      conv2d_forward(t({2, 8, 8, 3}), t({3, 3, 3, 4}, DType::float64), none, t({2, 8, 8, 4}), same);
    });
    EXPECT_THAT(e, HasSubstr("conv2d_forward: w is float64, expected float32"));
    e = error_of([&] { conv2d_forward(t({2, 8, 8, 3}), t({3, 3, 2, 4}), none, t({2, 8, 8, 4}), same); });
    EXPECT_THAT(e, HasSubstr("takes 2 channels"));
    e = error_of([&] { dense_forward(t({8, 4}), t({3, 5}), none, t({8, 5})); });
    EXPECT_THAT(e, HasSubstr("dense_forward: x (8, 4), kernel w (3, 5)"));
    e = error_of([&] {
      pool2d_forward(t({1, 4, 4, 2}), t({1, 3, 3, 2}), none,
                     pool_params(PoolKind::max, 2, 2, 2, 2, 0, 0, 0, 0));
    });
    EXPECT_THAT(e, HasSubstr("pool2d_forward: y has shape (1, 3, 3, 2), expected (1, 2, 2, 2)"));
    e = error_of([&] {
      batch_norm_forward_inference(t({4, 3}), t({4}), t({3}), t({3}), t({3}), t({4, 3}), 1e-3);
    });
    EXPECT_THAT(
        e,
        HasSubstr("batch_norm_forward_inference: gamma has shape (4,); it takes one value per channel (3)"));
    e = error_of([&] { activation_forward(Activation::relu, t({4}, DType::int32), t({4}, DType::int32)); });
    EXPECT_THAT(e, HasSubstr("activation_forward: x is int32"));
    e = error_of([&] { activation_backward(Activation::gelu, none, t({4}), t({4}), t({4})); });
    EXPECT_THAT(e, HasSubstr("the gradient of gelu needs the forward input x"));
    e = error_of([&] { pad2d_forward(t({1, 2, 2, 1}), t({1, 4, 4, 2}), Pad2D{1, 1, 1, 1}); });
    EXPECT_THAT(e, HasSubstr("pad2d_forward: y has shape (1, 4, 4, 2), expected (1, 4, 4, 1)"));
    e = error_of([&] { copy(t({4}), t({5})); });
    EXPECT_THAT(e, HasSubstr("copy: dst has shape (5,) but src has (4,)"));
    Tensor sum = t({1}, DType::float64);
    e = error_of([&] { softmax_cross_entropy(t({4, 3}), t({5}, DType::int32), none, sum, none, 1); });
    EXPECT_THAT(e, HasSubstr("softmax_cross_entropy: 5 integer labels for 4 predictions"));
    e = error_of([&] { softmax_cross_entropy(t({4, 3}), t({4}, DType::int32), t({3}), sum, none, 1); });
    EXPECT_THAT(e, HasSubstr("softmax_cross_entropy: weights of shape (3,) for predictions of shape (4, 3)"));
    e = error_of([&] { elementwise_loss(t({4, 3}), t({4, 3}), t({4}, DType::int32), sum, none, {}, 1); });
    EXPECT_THAT(e, HasSubstr("elementwise_loss: weights is int32, expected float32"));
    e = error_of([&] { dropout_forward(t({4}), t({4}), 1.0, 0, none); });
    EXPECT_THAT(e, HasSubstr("dropout_forward: rate must be in [0, 1)"));
    e = error_of([&] { concat_forward({t({2, 3}), t({3, 3})}, t({2, 6}), 1); });
    EXPECT_THAT(e, HasSubstr("concat_forward: part 1"));
    // The whole recurrence: Keras's default activations only, Keras's bias shapes, c0 for an LSTM only.
    const RnnCellParams lstm{.cell = RnnCell::lstm}, gru{.cell = RnnCell::gru};
    RnnCellParams softsign = lstm;
    softsign.activation = Activation::softsign;
    e = error_of([&] {
      rnn_sequence_forward(softsign, false, t({2, 3, 4}), t({4, 8}), t({2, 8}), none, none, none,
                           t({2, 3, 2}), none, none, none);
    });
    EXPECT_THAT(e, HasSubstr("rnn_sequence_forward: runs Keras's default activations only, not softsign"));
    e = error_of([&] {
      rnn_sequence_forward(gru, false, t({2, 3, 4}), t({4, 6}), t({2, 6}), t({6}), none, none, t({2, 3, 2}),
                           none, none, none);
    });
    EXPECT_THAT(e, HasSubstr("rnn_sequence_forward: bias has shape (6,), expected (2, 6)"));
    e = error_of([&] {
      rnn_sequence_forward(gru, false, t({2, 3, 4}), t({4, 6}), t({2, 6}), none, t({3, 2}), t({3, 2}),
                           t({2, 3, 2}), none, none, none);
    });
    EXPECT_THAT(e, HasSubstr("rnn_sequence_forward: c0 is for an LSTM"));
    e = error_of([&] {
      rnn_sequence_backward(lstm, false, t({2, 3, 4}), t({4, 8}), t({2, 8}), none, none, none, t({2, 3, 2}),
                            none, t({2, 3, 3}), none, none, none, none, none, none, none, none);
    });
    EXPECT_THAT(e, HasSubstr("rnn_sequence_backward: dy has shape (2, 3, 3), expected (2, 3, 2)"));
  }
}

TEST(CudaOpChecks, TensorsOnDifferentDevicesAreRefused) {
  SYSTOLIC_REQUIRE_GPU();
  Tensor x = Tensor::zeros({4}), y = Tensor::zeros({4}, DType::float32, Device::cuda(0));
  EXPECT_THAT(error_of([&] { copy(x, y); }), HasSubstr("copy: tensors on different devices"));
}

// What each backend says it runs (an op a backend does not take in a dtype is refused by name, never run
// elsewhere: the CUDA cases show it; on the CPU every dtype the checks let through runs).
TEST(OpChecks, UnsupportedDtypesAreRefusedByName) {
  // The CPU runs bfloat16 data by widening it (ops/cpu/bf16_emulation.h), but not the float32-only image ops.
  EXPECT_TRUE(supports(Op::conv2d_forward, DType::bfloat16, Device::cpu()));
  EXPECT_FALSE(supports(Op::random_image_transforms, DType::bfloat16, Device::cpu()));
  EXPECT_FALSE(supports(Op::augment_images, DType::float64, Device::cpu()));
  EXPECT_FALSE(supports(Op::gather_rows, DType::uint8, Device::cpu()));
  EXPECT_TRUE(supports(Op::fill, DType::uint8, Device::cpu()));
  if (!build_info().cuda) {
    EXPECT_FALSE(supports(Op::fill, DType::float32, Device::cuda(0)));
  }
}

// Batch norm synchronised over two identical replicas (every sum doubles) computes what one replica computes
// alone: the statistics, y, dx; dgamma and dbeta get this replica's sums. Every replica calls the all-reduces, also
// one whose dx is undefined.
TEST(OpChecks, SynchronisedBatchNormOverIdenticalReplicasEqualsOneReplica) {
  for (Device d : devices()) {
    SCOPED_TRACE(d.str());
    Shape xs{4, 3, 5, 8};
    auto r = [d](Shape s, std::uint64_t seed, double lo = -1, double hi = 1) {
      return systolic::testing::random_tensor(std::move(s), seed, DType::float32, lo, hi).to(d);
    };
    Tensor x = r(xs, 1, 1, 4), gamma = r({8}, 2, 0.5, 1.5), beta = r({8}, 3), dy = r(xs, 4);
    int calls = 0;
    CrossReplica twins{[&calls](Tensor& sums) {
      ++calls;
      scale_shift(sums, sums, 2.0, 0.0);
    }};
    Tensor y1 = Tensor::zeros(xs, DType::float32, d), y2 = y1.clone();
    Tensor m1 = Tensor::zeros({8}, DType::float32, d), v1 = m1.clone(), m2 = m1.clone(), v2 = m1.clone();
    batch_norm_forward_training(x, gamma, beta, y1, m1, v1, 1e-3, nullptr);
    batch_norm_forward_training(x, gamma, beta, y2, m2, v2, 1e-3, &twins);
    EXPECT_EQ(calls, 2);
    EXPECT_LE(normalised_max_error(m2, m1), 1e-6);
    EXPECT_LE(normalised_max_error(v2, v1), 1e-5);
    EXPECT_LE(normalised_max_error(y2, y1), 1e-5);
    Tensor dx1 = Tensor::zeros(xs, DType::float32, d), dx2 = dx1.clone();
    Tensor dg1 = Tensor::zeros({8}, DType::float32, d), db1 = dg1.clone(), dg2 = dg1.clone(),
           db2 = dg1.clone();
    batch_norm_backward(x, gamma, m1, v1, dy, dx1, dg1, db1, 1e-3, nullptr);
    batch_norm_backward(x, gamma, m1, v1, dy, dx2, dg2, db2, 1e-3, &twins);
    EXPECT_EQ(calls, 3);
    EXPECT_LE(normalised_max_error(dx2, dx1), 1e-5);
    EXPECT_LE(normalised_max_error(dg2, dg1), 1e-5);
    EXPECT_LE(normalised_max_error(db2, db1), 1e-5);
    Tensor none;
    batch_norm_backward(x, gamma, m1, v1, dy, none, none, none, 1e-3, &twins);
    EXPECT_EQ(calls, 4) << "a replica with nothing to compute still takes part in the all-reduce";
  }
}

// The host-index overload of gather_rows (not an op of the list: it uploads, then calls the op).
TEST(OpChecks, GatherRowsWithHostIndices) {
  for (Device d : devices()) {
    Tensor images = systolic::testing::random_tensor({50, 3}, 1, DType::uint8, 0, 255).to(d);
    Tensor got = Tensor::zeros({3, 3}, DType::float32, d);
    gather_rows(images, std::vector<std::int64_t>{49, 0, 7}, got);
    auto g = got.to_doubles(), src = images.to_doubles();
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(g[j], src[49 * 3 + j]);
      EXPECT_EQ(g[3 + j], src[j]);
      EXPECT_EQ(g[6 + j], src[21 + j]);
    }
    EXPECT_THAT(error_of([&] { gather_rows(images, std::vector<std::int64_t>{50}, got); }),
                HasSubstr("range"));
  }
}

// Embedding's ops by hand, on every device and on XLA: ids truncated toward zero (INT32_MIN when not finite or out
// of range), rows gathered, and the gradient's rows added back with repeated ids summed.
TEST(OpChecks, EmbeddingIdsGatherAndScatterAddByHand) {
  auto f = [](Shape s, std::vector<double> v, DType t = DType::float32) {
    return Tensor::from_vector(v, s).to(t);
  };
  auto i32 = [](std::vector<std::int32_t> v) { return Tensor::from_vector(v, {std::int64_t(v.size())}); };
  std::vector<Device> ds = devices();
  if (systolic::testing::xla_unavailable().empty()) ds.push_back(systolic::testing::xla_cpu());
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ids = {2.7, -2.7, 0.0, -0.5, 3e9, -3e9, nan, inf, 2147483520.0, -2147483648.0};
  const std::vector<double> want = {2,         -2,           0,        0, INT32_MIN, INT32_MIN, INT32_MIN,
                                    INT32_MIN, 2147483520.0, INT32_MIN};
  for (Device d : ds) {
    SCOPED_TRACE(d.str());
    for (DType from : {DType::float32, DType::float64}) {
      Tensor src = f({10}, ids, from).to(d), got = Tensor::zeros({10}, DType::int32, d);
      cast(src, got);
      EXPECT_EQ(got.to_doubles(), want) << dtype_name(from);
    }
    // Table of 4 rows of 2; ids 3, 0, 3: rows 3, 0, 3; the gradient rows add up at 3.
    Tensor table = f({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}).to(d);
    Tensor index = i32({3, 0, 3}).to(d);
    Tensor rows = Tensor::zeros({3, 2}, DType::float32, d);
    gather_rows(table, index, rows);
    EXPECT_EQ(rows.to_doubles(), (std::vector<double>{30, 31, 0, 1, 30, 31}));
    Tensor grad = Tensor::full({4, 2}, 1.0).to(d);
    scatter_add_rows(f({3, 2}, {1, 2, 3, 4, 5, 6}).to(d), index, grad);
    EXPECT_EQ(grad.to_doubles(), (std::vector<double>{4, 5, 1, 1, 1, 1, 7, 9}));
  }
  // An id out of range: an error on the CPU; NaN rows on XLA (its gather would clamp the index).
  Tensor table = f({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Tensor bad = i32({1, 4}), rows = Tensor::zeros({2, 2});
  EXPECT_THAT(error_of([&] { gather_rows(table, bad, rows); }), HasSubstr("row 4 out of range [0, 4)"));
  EXPECT_THAT(error_of([&] { scatter_add_rows(rows, bad, table); }), HasSubstr("row 4 out of range [0, 4)"));
  if (systolic::testing::xla_unavailable().empty()) {
    Device x = systolic::testing::xla_cpu();
    Tensor xr = Tensor::zeros({2, 2}, DType::float32, x);
    gather_rows(table.to(x), bad.to(x), xr);
    auto v = xr.to_doubles();
    EXPECT_EQ(v[0], 10);
    EXPECT_EQ(v[1], 11);
    EXPECT_TRUE(std::isnan(v[2]) && std::isnan(v[3]));
  }
}

TEST(CpuBackend, OneDnnVersionAndIsa) {
  EXPECT_EQ(onednn::version().rfind("2.", 0), 0u) << onednn::version();
  EXPECT_NE(onednn::cpu_isa(), "unknown");
  EXPECT_FALSE(onednn::cpu_isa().empty());
}

// bfloat16 data runs on oneDNN's native kernels exactly where the CPU has bfloat16 instructions; elsewhere the CPU
// widens it to float32 (ops/cpu/bf16_emulation.h). The harness's bfloat16 cases above test whichever path this CPU
// takes; tests/CMakeLists.txt runs them again with oneDNN limited to AVX-512 without bfloat16 (the widening path).
TEST(CpuBackend, NativeBfloat16KernelsWhereTheCpuHasBfloat16Instructions) {
  const std::string isa = onednn::cpu_isa();
  const bool has_bf16 = isa == "avx512_core_bf16" || isa == "avx512_core_amx";
  EXPECT_EQ(onednn::runs_bf16(), has_bf16) << isa;
  EXPECT_TRUE(supports(Op::conv2d_forward, DType::bfloat16, Device::cpu()));
  if (!has_bf16)
    GTEST_SKIP() << "this CPU (" << isa << ") has no bfloat16 instructions: its bfloat16 ops widen to "
                 << "float32, and the native kernels are not tested here";
}

}  // namespace
}  // namespace systolic::ops
