// MultiHeadAttention (Keras 3): query, value and key projected by EinsumDense layers (here: dense products of the
// inputs' last axis, their kernels viewed as (C, heads * dim)), scaled dot-product attention of every head
// (ops::attention_forward, on the projections' own [N, T, heads, dim] layout, so nothing is transposed), then the
// output projection of (heads * value_dim) to the output shape. Keras's weights keep the EinsumDense shapes:
// query kernel (Cq, heads, key_dim), bias (heads, key_dim); key's and value's alike; the output's kernel (heads,
// value_dim, output_shape...) and bias (output_shape...), made as the dense matrices they are so that the Glorot
// fans are EinsumDense's (Keras 3.15: fan_in the input axes, fan_out the output axes), then viewed in those shapes.
//
// attention_axes: the middle axes not attended over join the batch of the product (a view when they come first);
// when an attended axis comes before one of them, the projections are transposed into that order around the op
// (AxesPlan), the scores already in Keras's layout (those axes, heads, the attended ones).
//
// use_gate (Keras 3.15): a sigmoid gate, the query projected like the value (weights between the key's and the
// value's, under _gate_dense in Keras 3's files), multiplies the attention's output before the output projection.
//
// Inputs: query, value, then key (when the call gave one; else the value is the key) and the attention mask
// (options().attention_mask_input). Keras's call arguments use_causal_mask and the attention mask are per layer
// here (a config's call sets them; a second call must agree). Masks: the query's Keras mask and the value's (and
// key's, ANDed) hide query rows and keys as Keras's attention mask does; the output carries the query's. A query
// row left no key is Keras's on each of its paths: without dropout (its fused dot_product_attention) the average of
// every value, with dropout (its masked Softmax) zeros. The attention mask gets no gradient (Keras casts it to bool).
// return_attention_scores (a call argument, per layer likewise) makes the probabilities [N, heads, T, S] (before
// dropout, as Keras returns them) a second output; Keras then runs its masked Softmax (a row with no key: zeros),
// and their gradient joins the op's backward (ops::attention_backward's dprobs).
//
// GroupedQueryAttention (Keras 3's keras.layers.GroupQueryAttention) is the same layer with fewer key/value heads
// than query heads (head_dim for both key_dim and value_dim, the output the query's features): query head h reads
// key/value head h / (num_query_heads / num_key_value_heads), as Keras's repeat of the key and value heads does, and
// ops::attention_forward takes the grouped layout as it is (nothing is repeated). Its weights: query kernel (Cq,
// query heads, head_dim), key's and value's (C, key/value heads, head_dim), the output's (query heads, head_dim, Cq),
// under _query_dense/_key_dense/_value_dense/_output_dense in Keras 3's files; inputs of rank 3 only.
#include <systolic/layers.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/philox.h"
#include "layers/config.h"
#include "layers/permutation.h"

namespace systolic::layers {

namespace {

// Keras's class names of the two layers this file makes (GroupedQueryAttention is exported under the shorter one,
// which its configs carry).
constexpr const char* kMultiHead = "MultiHeadAttention";
constexpr const char* kGrouped = "GroupQueryAttention";

class MultiHeadAttentionLayer final : public Layer {
 public:
  // kv_heads 0: MultiHeadAttention (as many key/value heads as query heads); else GroupedQueryAttention's count.
  MultiHeadAttentionLayer(int heads, int key_dim, const MultiHeadAttentionOptions& o, int kv_heads = 0)
      : Layer(kv_heads ? kGrouped : kMultiHead,
              o.name.empty() && kv_heads ? unique_layer_name("grouped_query_attention") : o.name),
        heads_(heads),
        kv_heads_(kv_heads ? kv_heads : heads),
        grouped_(kv_heads > 0),
        key_dim_(key_dim),
        value_dim_(o.value_dim.value_or(key_dim)),
        o_(o),
        seed_(o.seed ? *o.seed : global_generator().split()) {
    if (grouped_) {
      SYSTOLIC_CHECK(heads > 0 && kv_heads > 0,
                     "layer '{}': num_query_heads and num_key_value_heads must be positive, got {} and {}",
                     name(), heads, kv_heads);
      SYSTOLIC_CHECK(heads % kv_heads == 0,
                     "layer '{}': num_query_heads ({}) must be divisible by num_key_value_heads ({})", name(),
                     heads, kv_heads);
      SYSTOLIC_CHECK(key_dim > 0, "layer '{}': head_dim must be positive, got {}", name(), key_dim);
    }
    SYSTOLIC_CHECK(heads > 0, "layer '{}': num_heads must be positive, got {}", name(), heads);
    SYSTOLIC_CHECK(key_dim > 0, "layer '{}': key_dim must be positive, got {}", name(), key_dim);
    SYSTOLIC_CHECK(value_dim_ > 0, "layer '{}': value_dim must be positive, got {}", name(), value_dim_);
    SYSTOLIC_CHECK(o.dropout >= 0 && o.dropout < 1, "layer '{}': dropout must be in [0, 1), got {}", name(),
                   o.dropout);
    SYSTOLIC_CHECK(o.sliding_window >= 0, "layer '{}': sliding_window must be positive, got {}", name(),
                   o.sliding_window);
    if (o.output_shape)
      for (std::int64_t d : *o.output_shape)
        SYSTOLIC_CHECK(d > 0, "layer '{}': output_shape must be positive dimensions", name());
    set_activity_regularizer(o.activity_regularizer);
  }

  // The output carries the query's mask, as Keras sets it.
  bool output_masked(bool input_masked) const override { return input_masked; }
  std::string keras3_key() const override {
    return grouped_ ? "grouped_query_attention" : Layer::keras3_key();
  }
  std::vector<std::string> keras_tensor_keywords() const override { return {"key", "attention_mask"}; }

  void read_keras_call(std::size_t positional, const std::vector<std::string>& tensor_keywords,
                       const nlohmann::ordered_json& options) override {
    bool key_keyword = false, mask = false;
    for (const std::string& k : tensor_keywords) (k == "key" ? key_keyword : mask) = true;
    const AttentionCall call = attention_call(*this, options);
    if (positional < 2 || positional > 3 || (positional == 3 && key_keyword))
      fail(
          "layer '{}' ({}): a call takes query and value (and then key) by position, got {} tensors by "
          "position{}",
          name(), class_name(), positional, key_keyword ? " and a key by keyword" : "");
    set_call(mask, call);
  }

  bool keras_call_form(const std::vector<nlohmann::ordered_json>& tensors, nlohmann::ordered_json& args,
                       nlohmann::ordered_json& kwargs) const override {
    const std::size_t given = tensors.size() - (o_.attention_mask_input ? 1 : 0);
    args = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < given; ++i) args.push_back(tensors[i]);
    if (o_.attention_mask_input) kwargs["attention_mask"] = tensors.back();
    write_attention_call({.causal = o_.use_causal_mask, .scores = o_.return_attention_scores}, kwargs);
    return true;
  }

  // The call's form (a config's call, or the API's options): an attention mask input, a causal mask, the scores as
  // a second output. Set before the first call; a later call must agree.
  void set_call(bool attention_mask, const AttentionCall& call) {
    if (called_ && (attention_mask != o_.attention_mask_input || call.causal != o_.use_causal_mask ||
                    call.scores != o_.return_attention_scores))
      fail(
          "layer '{}' ({}): every call must pass the same attention mask, use_causal_mask and "
          "return_attention_scores arguments",
          name(), class_name());
    o_.attention_mask_input = attention_mask;
    o_.use_causal_mask = call.causal;
    o_.return_attention_scores = call.scores;
    called_ = true;
  }

  // With return_attention_scores: the probabilities (the axes not attended over..., heads, the query's attended
  // axes..., the value's...), as Keras lays them out and the op writes them ([N * the axes not attended over,
  // heads, T, S] with T and S the products of the attended axes).
  std::vector<Shape> more_output_shapes(const std::vector<Shape>& in) const override {
    if (!o_.return_attention_scores) return {};
    const AxesPlan plan = plan_axes(in[0].rank());
    std::vector<std::int64_t> dims;
    for (int a : plan.lead) dims.push_back(in[0][a - 1]);
    dims.push_back(heads_);
    for (const Shape* s : {&in[0], &in[1]})
      for (int a : plan.attended) dims.push_back((*s)[a - 1]);
    return {Shape(dims)};
  }

  // Keras's attention_axes over a query of rank `query_rank` (without the batch's axis), in Keras's numbering (the
  // batch's axis 0): the middle axes attended over and the others (`lead`, batch axes of the product), each in
  // order. The op attends over the last middle axes: when an attended axis comes before a lead one, the projections
  // are transposed (`perm`: the batch's axis, the lead axes, the attended ones, the last) around it. Throws naming
  // attention_axes when they are not distinct middle axes.
  struct AxesPlan {
    std::vector<int> lead, attended, perm;
    bool moved = false;
  };
  AxesPlan plan_axes(int query_rank) const {
    AxesPlan p;
    std::vector<int> given;
    if (o_.attention_axes)
      for (int a : *o_.attention_axes) given.push_back(a < 0 ? a + query_rank + 1 : a);
    else
      for (int a = 1; a < query_rank; ++a) given.push_back(a);
    std::sort(given.begin(), given.end());
    const bool distinct = std::adjacent_find(given.begin(), given.end()) == given.end();
    if (given.empty() || !distinct || given.front() < 1 || given.back() > query_rank - 1)
      fail_shape("attention_axes " + axes_str(o_.attention_axes.value_or(std::vector<int>{})) +
                 ": expected distinct axes between the batch's and the features' (1 to " +
                 std::to_string(query_rank - 1) + ", or negative), for a query of rank " +
                 std::to_string(query_rank + 1));
    p.attended = given;
    for (int a = 1; a < query_rank; ++a)
      if (!std::binary_search(given.begin(), given.end(), a)) p.lead.push_back(a);
    p.perm.push_back(0);
    for (int a : p.lead) p.perm.push_back(a);
    for (int a : p.attended) p.perm.push_back(a);
    p.perm.push_back(query_rank);
    p.moved = !p.lead.empty() && p.lead.back() > p.attended.front();
    return p;
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    const std::size_t n = in.size(), base = o_.attention_mask_input ? 3 : 2;
    if (n != base && n != base + 1)
      fail_shape(fmt::format("takes query, value{}{} as inputs, got {}", ", an optional key",
                             o_.attention_mask_input ? " and the attention mask" : "", n));
    const Shape &q = in[0], &v = in[1];
    if (q.rank() < 2) fail_shape("query " + q.keras_str() + ": expected (steps..., features)");
    if (v.rank() != q.rank())
      fail_shape("value " + v.keras_str() + " and query " + q.keras_str() + " must have the same rank");
    if (has_key(n)) {
      const Shape& k = in[2];
      bool same = k.rank() == v.rank();
      for (int i = 0; same && i + 1 < v.rank(); ++i) same = k[i] == v[i];
      if (!same)
        fail_shape("key " + k.keras_str() + " and value " + v.keras_str() +
                   ": all dimensions but the last must be equal");
    }
    if (grouped_ && q.rank() != 2)
      fail_shape("query " + q.keras_str() + ": GroupedQueryAttention takes (steps, features) inputs");
    if (grouped_ && v[-1] != q[-1])
      fail_shape("the last dimension of query " + q.keras_str() + " and value " + v.keras_str() +
                 " must be equal");
    if ((o_.use_causal_mask || o_.sliding_window > 0 || o_.attention_mask_input) && q.rank() != 2)
      fail_shape("a causal, sliding-window or attention mask needs (steps, features) inputs, got query " +
                 q.keras_str());
    if (o_.attention_mask_input) {
      const Shape& m = in.back();
      if (m.rank() != 2 || m[0] != q[0] || m[1] != v[0])
        fail_shape("attention_mask " + m.keras_str() + ": expected (None, " + std::to_string(q[0]) + ", " +
                   std::to_string(v[0]) + ")");
    }
    for (int a : plan_axes(q.rank()).lead)
      if (v[a - 1] != q[a - 1] || (has_key(n) && in[2][a - 1] != q[a - 1]))
        fail_shape("query " + q.keras_str() + " and value " + v.keras_str() +
                   ": the axes not in attention_axes must be equal");
    std::vector<std::int64_t> dims;
    for (int i = 0; i + 1 < q.rank(); ++i) dims.push_back(q[i]);
    for (std::int64_t d : output_dims(q)) dims.push_back(d);
    return Shape(dims);
  }

  std::vector<VariableGroup> keras3_variable_groups() const override {
    const std::size_t per = o_.use_bias ? 2 : 1;
    const std::string p =
        grouped_ ? "_" : "";  // GroupedQueryAttention's sublayers keep their attributes' names
    std::vector<VariableGroup> groups{
        {"vars", 0}, {p + "query_dense/vars", per}, {p + "key_dense/vars", per}};
    if (o_.use_gate) groups.push_back({"_gate_dense/vars", per});  // both layers keep this attribute's name
    groups.push_back({p + "value_dense/vars", per});
    groups.push_back({p + "output_dense/vars", per});
    return groups;
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    if (grouped_) {
      c["head_dim"] = key_dim_;
      c["num_query_heads"] = heads_;
      c["num_key_value_heads"] = kv_heads_;
      c["use_bias"] = o_.use_bias;
      c["use_gate"] = o_.use_gate;
      c["sliding_window"] = o_.sliding_window > 0 ? json(o_.sliding_window) : json(nullptr);
      c["dropout"] = o_.dropout;
      sublayer_config(c);
      return;
    }
    c["num_heads"] = heads_;
    c["key_dim"] = key_dim_;
    c["value_dim"] = value_dim_;
    c["dropout"] = o_.dropout;
    c["use_bias"] = o_.use_bias;
    c["use_gate"] = o_.use_gate;
    c["output_shape"] = o_.output_shape ? json(*o_.output_shape) : json(nullptr);
    if (built() && !o_.attention_axes) {  // Keras's build writes the axes it attends over
      std::vector<int> axes;
      for (int a = 1; a < query_rank_; ++a) axes.push_back(a);
      c["attention_axes"] = axes;
    } else {
      c["attention_axes"] = o_.attention_axes ? json(*o_.attention_axes) : json(nullptr);
    }
    c["sliding_window"] = o_.sliding_window > 0 ? json(o_.sliding_window) : json(nullptr);
    sublayer_config(c);
  }

  // The projections' settings and the seed, last in both layers' configs.
  void sublayer_config(json& c) const {
    write_weight_settings(c, o_, activity_regularizer());
    c["seed"] = o_.seed ? json(*o_.seed) : json(nullptr);
  }

 protected:
  int input_count() const override { return o_.attention_mask_input ? 3 : 2; }
  int max_input_count() const override { return input_count() + 1; }

  void build(const std::vector<Shape>& in) override {
    called_ = true;
    query_rank_ = in[0].rank();
    axes_ = plan_axes(query_rank_);
    const std::int64_t cq = in[0][-1], cv = in[1][-1], ck = has_key(in.size()) ? in[2][-1] : cv;
    const std::int64_t H = heads_, G = kv_heads_, D = key_dim_, E = value_dim_, P = out_size(in[0]);
    const WeightOptions kernel{o_.kernel_regularizer, o_.kernel_constraint},
        bias{o_.bias_regularizer, o_.bias_constraint};
    // One projection: the kernel made as the (inputs, outputs) matrix it is (EinsumDense's fans), then viewed in
    // Keras's shape; the bias likewise.
    auto projection = [&](const std::string& prefix, std::int64_t inputs, std::int64_t outputs,
                          const Shape& kernel_shape, const Shape& bias_shape) {
      Weight& k = add_weight(prefix + "/kernel", {inputs, outputs}, o_.kernel_initializer, true, kernel);
      k.value = k.value.reshape(kernel_shape);
      if (k.grad.defined()) k.grad = k.grad.reshape(kernel_shape);
      if (!o_.use_bias) return;
      Weight& b = add_weight(prefix + "/bias", {outputs}, o_.bias_initializer, true, bias);
      b.value = b.value.reshape(bias_shape);
      if (b.grad.defined()) b.grad = b.grad.reshape(bias_shape);
    };
    projection("query", cq, H * D, {cq, H, D}, {H, D});
    projection("key", ck, G * D, {ck, G, D}, {G, D});
    if (o_.use_gate) projection("gate", cq, H * E, {cq, H, E}, {H, E});
    projection("value", cv, G * E, {cv, G, E}, {G, E});
    std::vector<std::int64_t> okernel{H, E}, obias;
    for (std::int64_t d : output_dims(in[0])) {
      okernel.push_back(d);
      obias.push_back(d);
    }
    projection("attention_output", H * E, P, Shape(okernel), Shape(obias));
  }

  void forward(LayerCall& c) override {
    Buffers b = buffers(c);
    const std::int64_t HD = heads_ * key_dim_, GD = kv_heads_ * key_dim_, GE = kv_heads_ * value_dim_;
    project(kQuery, query(c), b.cq, HD, b.q);
    project(kKey, key(c), b.ck, GD, b.k);
    project(kValue, value(c), b.cv, GE, b.v);
    Tensor qmask, kmask, amask;
    masks(c, b, qmask, kmask, amask);
    if (axes_.moved) {  // the op attends over the last middle axes: the lead axes moved first, and back after
      to_moved(query(c), b.q, b.mq);
      to_moved(key(c), b.k, b.mk);
      to_moved(value(c), b.v, b.mv);
      ops::attention_forward(params(c), b.mq, b.mk, b.mv, Tensor(), qmask, kmask, amask, step_of(c), b.mo,
                             b.probs);
      from_moved(query(c), b.mo, b.o);
    } else {
      ops::attention_forward(params(c), b.q, b.k, b.v, Tensor(), qmask, kmask, amask, step_of(c), b.o,
                             b.probs);
    }
    const std::int64_t HE = heads_ * value_dim_;
    if (o_.use_gate) {  // Keras's gate: sigmoid(the query's projection) times the attention's output
      project(kGate, query(c), b.cq, HE, b.gate);
      ops::activation_forward(systolic::Activation::sigmoid, b.gate, b.gate);
      ops::broadcast_forward(ops::BinaryKind::multiply, b.o, b.gate, b.gated);
    }
    project(kOutput, o_.use_gate ? b.gated : b.o, HE, b.P, c.output);
    if (Tensor scores = scores_output(c); scores.defined()) {
      Tensor view = scores.reshape(b.probs.shape());
      ops::copy(b.probs, view);
    }
  }

  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(c.saved.size() == kSaved, "layer '{}': backward without a forward", name());
    Buffers b = buffers(c);
    const std::int64_t HE = heads_ * value_dim_;
    project_back(kOutput, o_.use_gate ? b.gated : b.o, HE, b.P, c.doutput, b.dO);
    Tensor dattended = b.dO.reshape(b.o.shape());
    if (o_.use_gate) {  // gated = o * gate: do = dgated * gate; dgate = dgated * o, back through the sigmoid
      ops::broadcast_backward(ops::BinaryKind::multiply, b.o, b.gate, dattended, b.d_o, b.dgate);
      ops::activation_backward(systolic::Activation::sigmoid, Tensor(), b.gate, b.dgate, b.dgate);
      dattended = b.d_o;
    }
    Tensor qmask, kmask, amask;
    masks(c, b, qmask, kmask, amask);
    Tensor dscores = scores_gradient(c);
    if (dscores.defined()) dscores = dscores.reshape(b.probs.shape());
    Tensor no_score_weights;
    if (axes_.moved) {
      to_moved(query(c), dattended, b.mdo);
      ops::attention_backward(params(c), b.mq, b.mk, b.mv, Tensor(), qmask, kmask, amask, step_of(c), b.probs,
                              b.mdo, dscores, b.mdq, b.mdk, b.mdv, no_score_weights);
      from_moved(query(c), b.mdq, b.dq);
      from_moved(key(c), b.mdk, b.dk);
      from_moved(value(c), b.mdv, b.dv);
    } else {
      ops::attention_backward(params(c), b.q, b.k, b.v, Tensor(), qmask, kmask, amask, step_of(c), b.probs,
                              dattended, dscores, b.dq, b.dk, b.dv, no_score_weights);
    }
    // The projections' gradients: each input's (=), the key's added to the value's when the value is the key, the
    // gate's added to the query's.
    const std::int64_t HD = heads_ * key_dim_, GD = kv_heads_ * key_dim_, GE = kv_heads_ * value_dim_;
    Tensor dquery = dinput(c, 0, b.cq);
    project_back(kQuery, query(c), b.cq, HD, b.dq, dquery);
    if (o_.use_gate) {
      Tensor dgate_input = dquery.defined() ? b.dquery_gate.reshape(dquery.shape()) : Tensor();
      project_back(kGate, query(c), b.cq, HE, b.dgate, dgate_input);
      if (dquery.defined()) ops::accumulate(dgate_input, dquery);
    }
    Tensor dvalue = dinput(c, 1, b.cv);
    project_back(kValue, value(c), b.cv, GE, b.dv, dvalue);
    if (has_key(c.inputs.size())) {
      project_back(kKey, key(c), b.ck, GD, b.dk, dinput(c, 2, b.ck));
    } else {
      Tensor dkey = dvalue.defined() ? b.dkey_input.reshape(dvalue.shape()) : Tensor();
      project_back(kKey, value(c), b.cv, GD, b.dk, dkey);
      if (dvalue.defined()) ops::accumulate(dkey, dvalue);
    }
    if (o_.attention_mask_input && c.dinputs.back().defined()) ops::fill(c.dinputs.back(), 0.0);
  }

 private:
  static constexpr std::size_t kSaved = 24;
  // The projections; their weights lie in Keras's order: query, key, the gate (use_gate), value, output.
  enum Projection : int { kQuery, kKey, kValue, kOutput, kGate };
  std::size_t position(int w) const {
    const int p = w == kGate ? 2 : (o_.use_gate && w >= kValue ? w + 1 : w);
    return static_cast<std::size_t>(p);
  }
  // Weights per projection (kernel, and bias with use_bias).
  std::size_t per() const { return o_.use_bias ? 2 : 1; }
  Tensor bias_of(int w) const {
    return o_.use_bias ? flat(weights()[position(w) * per() + 1].value) : Tensor();
  }
  // Weight i's gradient viewed in shape s; undefined when it has none (frozen).
  Tensor grad_of(std::size_t i, const Shape& s) {
    const Weight& w = weights()[i];
    return w.grad.defined() ? w.grad.reshape(s) : Tensor();
  }
  // Projection w: out (its rows of `outputs` values) = x (rows of `inputs`) @ kernel + bias.
  void project(int w, const Tensor& x, std::int64_t inputs, std::int64_t outputs, const Tensor& out) const {
    Tensor y = out.reshape({out.numel() / outputs, outputs});
    ops::dense_forward(x.reshape({x.numel() / inputs, inputs}),
                       weights()[position(w) * per()].operand().reshape({inputs, outputs}), bias_of(w), y);
  }
  // Its backward: dx (=) when defined, the kernel's and bias's gradients (+=).
  void project_back(int w, const Tensor& x, std::int64_t inputs, std::int64_t outputs, const Tensor& dout,
                    Tensor dx) {
    const std::size_t i = position(w) * per();
    const std::int64_t rows = x.numel() / inputs;
    Tensor dw = grad_of(i, {inputs, outputs}), db = o_.use_bias ? grad_of(i + 1, {outputs}) : Tensor();
    ops::dense_backward(x.reshape({rows, inputs}), weights()[i].operand().reshape({inputs, outputs}),
                        dout.reshape({rows, outputs}), dx, dw, db);
  }
  static Tensor dinput(const LayerCall& c, std::size_t i, std::int64_t inputs) {
    if (i >= c.dinputs.size() || !c.dinputs[i].defined()) return Tensor();
    return c.dinputs[i].reshape({c.dinputs[i].numel() / inputs, inputs});
  }
  static std::string axes_str(const std::vector<int>& a) {
    std::string s = "[";
    for (std::size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + std::to_string(a[i]);
    return s + "]";
  }
  static Tensor flat(const Tensor& t) { return t.reshape({t.numel()}); }

  // x, a projection of `input` (its middle axes, then the projection's values), into the moved layout (the batch's
  // axis, the lead axes, the attended ones, the values) and back.
  void to_moved(const Tensor& input, const Tensor& x, const Tensor& moved) const {
    const Shape dims = projection_dims(input, x);
    std::vector<std::int64_t> to;
    for (int a : axes_.perm) to.push_back(dims[a]);
    Tensor out = moved.reshape(Shape(to));
    ops::transpose(x.reshape(dims), out, axes_.perm);
  }
  void from_moved(const Tensor& input, const Tensor& moved, const Tensor& x) const {
    const Shape dims = projection_dims(input, x);
    std::vector<std::int64_t> from;
    for (int a : axes_.perm) from.push_back(dims[a]);
    Tensor out = x.reshape(dims);
    ops::transpose(moved.reshape(Shape(from)), out, inverse_permutation(axes_.perm));
  }
  static Shape projection_dims(const Tensor& input, const Tensor& x) {
    std::vector<std::int64_t> dims;
    std::int64_t rows = 1;
    for (int i = 0; i + 1 < input.rank(); ++i) {
      dims.push_back(input.dim(i));
      rows *= input.dim(i);
    }
    dims.push_back(x.numel() / std::max<std::int64_t>(1, rows));
    return Shape(dims);
  }

  bool has_key(std::size_t inputs) const { return inputs == (o_.attention_mask_input ? 4u : 3u); }
  std::vector<std::int64_t> output_dims(const Shape& query) const {
    return o_.output_shape ? *o_.output_shape : std::vector<std::int64_t>{query[-1]};
  }
  std::int64_t out_size(const Shape& query) const {
    std::int64_t p = 1;
    for (std::int64_t d : output_dims(query)) p *= d;
    return p;
  }

  // The scores output (return_attention_scores) and its gradient; undefined when not wanted or none reached it.
  static Tensor scores_output(const LayerCall& c) {
    return c.more_outputs.empty() ? Tensor() : c.more_outputs[0];
  }
  static Tensor scores_gradient(const LayerCall& c) {
    return c.more_doutputs.empty() ? Tensor() : c.more_doutputs[0];
  }

  const Tensor& query(const LayerCall& c) const { return c.inputs[0]; }
  const Tensor& value(const LayerCall& c) const { return c.inputs[1]; }
  const Tensor& key(const LayerCall& c) const { return has_key(c.inputs.size()) ? c.inputs[2] : c.inputs[1]; }

  // The call's tensors: the projections q, k, v and the attention's output o [N, T|S, heads, dim], its
  // probabilities, backward's gradients of them (and of the value input through the key projection, when the
  // value is the key) and the keys' mask when the value's and the key's combine, kept in c.saved for the batch
  // size of the call.
  struct Buffers {
    std::int64_t N, T, S, cq, cv, ck, P;
    Tensor q, k, v, o, probs, dq, dk, dv, dO, dkey_input, key_mask;
    Tensor gate, gated, d_o, dgate, dquery_gate;  // use_gate's (empty without it)
    // With attention axes moved (AxesPlan::moved): the op's q, k, v, output and their gradients, in the moved layout
    // (the lead axes first; empty otherwise).
    Tensor mq, mk, mv, mo, mdq, mdk, mdv, mdo;
  };
  Buffers buffers(LayerCall& c) {
    const Tensor& x = query(c);
    // The axes not attended over join the batch's: N counts every (batch, those axes) row.
    std::int64_t N = x.dim(0);
    for (int a : axes_.lead) N *= x.dim(a);
    const std::int64_t cq = x.dim(-1), cv = value(c).dim(-1), ck = key(c).dim(-1);
    const std::int64_t T = x.numel() / std::max<std::int64_t>(1, N * cq);
    const std::int64_t S = value(c).numel() / std::max<std::int64_t>(1, N * cv);
    const std::int64_t H = heads_, G = kv_heads_, D = key_dim_, E = value_dim_,
                       P = c.output.numel() / std::max<std::int64_t>(1, N * T);
    const Shape gated = o_.use_gate ? Shape({N, T, H, E}) : Shape({0});
    const bool m = axes_.moved;
    const Shape mq = m ? Shape({N, T, H, D}) : Shape({0}), mk = m ? Shape({N, S, G, D}) : Shape({0}),
                mv = m ? Shape({N, S, G, E}) : Shape({0}), mo = m ? Shape({N, T, H, E}) : Shape({0});
    const Shape shapes[kSaved] = {{N, T, H, D},
                                  {N, S, G, D},
                                  {N, S, G, E},
                                  {N, T, H, E},
                                  {N, H, T, S},
                                  {N, T, H, D},
                                  {N, S, G, D},
                                  {N, S, G, E},
                                  {N * T, H * E},
                                  {N * S * cv},
                                  {N, S},
                                  gated,
                                  gated,
                                  gated,
                                  gated,
                                  o_.use_gate ? Shape({N * T * cq}) : Shape({0}),
                                  mq,
                                  mk,
                                  mv,
                                  mo,
                                  mq,
                                  mk,
                                  mv,
                                  mo};
    const DType t = x.dtype();
    bool fresh = c.saved.size() != kSaved;
    for (std::size_t i = 0; !fresh && i < kSaved; ++i)
      fresh = c.saved[i].shape() != shapes[i] || c.saved[i].dtype() != t;
    if (fresh) {
      c.saved.clear();
      for (const Shape& s : shapes) c.saved.emplace_back(s, t, x.device());
    }
    auto& s = c.saved;
    return {N,     T,     S,     cq,    cv,    ck,    P,     s[0],  s[1],  s[2],  s[3],
            s[4],  s[5],  s[6],  s[7],  s[8],  s[9],  s[10], s[11], s[12], s[13], s[14],
            s[15], s[16], s[17], s[18], s[19], s[20], s[21], s[22], s[23]};
  }

  // The Keras masks as the op takes them: the query's [N, T], the key's [N, S] (the value's, or the key's when the
  // call gave a key of its own), and the attention mask input [N, T, S].
  void masks(const LayerCall& c, const Buffers& b, Tensor& query_mask, Tensor& key_mask,
             Tensor& attention_mask) const {
    // The key's mask's buffer holds the data's dtype; Keras's masks come in it too.
    if (axes_.moved) {
      bool any = c.mask.defined();
      for (const Tensor& m : c.masks) any = any || m.defined();
      if (any)
        fail(
            "layer '{}' ({}): Keras masks with attention_axes {} are not supported (the attended axes come "
            "before others)",
            name(), class_name(), axes_str(o_.attention_axes.value_or(std::vector<int>{})));
    }
    if (c.mask.defined()) query_mask = c.mask.reshape({b.N, b.T});
    if (c.masks.size() > 1) {
      const Tensor& vm = c.masks[1];
      const Tensor km = has_key(c.inputs.size()) ? c.masks[2] : Tensor();
      if (vm.defined() && km.defined()) {  // Keras ANDs them: a product of 0/1 masks
        Tensor both = b.key_mask.reshape(vm.shape());
        ops::broadcast_forward(ops::BinaryKind::multiply, vm, km, both);
        key_mask = b.key_mask;
      } else if (vm.defined() || km.defined()) {
        key_mask = (vm.defined() ? vm : km).reshape({b.N, b.S});
      }
    }
    if (o_.attention_mask_input) attention_mask = c.inputs.back();
  }

  ops::AttentionParams params(const LayerCall& c) const {
    // Keras runs its fused dot_product_attention (a query row with no key kept averages every key) unless the
    // layer has dropout, returns the scores or its inputs are of rank > 3; else its masked Softmax (such a row is
    // zeros).
    ops::AttentionParams p{
        .scale = 1.0 / std::sqrt(static_cast<double>(key_dim_)),
        .causal = o_.use_causal_mask,
        .window = o_.sliding_window,
        .empty_rows_uniform = o_.dropout == 0 && query_rank_ == 2 && !o_.return_attention_scores};
    if (c.training && o_.dropout > 0) {
      p.dropout = o_.dropout;
      p.seed = philox::replica_seed(seed_, c.training->replica);
    }
    return p;
  }
  static Tensor step_of(const LayerCall& c) { return c.training ? c.training->counter : Tensor(); }

  int heads_, kv_heads_;
  bool grouped_;
  int key_dim_, value_dim_;
  MultiHeadAttentionOptions o_;
  std::uint64_t seed_;
  bool called_ = false;
  int query_rank_ = 0;  // without the batch axis
  AxesPlan axes_;       // from build: plan_axes
};

// The options both layers' configs carry alike: use_gate, sliding_window, the projections' settings, the
// seed and the name (flash_attention is how a backend computes it: the same result).
void read_shared_options(ConfigReader& r, MultiHeadAttentionOptions& o) {
  o.use_gate = r.get_bool("use_gate", false);
  if (auto w = r.get_optional_int("sliding_window")) {
    if (*w <= 0) r.fail_option("sliding_window", "must be a positive integer or null");
    o.sliding_window = static_cast<int>(*w);
  }
  r.ignore("flash_attention");
  read_weight_settings(r, o);
  if (auto s = r.get_optional_int("seed")) o.seed = static_cast<std::uint64_t>(*s);
  o.name = r.name();
}

}  // namespace

AttentionCall attention_call(const Layer& layer, const json& options) {
  AttentionCall call;
  for (auto& [k, v] : options.items()) {
    if (k == "use_causal_mask" && v.is_boolean())
      call.causal = v.get<bool>();
    else if (k == "return_attention_scores" && v.is_boolean())
      call.scores = v.get<bool>();
    else
      fail("layer '{}' ({}): call argument '{}'={} is not supported", layer.name(), layer.class_name(), k,
           v.dump());
  }
  return call;
}

void write_attention_call(const AttentionCall& call, json& kwargs) {
  if (call.scores) kwargs["return_attention_scores"] = true;
  if (call.causal) kwargs["use_causal_mask"] = true;
}

std::shared_ptr<Layer> multi_head_attention_from_config(ConfigReader& r) {
  for (const char* k : {"num_heads", "key_dim"})
    if (!r.has(k)) r.fail_option(k, "missing");
  const int heads = r.get_int("num_heads", 0), key_dim = r.get_int("key_dim", 0);
  MultiHeadAttentionOptions o;
  if (auto v = r.get_optional_int("value_dim")) o.value_dim = static_cast<int>(*v);
  o.dropout = r.get_double("dropout", 0.0);
  o.use_bias = r.get_bool("use_bias", true);
  o.output_shape = r.get_optional_int_list("output_shape");
  if (auto axes = r.get_optional_int_list("attention_axes"))
    o.attention_axes = std::vector<int>(axes->begin(), axes->end());
  read_shared_options(r, o);
  return std::make_shared<MultiHeadAttentionLayer>(heads, key_dim, o);
}

std::shared_ptr<Layer> grouped_query_attention_from_config(ConfigReader& r) {
  for (const char* k : {"head_dim", "num_query_heads", "num_key_value_heads"})
    if (!r.has(k)) r.fail_option(k, "missing");
  const int head_dim = r.get_int("head_dim", 0), heads = r.get_int("num_query_heads", 0),
            kv_heads = r.get_int("num_key_value_heads", 0);
  if (kv_heads <= 0) r.fail_option("num_key_value_heads", "must be a positive integer");
  MultiHeadAttentionOptions o;
  o.dropout = r.get_double("dropout", 0.0);
  o.use_bias = r.get_bool("use_bias", true);
  read_shared_options(r, o);
  return std::make_shared<MultiHeadAttentionLayer>(heads, head_dim, o, kv_heads);
}

LayerRef GroupedQueryAttention(int head_dim, int num_query_heads, int num_key_value_heads,
                               const GroupedQueryAttentionOptions& options) {
  SYSTOLIC_CHECK(num_key_value_heads > 0,
                 "GroupedQueryAttention: num_key_value_heads must be positive, got {}", num_key_value_heads);
  MultiHeadAttentionOptions o;
  o.dropout = options.dropout;
  o.use_bias = options.use_bias;
  o.use_gate = options.use_gate;
  o.use_causal_mask = options.use_causal_mask;
  o.sliding_window = options.sliding_window;
  o.attention_mask_input = options.attention_mask_input;
  o.kernel_initializer = options.kernel_initializer;
  o.bias_initializer = options.bias_initializer;
  o.kernel_regularizer = options.kernel_regularizer;
  o.bias_regularizer = options.bias_regularizer;
  o.activity_regularizer = options.activity_regularizer;
  o.kernel_constraint = options.kernel_constraint;
  o.bias_constraint = options.bias_constraint;
  o.seed = options.seed;
  o.name = options.name;
  auto layer = std::make_shared<MultiHeadAttentionLayer>(num_query_heads, head_dim, o, num_key_value_heads);
  layer->set_call(o.attention_mask_input,
                  {.causal = options.use_causal_mask, .scores = options.return_attention_scores});
  return LayerRef(layer);
}

LayerRef MultiHeadAttention(int num_heads, int key_dim, const MultiHeadAttentionOptions& options) {
  auto layer = std::make_shared<MultiHeadAttentionLayer>(num_heads, key_dim, options);
  layer->set_call(options.attention_mask_input,
                  {.causal = options.use_causal_mask, .scores = options.return_attention_scores});
  return LayerRef(layer);
}

}  // namespace systolic::layers
