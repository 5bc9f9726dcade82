// The whole recurrence of a SimpleRNN, LSTM or GRU cell as oneDNN's RNN primitives (vanilla RNN, LSTM, GRU and
// linear-before-reset GRU), float32: ops::rnn_sequence_forward and rnn_sequence_backward (include/systolic/ops.h).
//
// Keras's weights are oneDNN's ldigo layout as they stand (kernel [F, G*u] = {1, 1, F, G, u}; recurrent likewise)
// with the gates in the same order (LSTM i, f, c, o; GRU update, reset, candidate), so they are only reordered
// when the primitive wants another layout. Keras's GRU with reset_after is oneDNN's linear-before-reset GRU, whose
// bias has a fourth gate: (b_z + b'_z, b_r + b'_r, b_h, b'_h) from Keras's input bias b and recurrent bias b'.
// Without reset_after it is oneDNN's GRU, which multiplies the state by r before its recurrent product, as Keras's.
//
// The primitives always get initial and final states (zeros or scratch where the op's are undefined), so one
// primitive serves every call of a shape. The training forward's workspace tensor holds oneDNN's workspace, then
// the final states (the backward primitive takes them as arguments).
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/cpu/onednn.h"
#include "ops/cpu/onednn_common.h"
#include "ops/rnn_math.h"

namespace systolic::ops::onednn {

using namespace detail;

namespace {

bool lbr(const RnnCellParams& p) {
  return p.cell == RnnCell::gru && p.reset_after;
}
// The gates of oneDNN's bias: the linear-before-reset GRU's has a fourth.
std::int64_t bias_gates(const RnnCellParams& p) {
  return rnn_math::gates(p.cell) + (lbr(p) ? 1 : 0);
}

// Every memory descriptor of one configuration (T steps, N rows, F features, u units).
struct Descs {
  dnnl::memory::desc src_layer, iter, weights_layer, weights_iter, bias, dst_layer;
  // The weights as Keras stores them (ldigo).
  dnnl::memory::desc user_weights_layer, user_weights_iter;
};
Descs descs(const RnnCellParams& p, std::int64_t T, std::int64_t N, std::int64_t F, std::int64_t u) {
  const std::int64_t G = rnn_math::gates(p.cell);
  Descs d;
  d.src_layer = f32_md({T, N, F}, tag::tnc);
  d.iter = f32_md({1, 1, N, u}, tag::ldnc);
  d.weights_layer = f32_md({1, 1, F, G, u}, tag::any);
  d.weights_iter = f32_md({1, 1, u, G, u}, tag::any);
  d.user_weights_layer = f32_md({1, 1, F, G, u}, tag::ldigo);
  d.user_weights_iter = f32_md({1, 1, u, G, u}, tag::ldigo);
  d.bias = f32_md({1, 1, bias_gates(p), u}, tag::ldgo);
  d.dst_layer = f32_md({T, N, u}, tag::tnc);
  return d;
}
dnnl::rnn_direction direction(bool reverse) {
  return reverse ? dnnl::rnn_direction::unidirectional_right2left
                 : dnnl::rnn_direction::unidirectional_left2right;
}

// The forward primitive descriptor of the cell (training: with a workspace for backward).
dnnl::primitive_desc forward_pd(const RnnCellParams& p, bool reverse, bool training, const Descs& d) {
  const auto prop = training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const auto dir = direction(reverse);
  switch (p.cell) {
    case RnnCell::simple:
      return dnnl::vanilla_rnn_forward::primitive_desc(
          dnnl::vanilla_rnn_forward::desc(prop, eltwise_algorithm(p.activation), dir, d.src_layer, d.iter,
                                          d.weights_layer, d.weights_iter, d.bias, d.dst_layer, d.iter),
          engine());
    case RnnCell::lstm:
      return dnnl::lstm_forward::primitive_desc(
          dnnl::lstm_forward::desc(prop, dir, d.src_layer, d.iter, d.iter, d.weights_layer, d.weights_iter,
                                   d.bias, d.dst_layer, d.iter, d.iter),
          engine());
    case RnnCell::gru:
      if (p.reset_after)
        return dnnl::lbr_gru_forward::primitive_desc(
            dnnl::lbr_gru_forward::desc(prop, dir, d.src_layer, d.iter, d.weights_layer, d.weights_iter,
                                        d.bias, d.dst_layer, d.iter),
            engine());
      return dnnl::gru_forward::primitive_desc(
          dnnl::gru_forward::desc(prop, dir, d.src_layer, d.iter, d.weights_layer, d.weights_iter, d.bias,
                                  d.dst_layer, d.iter),
          engine());
  }
  fail("oneDNN RNN: unknown cell");
}

// The backward primitive descriptor, with the training forward's as its hint.
dnnl::primitive_desc backward_pd(const RnnCellParams& p, bool reverse, const Descs& d) {
  const auto prop = dnnl::prop_kind::backward, train = dnnl::prop_kind::forward_training;
  const auto dir = direction(reverse);
  switch (p.cell) {
    case RnnCell::simple:
      return dnnl::vanilla_rnn_backward::primitive_desc(
          dnnl::vanilla_rnn_backward::desc(prop, eltwise_algorithm(p.activation), dir, d.src_layer, d.iter,
                                           d.weights_layer, d.weights_iter, d.bias, d.dst_layer, d.iter,
                                           d.src_layer, d.iter, d.weights_layer, d.weights_iter, d.bias,
                                           d.dst_layer, d.iter),
          engine(),
          dnnl::vanilla_rnn_forward::primitive_desc(
              dnnl::vanilla_rnn_forward::desc(train, eltwise_algorithm(p.activation), dir, d.src_layer,
                                              d.iter, d.weights_layer, d.weights_iter, d.bias, d.dst_layer,
                                              d.iter),
              engine()));
    case RnnCell::lstm:
      return dnnl::lstm_backward::primitive_desc(
          dnnl::lstm_backward::desc(prop, dir, d.src_layer, d.iter, d.iter, d.weights_layer, d.weights_iter,
                                    d.bias, d.dst_layer, d.iter, d.iter, d.src_layer, d.iter, d.iter,
                                    d.weights_layer, d.weights_iter, d.bias, d.dst_layer, d.iter, d.iter),
          engine(),
          dnnl::lstm_forward::primitive_desc(
              dnnl::lstm_forward::desc(train, dir, d.src_layer, d.iter, d.iter, d.weights_layer,
                                       d.weights_iter, d.bias, d.dst_layer, d.iter, d.iter),
              engine()));
    case RnnCell::gru:
      if (p.reset_after)
        return dnnl::lbr_gru_backward::primitive_desc(
            dnnl::lbr_gru_backward::desc(prop, dir, d.src_layer, d.iter, d.weights_layer, d.weights_iter,
                                         d.bias, d.dst_layer, d.iter, d.src_layer, d.iter, d.weights_layer,
                                         d.weights_iter, d.bias, d.dst_layer, d.iter),
            engine(),
            dnnl::lbr_gru_forward::primitive_desc(
                dnnl::lbr_gru_forward::desc(train, dir, d.src_layer, d.iter, d.weights_layer, d.weights_iter,
                                            d.bias, d.dst_layer, d.iter),
                engine()));
      return dnnl::gru_backward::primitive_desc(
          dnnl::gru_backward::desc(prop, dir, d.src_layer, d.iter, d.weights_layer, d.weights_iter, d.bias,
                                   d.dst_layer, d.iter, d.src_layer, d.iter, d.weights_layer, d.weights_iter,
                                   d.bias, d.dst_layer, d.iter),
          engine(),
          dnnl::gru_forward::primitive_desc(
              dnnl::gru_forward::desc(train, dir, d.src_layer, d.iter, d.weights_layer, d.weights_iter,
                                      d.bias, d.dst_layer, d.iter),
              engine()));
  }
  fail("oneDNN RNN: unknown cell");
}

Key key_of(const RnnCellParams& p, bool reverse, std::int64_t T, std::int64_t N, std::int64_t F,
           std::int64_t u, int kind) {
  return {
      kind, static_cast<int>(p.cell), p.reset_after, static_cast<int>(p.activation.kind), reverse, T, N, F,
      u};
}

// A forward configuration: the primitive, and the weights' reorders into its layouts.
struct Forward {
  Descs d;
  dnnl::primitive prim;
  std::size_t workspace_bytes = 0;
  Staged weights_layer, weights_iter;
};
Forward make_forward(const RnnCellParams& p, bool reverse, bool training, const Descs& d) {
  Forward f;
  f.d = d;
  const dnnl::primitive_desc pd = forward_pd(p, reverse, training, d);
  f.prim = dnnl::primitive(pd);
  if (training) f.workspace_bytes = pd.query_md(dnnl::query::workspace_md).get_size();
  f.weights_layer = stage_in(d.user_weights_layer, pd.query_md(dnnl::query::weights_md, 0));
  f.weights_iter = stage_in(d.user_weights_iter, pd.query_md(dnnl::query::weights_md, 1));
  return f;
}

// Grow-only per-thread scratch of floats.
float* scratch(std::vector<float>& v, std::int64_t n, bool zero) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  if (zero) std::fill_n(v.data(), n, 0.0f);
  return v.data();
}

// oneDNN's bias [Gb, u] from Keras's (zeros without one).
const float* onednn_bias(const RnnCellParams& p, const Tensor& bias, std::int64_t u,
                         std::vector<float>& buf) {
  if (bias.defined() && !lbr(p)) return bias.data<float>();
  float* b = scratch(buf, bias_gates(p) * u, !bias.defined());
  if (!bias.defined()) return b;
  const float* k = bias.data<float>();  // [2, 3u]: input's, recurrent's
  const std::int64_t G = 3 * u;
  for (std::int64_t j = 0; j < u; ++j) {
    b[j] = k[j] + k[G + j];
    b[u + j] = k[u + j] + k[G + u + j];
    b[2 * u + j] = k[2 * u + j];
    b[3 * u + j] = k[G + 2 * u + j];
  }
  return b;
}

dnnl::memory mem(const dnnl::memory::desc& d, const void* p) {
  return dnnl::memory(d, engine(), const_cast<void*>(p));
}

// The forward's arguments, over the op's tensors (or scratch). ws: oneDNN's workspace, or null at inference.
struct ForwardArgs {
  const float *x, *w, *r, *b, *h0, *c0;
  float *y, *h_last, *c_last;
  void* ws;
};
void run_forward(const RnnCellParams& p, Forward& f, const ForwardArgs& a) {
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC_LAYER, mem(f.d.src_layer, a.x)},
      {DNNL_ARG_SRC_ITER, mem(f.d.iter, a.h0)},
      {DNNL_ARG_WEIGHTS_LAYER, input(f.weights_layer, mem(f.d.user_weights_layer, a.w))},
      {DNNL_ARG_WEIGHTS_ITER, input(f.weights_iter, mem(f.d.user_weights_iter, a.r))},
      {DNNL_ARG_BIAS, mem(f.d.bias, a.b)},
      {DNNL_ARG_DST_LAYER, mem(f.d.dst_layer, a.y)},
      {DNNL_ARG_DST_ITER, mem(f.d.iter, a.h_last)},
  };
  if (p.cell == RnnCell::lstm) {
    args[DNNL_ARG_SRC_ITER_C] = mem(f.d.iter, a.c0);
    args[DNNL_ARG_DST_ITER_C] = mem(f.d.iter, a.c_last);
  }
  if (a.ws)
    args[DNNL_ARG_WORKSPACE] =
        mem(dnnl::memory::desc({static_cast<std::int64_t>(f.workspace_bytes)}, dt::u8, tag::a), a.ws);
  f.prim.execute(stream(), args);
}

// The workspace's parts: oneDNN's workspace (its size rounded up to 64 bytes), then the final states h (and c),
// float32 each [N, u].
std::size_t workspace_head(const Forward& f) {
  return (f.workspace_bytes + 63) / 64 * 64;
}
std::size_t workspace_size(const Forward& f, std::int64_t N, std::int64_t u) {
  return workspace_head(f) + 2 * static_cast<std::size_t>(N * u) * sizeof(float);
}
float* workspace_states(const Forward& f, void* workspace) {
  return reinterpret_cast<float*>(static_cast<std::uint8_t*>(workspace) + workspace_head(f));
}

struct Scratch {
  std::vector<float> h0, c0, h_last, c_last, bias;
};

}  // namespace

void rnn_sequence_forward(const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,
                          const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                          Tensor& y, Tensor& h_last, Tensor& c_last, Tensor& workspace) {
  const std::int64_t T = x.dim(0), N = x.dim(1), F = x.dim(2), u = recurrent.dim(0);
  if (N == 0) return;
  if (T == 0) {  // no step: the final states are the initial ones
    for (auto [from, to] : {std::pair{&h0, &h_last}, std::pair{&c0, &c_last}})
      if (to->defined())
        from->defined() ? std::copy_n(from->data<float>(), N * u, to->data<float>())
                        : std::fill_n(to->data<float>(), N * u, 0.0f);
    return;
  }
  const bool training = workspace.defined();
  guarded("rnn_sequence_forward", rnn_math::forward_multiply_adds(p.cell, T, N, F, u), [&] {
    thread_local PrimitiveCache<Forward> cache;
    thread_local Scratch s;
    Forward& f = cache.get(key_of(p, reverse, T, N, F, u, training ? 1 : 0),
                           [&] { return make_forward(p, reverse, training, descs(p, T, N, F, u)); });
    const bool lstm = p.cell == RnnCell::lstm;
    ForwardArgs a{x.data<float>(),
                  kernel.data<float>(),
                  recurrent.data<float>(),
                  onednn_bias(p, bias, u, s.bias),
                  h0.defined() ? h0.data<float>() : scratch(s.h0, N * u, true),
                  lstm && c0.defined() ? c0.data<float>() : scratch(s.c0, N * u, true),
                  y.data<float>(),
                  nullptr,
                  nullptr,
                  nullptr};
    if (training) {
      const std::size_t bytes = workspace_size(f, N, u);
      if (workspace.dtype() != DType::uint8 || workspace.nbytes() < bytes)
        workspace = Tensor(Shape{static_cast<std::int64_t>(bytes)}, DType::uint8, x.device());
      a.ws = const_cast<void*>(workspace.raw_data());
      a.h_last = workspace_states(f, a.ws);
      a.c_last = a.h_last + N * u;
    } else {
      a.h_last = h_last.defined() ? h_last.data<float>() : scratch(s.h_last, N * u, false);
      a.c_last = lstm && c_last.defined() ? c_last.data<float>() : scratch(s.c_last, N * u, false);
    }
    run_forward(p, f, a);
    if (training) {
      if (h_last.defined()) std::memcpy(h_last.data<float>(), a.h_last, N * u * sizeof(float));
      if (lstm && c_last.defined()) std::memcpy(c_last.data<float>(), a.c_last, N * u * sizeof(float));
    }
  });
}

namespace {

struct Backward {
  Forward forward;  // the training forward it pairs with (to recompute a missing workspace)
  dnnl::primitive prim;
  Staged weights_layer, weights_iter;  // Keras's weights into the backward's layouts
  // The weights' gradients in the primitive's layouts (their buffers, zeroed before each run), then added into
  // Keras's.
  Staged dkernel, drecurrent;
};
Backward make_backward(const RnnCellParams& p, bool reverse, const Descs& d) {
  Backward b;
  b.forward = make_forward(p, reverse, true, d);
  const dnnl::primitive_desc pd = backward_pd(p, reverse, d);
  b.prim = dnnl::primitive(pd);
  b.weights_layer = stage_in(d.user_weights_layer, pd.query_md(dnnl::query::weights_md, 0));
  b.weights_iter = stage_in(d.user_weights_iter, pd.query_md(dnnl::query::weights_md, 1));
  const auto dwl = pd.query_md(dnnl::query::diff_weights_md, 0),
             dwi = pd.query_md(dnnl::query::diff_weights_md, 1);
  b.dkernel = stage_out(dwl, d.user_weights_layer, true);
  b.drecurrent = stage_out(dwi, d.user_weights_iter, true);
  return b;
}
void zero(const dnnl::memory& m) {
  std::memset(m.get_data_handle(), 0, m.get_desc().get_size());
}

struct BackwardScratch {
  std::vector<float> dy, dh_last, dc_last, dx, dh0, dc0, dbias, y;
  std::vector<std::uint8_t> ws;
};

}  // namespace

void rnn_sequence_backward(const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,
                           const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                           const Tensor& y, const Tensor& workspace, const Tensor& dy, const Tensor& dh_last,
                           const Tensor& dc_last, Tensor& dx, Tensor& dkernel, Tensor& drecurrent,
                           Tensor& dbias, Tensor& dh0, Tensor& dc0) {
  const std::int64_t T = x.dim(0), N = x.dim(1), F = x.dim(2), u = recurrent.dim(0);
  if (T == 0 || N == 0) {  // no step: the final states' gradients reach the initial ones
    for (auto [from, to] : {std::pair{&dh_last, &dh0}, std::pair{&dc_last, &dc0}})
      if (to->defined())
        from->defined() ? std::copy_n(from->data<float>(), to->numel(), to->data<float>())
                        : std::fill_n(to->data<float>(), to->numel(), 0.0f);
    return;
  }
  guarded("rnn_sequence_backward", 2 * rnn_math::forward_multiply_adds(p.cell, T, N, F, u), [&] {
    thread_local PrimitiveCache<Backward> cache;
    thread_local Scratch s;
    thread_local BackwardScratch bs;
    const Descs d = descs(p, T, N, F, u);
    Backward& b = cache.get(key_of(p, reverse, T, N, F, u, 2), [&] { return make_backward(p, reverse, d); });
    const bool lstm = p.cell == RnnCell::lstm;
    const std::int64_t n = N * u;
    const float* bias_values = onednn_bias(p, bias, u, s.bias);
    const float* h0v = h0.defined() ? h0.data<float>() : scratch(s.h0, n, true);
    const float* c0v = lstm && c0.defined() ? c0.data<float>() : scratch(s.c0, n, true);
    // The forward's workspace and final states; recomputed when the caller has none from a training forward.
    const std::size_t bytes = workspace_size(b.forward, N, u);
    void* ws = nullptr;
    const float* yv = y.data<float>();
    float* states = nullptr;
    if (workspace.defined() && workspace.dtype() == DType::uint8 && workspace.nbytes() >= bytes) {
      ws = const_cast<void*>(workspace.raw_data());
      states = workspace_states(b.forward, ws);
    } else {
      if (bs.ws.size() < bytes) bs.ws.resize(bytes);
      ws = bs.ws.data();
      states = workspace_states(b.forward, ws);
      float* yr = scratch(bs.y, T * n, false);
      run_forward(p, b.forward,
                  {x.data<float>(), kernel.data<float>(), recurrent.data<float>(), bias_values, h0v, c0v, yr,
                   states, states + n, ws});
      yv = yr;
    }
    zero(b.dkernel.buffer);
    zero(b.drecurrent.buffer);
    float* diff_bias = scratch(bs.dbias, bias_gates(p) * u, true);
    const dnnl::memory::desc ws_md({static_cast<std::int64_t>(b.forward.workspace_bytes)}, dt::u8, tag::a);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC_LAYER, mem(d.src_layer, x.raw_data())},
        {DNNL_ARG_SRC_ITER, mem(d.iter, h0v)},
        {DNNL_ARG_WEIGHTS_LAYER, input(b.weights_layer, mem(d.user_weights_layer, kernel.raw_data()))},
        {DNNL_ARG_WEIGHTS_ITER, input(b.weights_iter, mem(d.user_weights_iter, recurrent.raw_data()))},
        {DNNL_ARG_BIAS, mem(d.bias, bias_values)},
        {DNNL_ARG_DST_LAYER, mem(d.dst_layer, yv)},
        {DNNL_ARG_DST_ITER, mem(d.iter, states)},
        {DNNL_ARG_WORKSPACE, mem(ws_md, ws)},
        {DNNL_ARG_DIFF_SRC_LAYER,
         mem(d.src_layer, dx.defined() ? dx.data<float>() : scratch(bs.dx, T * N * F, false))},
        {DNNL_ARG_DIFF_SRC_ITER, mem(d.iter, dh0.defined() ? dh0.data<float>() : scratch(bs.dh0, n, false))},
        {DNNL_ARG_DIFF_WEIGHTS_LAYER, b.dkernel.buffer},
        {DNNL_ARG_DIFF_WEIGHTS_ITER, b.drecurrent.buffer},
        {DNNL_ARG_DIFF_BIAS, mem(d.bias, diff_bias)},
        {DNNL_ARG_DIFF_DST_LAYER,
         mem(d.dst_layer, dy.defined() ? dy.data<float>() : scratch(bs.dy, T * n, true))},
        {DNNL_ARG_DIFF_DST_ITER,
         mem(d.iter, dh_last.defined() ? dh_last.data<float>() : scratch(bs.dh_last, n, true))},
    };
    if (lstm) {
      args[DNNL_ARG_SRC_ITER_C] = mem(d.iter, c0v);
      args[DNNL_ARG_DST_ITER_C] = mem(d.iter, states + n);
      args[DNNL_ARG_DIFF_SRC_ITER_C] =
          mem(d.iter, dc0.defined() ? dc0.data<float>() : scratch(bs.dc0, n, false));
      args[DNNL_ARG_DIFF_DST_ITER_C] =
          mem(d.iter, dc_last.defined() ? dc_last.data<float>() : scratch(bs.dc_last, n, true));
    }
    b.prim.execute(stream(), args);
    if (dkernel.defined()) finish(b.dkernel, mem(d.user_weights_layer, dkernel.raw_data()));
    if (drecurrent.defined()) finish(b.drecurrent, mem(d.user_weights_iter, drecurrent.raw_data()));
    if (dbias.defined()) {
      float* db = dbias.data<float>();
      if (lbr(p)) {  // Keras's [2, 3u] from oneDNN's four gates
        const std::int64_t G = 3 * u;
        for (std::int64_t j = 0; j < u; ++j) {
          db[j] += diff_bias[j];
          db[G + j] += diff_bias[j];
          db[u + j] += diff_bias[u + j];
          db[G + u + j] += diff_bias[u + j];
          db[2 * u + j] += diff_bias[2 * u + j];
          db[G + 2 * u + j] += diff_bias[3 * u + j];
        }
      } else {
        for (std::int64_t j = 0; j < dbias.numel(); ++j) db[j] += diff_bias[j];
      }
    }
  });
}

}  // namespace systolic::ops::onednn
