// Max and average pooling on the XLA backend (xla_backend.h): reduce_window over H and W; max's gradient goes to
// the first maximum of each window (select_and_scatter with GE), average's is dy / count spread back over the
// window (a strided pad of dy, then a window sum). Padded cells are ignored (max) or not counted (average).
#include <cmath>

#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

std::string window_attributes(const Pool2DParams& p, const std::vector<std::int64_t>& strides) {
  return "window_dimensions = " + systolic::xla::i64_array({1, p.window_h, p.window_w, 1}) +
         ", window_strides = " + systolic::xla::i64_array(strides) + ", padding = dense<[[0, 0], [" +
         std::to_string(p.pad_top) + ", " + std::to_string(p.pad_bottom) + "], [" +
         std::to_string(p.pad_left) + ", " + std::to_string(p.pad_right) + "], [0, 0]]> : tensor<4x2xi64>";
}

E reduce_window(const E& x, const std::string& op, double init, const std::string& attributes,
                const std::vector<std::int64_t>& out) {
  E start = constant(init, Type{x.elem(), {}});
  return hlo().op("stablehlo.reduce_window", {x.v, start.v}, Type{x.elem(), out}, attributes,
                  hlo().binary_region(op, x.elem()));
}

// How many cells of each window lie inside the image (average pooling's divisor), shaped as y.
E window_counts(const Pool2DParams& p, const std::vector<std::int64_t>& x_dims,
                const std::vector<std::int64_t>& y_dims, Elem elem) {
  E ones = constant(1.0, Type{elem, {1, x_dims[1], x_dims[2], 1}});
  return reduce_window(ones, "stablehlo.add", 0.0, window_attributes(p, {1, p.stride_h, p.stride_w, 1}),
                       {1, y_dims[1], y_dims[2], 1});
}

}  // namespace

const DTypes pool2d_forward_dtypes = kFloatsAndBf16;
void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) {
  (void)workspace;  // backward recomputes from x
  traced([&] {
    E xv = read(x);
    auto out = y.shape().dims();
    std::string attrs = window_attributes(p, {1, p.stride_h, p.stride_w, 1});
    if (p.kind == PoolKind::max) {
      write(y, reduce_window(xv, "stablehlo.maximum", -INFINITY, attrs, out));
    } else {
      E total = reduce_window(xv, "stablehlo.add", 0.0, attrs, out);
      write(y, total / broadcast(window_counts(p, xv.dims(), out, xv.elem()), out, {0, 1, 2, 3}));
    }
  });
}

const DTypes pool2d_backward_dtypes = kFloatsAndBf16;
void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,
                     const Pool2DParams& p) {
  (void)y;
  (void)workspace;
  traced([&] {
    E g = read(dy);
    auto in = dx.shape().dims();
    if (p.kind == PoolKind::max) {
      E xv = read(x);
      E zero = constant(0.0, Type{g.elem(), {}});
      std::string select = hlo().region({Type{xv.elem(), {}}, Type{xv.elem(), {}}},
                                        [](Builder& b, const std::vector<Value>& a) {
                                          return std::vector<Value>{b.compare(a[0], a[1], Compare::ge)};
                                        });
      std::string scatter = hlo().binary_region("stablehlo.add", g.elem());
      std::string attrs = "window_dimensions = " + systolic::xla::i64_array({1, p.window_h, p.window_w, 1}) +
                          ", window_strides = " + systolic::xla::i64_array({1, p.stride_h, p.stride_w, 1}) +
                          ", padding = dense<[[0, 0], [" + std::to_string(p.pad_top) + ", " +
                          std::to_string(p.pad_bottom) + "], [" + std::to_string(p.pad_left) + ", " +
                          std::to_string(p.pad_right) + "], [0, 0]]> : tensor<4x2xi64>";
      E out = hlo().op("stablehlo.select_and_scatter", {xv.v, g.v, zero.v}, Type{g.elem(), in}, attrs,
                       select + ", " + scatter);
      write(dx, out);
      return;
    }
    // Average: each dy cell / its window's count, spread back: pad dy with stride-1 zeros between cells and
    // window-1 around it, then sum over windows of stride 1.
    E share = g / broadcast(window_counts(p, in, g.dims(), g.elem()), g.dims(), {0, 1, 2, 3});
    const std::int64_t K[2] = {p.window_h, p.window_w}, s[2] = {p.stride_h, p.stride_w};
    const std::int64_t lo[2] = {p.pad_top, p.pad_left}, H[2] = {in[1], in[2]},
                       O[2] = {g.dims()[1], g.dims()[2]};
    std::vector<std::int64_t> pad_lo{0, 0, 0, 0}, pad_hi{0, 0, 0, 0}, interior{0, s[0] - 1, s[1] - 1, 0};
    for (int a = 0; a < 2; ++a) {
      pad_lo[a + 1] = K[a] - 1 - lo[a];
      pad_hi[a + 1] = H[a] + K[a] - 1 - pad_lo[a + 1] - ((O[a] - 1) * s[a] + 1);
    }
    E zero = constant(0.0, Type{g.elem(), {}});
    E spread = hlo().pad(share.v, zero.v, pad_lo, pad_hi, interior);
    std::string attrs = "window_dimensions = " + systolic::xla::i64_array({1, K[0], K[1], 1}) +
                        ", window_strides = " + systolic::xla::i64_array({1, 1, 1, 1});
    write(dx, reduce_window(spread, "stablehlo.add", 0.0, attrs, in));
  });
}

}  // namespace systolic::ops::xla
