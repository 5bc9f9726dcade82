// Convolution and bias_add on the XLA backend (xla_backend.h): stablehlo.convolution over NHWC x HWIO (Keras's
// layouts), grouped through feature_group_count; the gradients are convolutions too, as JAX writes them: dx
// convolves dy (dilated by the strides) with the flipped kernel, dw convolves x with dy (batch_group_count for
// groups). bfloat16 data computes in float32.
#include <fmt/format.h>

#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

struct Window {
  std::vector<std::int64_t> strides, lhs_dilation, rhs_dilation;
  std::vector<std::int64_t> pad_lo, pad_hi;
};

E convolve(const E& lhs, const E& rhs, const std::string& dims, const Window& w, std::int64_t feature_groups,
           std::int64_t batch_groups, const std::vector<std::int64_t>& out) {
  std::string padding = fmt::format("dense<[[{}, {}], [{}, {}]]> : tensor<2x2xi64>", w.pad_lo[0], w.pad_hi[0],
                                    w.pad_lo[1], w.pad_hi[1]);
  return hlo().op("stablehlo.convolution", {lhs.v, rhs.v}, Type{lhs.elem(), out},
                  "dimension_numbers = #stablehlo.conv<" + dims + ">, window_strides = " +
                      systolic::xla::i64_array(w.strides) + ", padding = " + padding +
                      ", lhs_dilation = " + systolic::xla::i64_array(w.lhs_dilation) +
                      ", rhs_dilation = " + systolic::xla::i64_array(w.rhs_dilation) +
                      fmt::format(", feature_group_count = {} : i64, batch_group_count = {} : i64",
                                  feature_groups, batch_groups));
}

// The kernel for dx: Keras's (KH, KW, Cg, F) as (KH, KW, F/G, G*Cg), flipped along KH and KW.
E data_kernel(const E& w, std::int64_t G) {
  auto d = w.dims();  // KH, KW, Cg, F
  E k = reshape(w, {d[0], d[1], d[2], G, d[3] / G});
  k = hlo().transpose(k.v, {0, 1, 4, 3, 2});
  k = reshape(k, {d[0], d[1], d[3] / G, G * d[2]});
  return hlo().op("stablehlo.reverse", {k.v}, k.type(), "dimensions = " + systolic::xla::i64_array({0, 1}));
}

}  // namespace

const DTypes conv2d_forward_dtypes = kFloatsAndBf16;
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) {
  traced([&] {
    E xv = read(x), wv = convert(read(w), xv.elem());
    Window win{{p.stride_h, p.stride_w},
               {1, 1},
               {p.dilation_h, p.dilation_w},
               {p.pad_top, p.pad_left},
               {p.pad_bottom, p.pad_right}};
    E out = convolve(xv, wv, "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]", win, p.groups, 1, y.shape().dims());
    if (b.defined()) out = out + broadcast_last(convert(read(b), out.elem()), out.dims());
    if (p.activation.kind == Activation::relu) out = maximum(out, 0.0);
    write(y, out);
  });
}

const DTypes conv2d_backward_dtypes = kFloatsAndBf16;
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                     const Conv2DParams& p) {
  traced([&] {
    E g = read(dy);
    const auto& gd = g.dims();  // N, OH, OW, F
    const std::int64_t KH = w.dim(0), KW = w.dim(1), G = p.groups;
    const std::int64_t s[2] = {p.stride_h, p.stride_w}, dil[2] = {p.dilation_h, p.dilation_w};
    const std::int64_t lo[2] = {p.pad_top, p.pad_left},
                       K[2] = {KH, KW};  // the high pads follow from the extents
    const std::int64_t out_sp[2] = {gd[1], gd[2]};
    std::vector<std::int64_t> in_dims = dx.defined() ? dx.shape().dims() : x.shape().dims();
    const std::int64_t in_sp[2] = {in_dims[1], in_dims[2]};
    if (dx.defined()) {
      Window win{{1, 1}, {s[0], s[1]}, {dil[0], dil[1]}, {0, 0}, {0, 0}};
      for (int a = 0; a < 2; ++a) {
        const std::int64_t k_eff = (K[a] - 1) * dil[a] + 1;
        win.pad_lo[a] = k_eff - 1 - lo[a];
        // The dilated dy is (out-1)*s+1 long; the result must be the input's length.
        win.pad_hi[a] = in_sp[a] + k_eff - 1 - win.pad_lo[a] - ((out_sp[a] - 1) * s[a] + 1);
      }
      E k = data_kernel(convert(read(w), g.elem()), G);
      write(dx, convolve(g, k, "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]", win, G, 1, in_dims));
    }
    if (dw.defined()) {
      E xv = convert(read(x), g.elem());
      Window win{{dil[0], dil[1]}, {1, 1}, {s[0], s[1]}, {lo[0], lo[1]}, {0, 0}};
      for (int a = 0; a < 2; ++a)
        win.pad_hi[a] = (K[a] - 1) * dil[a] + (out_sp[a] - 1) * s[a] + 1 - in_sp[a] - lo[a];
      accumulate_into(
          dw, convolve(xv, g, "[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]", win, 1, G, w.shape().dims()));
    }
    if (db.defined()) accumulate_into(db, sum(g, {0, 1, 2}));
  });
}

const DTypes bias_add_forward_dtypes = kFloatsAndBf16;
void bias_add_forward(const Tensor& x, const Tensor& b, Tensor& y) {
  traced([&] {
    E xv = read(x);
    write(y, xv + broadcast_last(convert(read(b), xv.elem()), xv.dims()));
  });
}

const DTypes bias_add_backward_dtypes = kFloatsAndBf16;
void bias_add_backward(const Tensor& dy, Tensor& db) {
  traced([&] {
    E g = read(dy);
    const std::int64_t c = g.dims().back();
    accumulate_into(db, sum(reshape(g, {dy.numel() / c, c}), {0}));
  });
}

}  // namespace systolic::ops::xla
