// Convolution and pooling as oneDNN primitives on NHWC tensors, kernels in Keras's (KH, KW, C, F) layout
// (oneDNN's `hwio`). Where a primitive prefers a blocked layout, the entry reorders into and out of
// buffers it owns; the layouts asked for are the fastest measured on the seed CNN's shapes (see want_act).
// Data (x, y, dx, dy) and kernel are float32 or bfloat16, each described with its own tensor's dtype; the bias,
// the kernel's gradient and the bias's gradient stay float32 under mixed precision (oneDNN's bfloat16
// convolutions accumulate in float32 and take float32 bias and diff_weights).
#include "ops/cpu/onednn.h"
#include "ops/cpu/onednn_common.h"

namespace systolic::ops::onednn {

using namespace detail;

namespace {

// ---------------------------------------------------------------------------------------------- convolution

// The caller's layouts.
dnnl::memory::desc user_act(const dims& d, DType t) {
  return md(d, t, tag::nhwc);
}
dnnl::memory::desc user_bias(const dims& d) {
  return f32_md(d, tag::a);
}

struct ConvShape {
  // logical oneDNN dims: {N,C,H,W}, {F,C,KH,KW} ({G,F/G,C/G,KH,KW} when grouped), {F}, {N,F,OH,OW}
  dims src, weights, bias, dst;
  DType data = DType::float32;       // x, y, dx, dy
  DType kernel = DType::float32;     // w (its compute copy under mixed precision)
  dnnl::memory::desc user_weights;   // Keras's (KH, KW, C/G, F) memory of w, described over those dims
  dnnl::memory::desc user_dweights;  // the same, float32: dw (weight gradients stay float32)
  dims strides, dilates, pad_l, pad_r;
  Key key;
};

// Keras's (KH, KW, C/G, F) kernel memory in dtype t, described over oneDNN's logical dims.
dnnl::memory::desc keras_kernel(const ConvShape& s, const Tensor& w, const Conv2DParams& p, DType t) {
  if (p.groups == 1) return md(s.weights, t, tag::hwio);
  // Grouped: oneDNN's {G, F/G, C/G, KH, KW} over Keras's memory, where filter f = g*(F/G) + o sits at
  // ((kh*KW + kw)*(C/G) + c)*F + f.
  std::int64_t G = p.groups, F = w.dim(3), Cg = w.dim(2), KW = w.dim(1);
  return dnnl::memory::desc(s.weights, dnnl_dtype(t), dims{F / G, 1, F, KW * Cg * F, Cg * F});
}

// A convolution's multiply-adds: each output value reads a window of its group's input channels (w: [KH, KW,
// C / groups, F]).
std::int64_t conv_work(const Tensor& y, const Tensor& w) {
  return y.numel() * w.dim(0) * w.dim(1) * w.dim(2);
}

// `x` gives the input's shape only (conv2d_backward may pass dx for it); `data` is the dtype of x, y, dx, dy.
ConvShape conv_shape(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2DParams& p, DType data) {
  ConvShape s;
  s.data = data;
  s.kernel = w.dtype();
  s.src = {x.dim(0), x.dim(3), x.dim(1), x.dim(2)};
  if (p.groups == 1)
    s.weights = {w.dim(3), w.dim(2), w.dim(0), w.dim(1)};
  else
    s.weights = {p.groups, w.dim(3) / p.groups, w.dim(2), w.dim(0), w.dim(1)};
  s.user_weights = keras_kernel(s, w, p, s.kernel);
  s.user_dweights = keras_kernel(s, w, p, DType::float32);
  s.bias = {w.dim(3)};
  s.dst = {y.dim(0), y.dim(3), y.dim(1), y.dim(2)};
  s.strides = {p.stride_h, p.stride_w};
  s.dilates = {p.dilation_h - 1, p.dilation_w - 1};  // oneDNN counts the gaps: 0 is an ordinary kernel
  s.pad_l = {p.pad_top, p.pad_left};
  s.pad_r = {p.pad_bottom, p.pad_right};
  s.key = {x.dim(0),
           x.dim(1),
           x.dim(2),
           x.dim(3),
           w.dim(0),
           w.dim(1),
           w.dim(3),
           y.dim(1),
           y.dim(2),
           p.stride_h,
           p.stride_w,
           p.dilation_h,
           p.dilation_w,
           p.pad_top,
           p.pad_bottom,
           p.pad_left,
           p.pad_right,
           p.groups,
           static_cast<int>(s.data),
           static_cast<int>(s.kernel)};
  return s;
}

// What the convolution primitives are asked for: activations in the caller's NHWC (oneDNN 2.6 has brgemm
// forward and jit backward kernels for NHWC, so x, y, dx, dy are never copied), weights in whatever blocked
// layout the kernel prefers (`any`), reordered from/to hwio on each call (the weights are small). Measured on
// the seed CNN's layers at batch 128 on 2 AVX-512 cores: plain hwio weights (no reorder) run 2x slower
// (gemm-style kernels); letting oneDNN pick blocked activations too (reordering x, y, dx, dy) is 20% slower
// forward and no faster backward.
dnnl::memory::desc want_act(const dims& d, DType t) {
  return user_act(d, t);
}
dnnl::memory::desc want_weights(const dims& d, DType t) {
  return md(d, t, tag::any);
}

dnnl::convolution_forward::desc conv_fwd_desc(const ConvShape& s, dnnl::prop_kind prop, bool bias) {
  if (bias)
    return {prop,
            dnnl::algorithm::convolution_direct,
            want_act(s.src, s.data),
            want_weights(s.weights, s.kernel),
            user_bias(s.bias),
            want_act(s.dst, s.data),
            s.strides,
            s.dilates,
            s.pad_l,
            s.pad_r};
  return {prop,
          dnnl::algorithm::convolution_direct,
          want_act(s.src, s.data),
          want_weights(s.weights, s.kernel),
          want_act(s.dst, s.data),
          s.strides,
          s.dilates,
          s.pad_l,
          s.pad_r};
}

struct ConvForward {
  dnnl::convolution_forward prim;
  Staged src, weights, dst;
};

struct ConvBackward {
  bool data = false, weights = false, bias = false;
  dnnl::convolution_backward_data data_prim;
  Staged data_diff_dst, data_weights, data_diff_src;
  dnnl::convolution_backward_weights weights_prim;
  Staged weights_src, weights_diff_dst, weights_diff_weights;
  bool share_diff_dst = false;  // both primitives want dy in the same non-user layout: reorder it once
  dnnl::memory diff_bias;       // scratch: the contract accumulates db, the primitive overwrites
};

// ------------------------------------------------------------------------------------------------- pooling

dnnl::algorithm pool_algorithm(const Pool2DParams& p) {
  // Keras averages over the valid cells only.
  return p.kind == PoolKind::max ? dnnl::algorithm::pooling_max
                                 : dnnl::algorithm::pooling_avg_exclude_padding;
}

struct PoolShape {
  dnnl::memory::desc src, dst;
  dims strides, kernel, pad_l, pad_r;
  Key key;
};
PoolShape pool_shape(const Tensor& x, const Tensor& y, const Pool2DParams& p) {
  PoolShape s;
  s.src = user_act({x.dim(0), x.dim(3), x.dim(1), x.dim(2)}, x.dtype());
  s.dst = user_act({y.dim(0), y.dim(3), y.dim(1), y.dim(2)}, x.dtype());
  s.strides = {p.stride_h, p.stride_w};
  s.kernel = {p.window_h, p.window_w};
  s.pad_l = {p.pad_top, p.pad_left};
  s.pad_r = {p.pad_bottom, p.pad_right};
  s.key = {static_cast<int>(p.kind),
           x.dim(0),
           x.dim(1),
           x.dim(2),
           x.dim(3),
           y.dim(1),
           y.dim(2),
           p.window_h,
           p.window_w,
           p.stride_h,
           p.stride_w,
           p.pad_top,
           p.pad_bottom,
           p.pad_left,
           p.pad_right,
           static_cast<int>(x.dtype())};
  return s;
}
dnnl::pooling_forward::primitive_desc pool_fwd_pd(const PoolShape& s, const Pool2DParams& p,
                                                  dnnl::prop_kind prop) {
  // NHWC is asked for directly: pooling is memory bound and oneDNN's jit pooling runs NHWC natively, so a
  // reorder would only add traffic.
  dnnl::pooling_forward::desc d(prop, pool_algorithm(p), s.src, s.dst, s.strides, s.kernel, s.pad_l, s.pad_r);
  return {d, engine()};
}

struct PoolForward {
  dnnl::pooling_forward prim;
  dnnl::memory::desc workspace_md;  // training only
};
struct PoolBackward {
  dnnl::pooling_backward prim;
  dnnl::memory::desc workspace_md;
  // Max pooling without a usable workspace from the forward pass recomputes it with these.
  dnnl::pooling_forward recompute;
  dnnl::memory recompute_dst, recompute_workspace;
};

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) {
  if (y.numel() == 0) return;
  guarded("conv2d_forward", conv_work(y, w), [&] {
    thread_local PrimitiveCache<ConvForward> cache;
    auto s = conv_shape(x, w, y, p, x.dtype());
    Key key = s.key;
    key.push_back(b.defined());
    key.push_back(static_cast<int>(p.activation.kind));
    auto& e = cache.get(key, [&] {
      dnnl::primitive_attr attr;
      if (p.activation == Activation::relu) {  // fused into the convolution's output stage
        dnnl::post_ops ops;
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(ops);
      }
      dnnl::convolution_forward::primitive_desc pd(
          conv_fwd_desc(s, dnnl::prop_kind::forward_training, b.defined()), attr, engine());
      ConvForward c;
      c.prim = dnnl::convolution_forward(pd);
      c.src = stage_in(user_act(s.src, s.data), pd.src_desc());
      c.weights = stage_in(s.user_weights, pd.weights_desc());
      c.dst = stage_out(pd.dst_desc(), user_act(s.dst, s.data));
      return c;
    });
    auto y_mem = wrap(user_act(s.dst, s.data), y);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, input(e.src, wrap(user_act(s.src, s.data), x))},
                                               {DNNL_ARG_WEIGHTS, input(e.weights, wrap(s.user_weights, w))},
                                               {DNNL_ARG_DST, output(e.dst, y_mem)}};
    if (b.defined()) args[DNNL_ARG_BIAS] = wrap(user_bias(s.bias), b);
    e.prim.execute(stream(), args);
    finish(e.dst, y_mem);
  });
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                     const Conv2DParams& p) {
  bool need_data = dx.defined(), need_weights = dw.defined() || db.defined();
  if (!need_data && !need_weights) return;
  if (dy.numel() == 0) {  // no output cells: nothing flows back (dw, db accumulate nothing)
    if (need_data) dx.fill(0.0);
    return;
  }
  guarded("conv2d_backward", conv_work(dy, w), [&] {
    thread_local PrimitiveCache<ConvBackward> cache;
    auto s = conv_shape(x.defined() ? x : dx, w, dy, p, dy.dtype());
    Key key = s.key;
    key.insert(key.end(), {need_data, need_weights, db.defined()});
    auto& e = cache.get(key, [&] {
      ConvBackward c;
      c.data = need_data;
      c.weights = need_weights;
      c.bias = db.defined();
      // The backward primitive descriptors take the forward one as a hint for layouts and implementation.
      dnnl::convolution_forward::primitive_desc hint(
          conv_fwd_desc(s, dnnl::prop_kind::forward_training, c.bias), engine());
      if (c.data) {
        dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, want_act(s.src, s.data),
                                                want_weights(s.weights, s.kernel), want_act(s.dst, s.data),
                                                s.strides, s.dilates, s.pad_l, s.pad_r);
        dnnl::convolution_backward_data::primitive_desc pd(d, engine(), hint);
        c.data_prim = dnnl::convolution_backward_data(pd);
        c.data_diff_dst = stage_in(user_act(s.dst, s.data), pd.diff_dst_desc());
        c.data_weights = stage_in(s.user_weights, pd.weights_desc());
        c.data_diff_src = stage_out(pd.diff_src_desc(), user_act(s.src, s.data));
      }
      if (c.weights) {
        // The kernel's gradient in float32 (mixed precision keeps weight gradients float32).
        auto dw_any = want_weights(s.weights, DType::float32);
        auto d = c.bias
                     ? dnnl::convolution_backward_weights::desc(
                           dnnl::algorithm::convolution_direct, want_act(s.src, s.data), dw_any,
                           user_bias(s.bias), want_act(s.dst, s.data), s.strides, s.dilates, s.pad_l, s.pad_r)
                     : dnnl::convolution_backward_weights::desc(
                           dnnl::algorithm::convolution_direct, want_act(s.src, s.data), dw_any,
                           want_act(s.dst, s.data), s.strides, s.dilates, s.pad_l, s.pad_r);
        dnnl::convolution_backward_weights::primitive_desc pd(d, engine(), hint);
        c.weights_prim = dnnl::convolution_backward_weights(pd);
        c.weights_src = stage_in(user_act(s.src, s.data), pd.src_desc());
        c.share_diff_dst =
            c.data && c.data_diff_dst.needed() && pd.diff_dst_desc() == c.data_diff_dst.buffer.get_desc();
        if (!c.share_diff_dst) c.weights_diff_dst = stage_in(user_act(s.dst, s.data), pd.diff_dst_desc());
        // Always through scratch, added into dw by a reorder with a sum post-op (dw +=).
        c.weights_diff_weights = stage_out(pd.diff_weights_desc(), s.user_dweights, /*accumulate=*/true);
        if (c.bias) c.diff_bias = dnnl::memory(user_bias(s.bias), engine());
      }
      return c;
    });
    auto dy_user = wrap(user_act(s.dst, s.data), dy);
    dnnl::memory dy_data;
    if (e.data) {
      dy_data = input(e.data_diff_dst, dy_user);
      auto dx_mem = wrap(user_act(s.src, s.data), dx);
      e.data_prim.execute(stream(), {{DNNL_ARG_DIFF_DST, dy_data},
                                     {DNNL_ARG_WEIGHTS, input(e.data_weights, wrap(s.user_weights, w))},
                                     {DNNL_ARG_DIFF_SRC, output(e.data_diff_src, dx_mem)}});
      finish(e.data_diff_src, dx_mem);
    }
    if (e.weights) {
      std::unordered_map<int, dnnl::memory> args{
          {DNNL_ARG_SRC, input(e.weights_src, wrap(user_act(s.src, s.data), x))},
          {DNNL_ARG_DIFF_DST, e.share_diff_dst ? dy_data : input(e.weights_diff_dst, dy_user)},
          {DNNL_ARG_DIFF_WEIGHTS, e.weights_diff_weights.buffer}};
      if (e.bias) args[DNNL_ARG_DIFF_BIAS] = e.diff_bias;
      e.weights_prim.execute(stream(), args);
      if (dw.defined()) finish(e.weights_diff_weights, wrap(s.user_dweights, dw));
      if (e.bias) {
        const float* g = static_cast<const float*>(e.diff_bias.get_data_handle());
        float* out = db.data<float>();
        for (std::int64_t f = 0; f < db.numel(); ++f) out[f] += g[f];
      }
    }
  });
}

void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) {
  if (y.numel() == 0) return;
  guarded("pool2d_forward", y.numel() * p.window_h * p.window_w, [&] {
    thread_local PrimitiveCache<PoolForward> cache;
    auto s = pool_shape(x, y, p);
    // A defined workspace marks training (ops.h: undefined at inference); only max pooling needs one.
    bool training = p.kind == PoolKind::max && workspace.defined();
    Key key = s.key;
    key.push_back(training);
    auto& e = cache.get(key, [&] {
      auto pd = pool_fwd_pd(
          s, p, training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference);
      PoolForward f;
      f.prim = dnnl::pooling_forward(pd);
      if (training) f.workspace_md = pd.workspace_desc();
      return f;
    });
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(s.src, x)},
                                               {DNNL_ARG_DST, wrap(s.dst, y)}};
    if (training) {
      // Grown (never shrunk) to the primitive's workspace: the argmax of each window, for backward.
      std::size_t bytes = e.workspace_md.get_size();
      if (workspace.dtype() != DType::uint8 || workspace.nbytes() < bytes)
        workspace = Tensor(Shape{static_cast<std::int64_t>(bytes)}, DType::uint8, x.device());
      args[DNNL_ARG_WORKSPACE] = wrap(e.workspace_md, workspace);
    }
    e.prim.execute(stream(), args);
  });
}

void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,
                     const Pool2DParams& p) {
  (void)y;  // max pooling's backward finds each window's argmax in the workspace, not by comparing with y
  if (dx.numel() == 0) return;
  if (dy.numel() == 0) {
    dx.fill(0.0);
    return;
  }
  guarded("pool2d_backward", dy.numel() * p.window_h * p.window_w, [&] {
    thread_local PrimitiveCache<PoolBackward> cache;
    auto s = pool_shape(x, dy, p);
    bool max = p.kind == PoolKind::max;
    auto& e = cache.get(s.key, [&] {
      auto hint = pool_fwd_pd(s, p, dnnl::prop_kind::forward_training);
      dnnl::pooling_backward::desc d(pool_algorithm(p), s.src, s.dst, s.strides, s.kernel, s.pad_l, s.pad_r);
      PoolBackward b;
      b.prim = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(d, engine(), hint));
      if (max) {
        b.workspace_md = hint.workspace_desc();
        b.recompute = dnnl::pooling_forward(hint);
      }
      return b;
    });
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, wrap(s.dst, dy)},
                                               {DNNL_ARG_DIFF_SRC, wrap(s.src, dx)}};
    if (max) {
      if (workspace.defined() && workspace.dtype() == DType::uint8 &&
          workspace.nbytes() >= e.workspace_md.get_size()) {
        args[DNNL_ARG_WORKSPACE] = wrap(e.workspace_md, workspace);
      } else {
        // No workspace from a training forward (the caller ran it as inference): recompute the argmax.
        if (!e.recompute_workspace) {
          e.recompute_dst = dnnl::memory(s.dst, engine());
          e.recompute_workspace = dnnl::memory(e.workspace_md, engine());
        }
        e.recompute.execute(stream(), {{DNNL_ARG_SRC, wrap(s.src, x)},
                                       {DNNL_ARG_DST, e.recompute_dst},
                                       {DNNL_ARG_WORKSPACE, e.recompute_workspace}});
        args[DNNL_ARG_WORKSPACE] = e.recompute_workspace;
      }
    }
    e.prim.execute(stream(), args);
  });
}

}  // namespace systolic::ops::onednn
