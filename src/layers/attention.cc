// Attention (Keras 3's keras.layers.Attention, Luong's dot-product attention): scores = query . key (times the
// trainable scalar `scale` with use_scale), the softmax over the keys, dropout of the probabilities while training,
// the values weighted by them. It runs ops::attention_forward with one head and scale 1 (the scalar weight scales the
// query instead, so that its gradient is the query's product with the scaled query's gradient). Keras's masks: the
// value's hides keys (Keras subtracts 1e9 from their scores; a query row with every key hidden comes out as the
// average of the values, as Keras's does for scores under 32 in size: AttentionParams::empty_rows_uniform, which
// passes no gradient to such a row's scores), the query's zeroes the output's rows and rides on the output; the
// key's is ignored, as in Keras. use_causal_mask is Keras's call argument, one value per layer here (a config's call
// sets it). return_attention_scores (Keras's call argument, likewise) makes the probabilities a second output, after
// the dropout while training as Keras returns them (ops::dropout_forward draws the op's mask again); their gradient
// goes back through that dropout into the op's backward. score_mode "concat" is refused by name.
#include <systolic/layers.h>

#include <nlohmann/json.hpp>

#include "core/philox.h"
#include "layers/config.h"

namespace systolic::layers {

namespace {

class AttentionLayer final : public Layer {
 public:
  explicit AttentionLayer(const AttentionOptions& o)
      : Layer("Attention", o.name), o_(o), seed_(o.seed ? *o.seed : global_generator().split()) {
    SYSTOLIC_CHECK(o.score_mode == "dot" || o.score_mode == "concat",
                   "layer '{}': score_mode must be \"dot\" or \"concat\", got \"{}\"", name(), o.score_mode);
    SYSTOLIC_CHECK(o.score_mode == "dot",
                   "layer '{}': score_mode \"concat\" is not supported (systolic runs \"dot\")", name());
    SYSTOLIC_CHECK(o.dropout >= 0 && o.dropout < 1, "layer '{}': dropout must be in [0, 1), got {}", name(),
                   o.dropout);
  }

  // The output carries the query's mask, as Keras's compute_mask returns it.
  bool output_masked(bool input_masked) const override { return input_masked; }
  // A causal call or the scores as an output need Keras 3's keyword arguments; tf.keras configs list the inputs
  // alone.
  bool keras3_only() const override { return o_.use_causal_mask || o_.return_attention_scores; }

  void read_keras_call(std::size_t positional, const std::vector<std::string>& tensor_keywords,
                       const nlohmann::ordered_json& options) override {
    (void)positional;
    (void)tensor_keywords;
    set_call(attention_call(*this, options));
  }

  // Keras 3 calls the layer on one list, [query, value(, key)], with use_causal_mask and return_attention_scores
  // by name.
  bool keras_call_form(const std::vector<nlohmann::ordered_json>& tensors, nlohmann::ordered_json& args,
                       nlohmann::ordered_json& kwargs) const override {
    args = nlohmann::ordered_json::array({nlohmann::ordered_json(tensors)});
    write_attention_call({.causal = o_.use_causal_mask, .scores = o_.return_attention_scores}, kwargs);
    return true;
  }

  // Set before the first call; a later call must agree.
  void set_call(const AttentionCall& call) {
    if (called_ && (call.causal != o_.use_causal_mask || call.scores != o_.return_attention_scores))
      fail(
          "layer '{}' (Attention): every call must pass the same use_causal_mask and return_attention_scores",
          name());
    o_.use_causal_mask = call.causal;
    o_.return_attention_scores = call.scores;
    called_ = true;
  }

  // With return_attention_scores: the probabilities (Tq, Tv).
  std::vector<Shape> more_output_shapes(const std::vector<Shape>& in) const override {
    if (!o_.return_attention_scores) return {};
    return {Shape({in[0][0], in[1][0]})};
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in.size() != 2 && in.size() != 3)
      fail_shape(fmt::format("takes [query, value] or [query, value, key], got {} inputs", in.size()));
    const Shape &q = in[0], &v = in[1], &k = in.size() == 3 ? in[2] : in[1];
    if (q.rank() != 2 || v.rank() != 2 || k.rank() != 2)
      fail_shape("query " + q.keras_str() + ", value " + v.keras_str() +
                 ": systolic's Attention takes (steps, features) inputs");
    if (k[0] != v[0])
      fail_shape("key " + k.keras_str() + " and value " + v.keras_str() + " must have as many steps");
    if (q[1] != k[1])
      fail_shape("query " + q.keras_str() + " and key " + k.keras_str() +
                 ": the dot product needs as many features in both");
    return Shape({q[0], v[1]});
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["use_scale"] = o_.use_scale;
    c["score_mode"] = o_.score_mode;
    c["dropout"] = o_.dropout;
    c["seed"] = o_.seed ? json(*o_.seed) : json(nullptr);
  }

 protected:
  int input_count() const override { return 2; }
  int max_input_count() const override { return 3; }

  void build(const std::vector<Shape>&) override {
    called_ = true;
    if (o_.use_scale) add_weight("scale", Shape(std::vector<std::int64_t>{}), "ones", true);
  }

  void forward(LayerCall& c) override {
    Buffers b = buffers(c);
    Tensor q = query4(c, b), query_mask, key_mask;
    if (o_.use_scale) {
      ops::broadcast_forward(ops::BinaryKind::multiply, q, scale(), b.scaled);
      q = b.scaled;
    }
    masks(c, b, query_mask, key_mask);
    Tensor y = query_mask.defined() ? b.unmasked : c.output.reshape({b.N, b.T, 1, b.E});
    ops::attention_forward(params(c), q, key4(c, b), value4(c, b), Tensor(), key_mask, Tensor(), step_of(c),
                           y, b.probs);
    if (query_mask.defined()) {  // Keras's where(query_mask, output, 0)
      Tensor out = c.output.reshape({b.N, b.T, 1, b.E});
      ops::broadcast_forward(ops::BinaryKind::multiply, y, query_mask.reshape({b.N, b.T, 1, 1}), out);
    }
    // The scores output: Keras returns the probabilities after the dropout (the op's mask, drawn again).
    if (!c.more_outputs.empty() && c.more_outputs[0].defined()) {
      Tensor scores = c.more_outputs[0].reshape(b.probs.shape());
      const ops::AttentionParams p = params(c);
      if (p.dropout > 0)
        ops::dropout_forward(b.probs, scores, p.dropout, p.seed, step_of(c));
      else
        ops::copy(b.probs, scores);
    }
  }

  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(c.saved.size() == kSaved, "layer '{}': backward without a forward", name());
    Buffers b = buffers(c);
    Tensor query_mask, key_mask;
    masks(c, b, query_mask, key_mask);
    Tensor dy = c.doutput.reshape({b.N, b.T, 1, b.E});
    if (query_mask.defined()) {
      ops::broadcast_forward(ops::BinaryKind::multiply, dy, query_mask.reshape({b.N, b.T, 1, 1}),
                             b.dunmasked);
      dy = b.dunmasked;
    }
    const bool own_key = c.inputs.size() == 3;
    Tensor dquery = grad4(c, 0, b.D, b.T), dvalue = grad4(c, 1, b.E, b.S);
    Tensor dkey = own_key ? grad4(c, 2, b.D, b.S) : (dvalue.defined() ? b.dkey : Tensor());
    Tensor dq = o_.use_scale ? b.dscaled : dquery;
    // The scores output's gradient, back through its dropout, reaches the probabilities.
    Tensor dprobs;
    if (!c.more_doutputs.empty() && c.more_doutputs[0].defined()) {
      dprobs = c.more_doutputs[0].reshape(b.probs.shape());
      const ops::AttentionParams p = params(c);
      if (p.dropout > 0) {
        ops::dropout_backward(dprobs, b.dprobs, p.dropout, p.seed, step_of(c));
        dprobs = b.dprobs;
      }
    }
    ops::attention_backward(params(c), o_.use_scale ? b.scaled : query4(c, b), key4(c, b), value4(c, b),
                            Tensor(), key_mask, Tensor(), step_of(c), b.probs, dy, dprobs, dq, dkey, dvalue);
    if (!own_key && dvalue.defined()) ops::accumulate(b.dkey, dvalue);
    if (o_.use_scale) {  // scaled = query * scale: dquery = dscaled * scale, dscale += sum(query * dscaled)
      const Weight& w = weights()[0];
      Tensor dscale = w.grad.defined() ? b.dscale : Tensor();
      ops::broadcast_backward(ops::BinaryKind::multiply, query4(c, b), scale(), b.dscaled, dquery, dscale);
      if (dscale.defined()) {
        Tensor grad = w.grad.reshape({1});
        ops::accumulate(dscale, grad);
      }
    }
  }

 private:
  static constexpr std::size_t kSaved = 8;
  // The call's tensors, kept in c.saved for its batch size: the scaled query, the probabilities, the output before
  // the query's mask and its gradient, the scaled query's gradient, the key's gradient when the value is the key,
  // the probabilities' gradient from the scores output's through dropout, and the scale's gradient (last: the
  // scale's dtype).
  struct Buffers {
    std::int64_t N, T, S, D, E;
    Tensor scaled, probs, unmasked, dunmasked, dscaled, dkey, dprobs, dscale;
  };
  Buffers buffers(LayerCall& c) {
    const Tensor& q = c.inputs[0];
    const Tensor& v = c.inputs[1];
    const std::int64_t N = q.dim(0), T = q.dim(1), D = q.dim(2), S = v.dim(1), E = v.dim(2);
    const Shape dprobs = o_.return_attention_scores ? Shape({N, 1, T, S}) : Shape({0});  // scores' only
    const Shape shapes[kSaved] = {{N, T, 1, D}, {N, 1, T, S}, {N, T, 1, E}, {N, T, 1, E},
                                  {N, T, 1, D}, {N, S, 1, D}, dprobs,       {1}};
    const DType t = q.dtype();
    bool fresh = c.saved.size() != kSaved;
    for (std::size_t i = 0; !fresh && i < kSaved; ++i)
      fresh = c.saved[i].shape() != shapes[i] || (i + 1 < kSaved && c.saved[i].dtype() != t);
    if (fresh) {
      c.saved.clear();
      for (std::size_t i = 0; i < kSaved; ++i)
        c.saved.emplace_back(shapes[i], i + 1 < kSaved ? t : scale_dtype(), q.device());
    }
    auto& s = c.saved;
    return {N, T, S, D, E, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]};
  }
  DType scale_dtype() const { return o_.use_scale ? weights()[0].value.dtype() : DType::float32; }
  Tensor scale() const { return weights()[0].operand().reshape({1}); }
  static Tensor query4(const LayerCall& c, const Buffers& b) {
    return c.inputs[0].reshape({b.N, b.T, 1, b.D});
  }
  static Tensor value4(const LayerCall& c, const Buffers& b) {
    return c.inputs[1].reshape({b.N, b.S, 1, b.E});
  }
  static Tensor key4(const LayerCall& c, const Buffers& b) {
    return (c.inputs.size() == 3 ? c.inputs[2] : c.inputs[1]).reshape({b.N, b.S, 1, b.D});
  }
  // Input i's gradient viewed as [N, steps, 1, features]; undefined when not wanted.
  static Tensor grad4(const LayerCall& c, std::size_t i, std::int64_t features, std::int64_t steps) {
    if (i >= c.dinputs.size() || !c.dinputs[i].defined()) return Tensor();
    return c.dinputs[i].reshape({c.dinputs[i].dim(0), steps, 1, features});
  }

  // Keras's masks as the op takes them: the query's [N, T] (applied to the output) and the value's [N, S] (keys).
  static void masks(const LayerCall& c, const Buffers& b, Tensor& query_mask, Tensor& key_mask) {
    if (c.mask.defined()) query_mask = c.mask.reshape({b.N, b.T});
    if (c.masks.size() > 1 && c.masks[1].defined()) key_mask = c.masks[1].reshape({b.N, b.S});
  }

  ops::AttentionParams params(const LayerCall& c) const {
    ops::AttentionParams p{.scale = 1.0, .causal = o_.use_causal_mask, .empty_rows_uniform = true};
    if (c.training && o_.dropout > 0) {
      p.dropout = o_.dropout;
      p.seed = philox::replica_seed(seed_, c.training->replica);
    }
    return p;
  }
  static Tensor step_of(const LayerCall& c) { return c.training ? c.training->counter : Tensor(); }

  AttentionOptions o_;
  std::uint64_t seed_;
  bool called_ = false;
};

}  // namespace

std::shared_ptr<Layer> attention_from_config(ConfigReader& r) {
  AttentionOptions o;
  o.use_scale = r.get_bool("use_scale", false);
  o.score_mode = r.get_string("score_mode", "dot");
  if (o.score_mode != "dot")
    r.fail_option("score_mode", o.score_mode == "concat"
                                    ? "\"concat\" is not supported (systolic runs \"dot\")"
                                    : "must be \"dot\" or \"concat\"");
  o.dropout = r.get_double("dropout", 0.0);
  if (auto s = r.get_optional_int("seed")) o.seed = static_cast<std::uint64_t>(*s);
  o.name = r.name();
  return std::make_shared<AttentionLayer>(o);
}

LayerRef Attention(const AttentionOptions& options) {
  auto layer = std::make_shared<AttentionLayer>(options);
  layer->set_call({.causal = options.use_causal_mask, .scores = options.return_attention_scores});
  return LayerRef(layer);
}

}  // namespace systolic::layers
