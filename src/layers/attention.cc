// Attention (Keras 3's keras.layers.Attention: Luong's dot-product attention, or its score_mode "concat") and
// AdditiveAttention (Bahdanau's): the scores by ops::attention_forward's dot product or its additive score, the
// softmax over the keys, dropout of the probabilities while training, the values weighted by them; one head, scale 1.
// Keras's weights: Attention's trainable scalar `scale` (use_scale) multiplies the dot product (here the query, so
// that its gradient is the query's product with the scaled query's gradient), or in "concat" query + key (here
// both), whose additive score's one weight is concat_score_weight; AdditiveAttention's `scale` (use_scale, one per
// feature) is its additive score's weights (none: 1). Keras's masks: the value's hides keys (Keras subtracts 1e9
// from their scores; a query row with every key hidden comes out as the average of the values, as Keras's does for
// scores under 32 in size: AttentionParams::empty_rows_uniform, which passes no gradient to such a row's scores),
// the query's zeroes the output's rows and rides on the output; the key's is ignored, as in Keras.
// use_causal_mask is Keras's call argument, one value per layer here (a config's call sets it).
// return_attention_scores (Keras's call argument, likewise) makes the probabilities a second output, after the
// dropout while training as Keras returns them (ops::dropout_forward draws the op's mask again); their gradient goes
// back through that dropout into the op's backward. Weight gradients are summed in the data's dtype (bfloat16 under
// a mixed policy) and widened into the float32 gradient.
#include <systolic/layers.h>

#include <nlohmann/json.hpp>

#include "core/philox.h"
#include "layers/config.h"
#include "layers/saved.h"

namespace systolic::layers {

namespace {

enum class Score { dot, concat, additive };

// Attention's and AdditiveAttention's options as one.
struct Settings {
  Score score = Score::dot;
  bool use_scale = false;
  double dropout = 0.0;
  bool use_causal_mask = false, return_attention_scores = false;
  std::optional<std::uint64_t> seed;
  std::string name;
};

class AttentionLayer final : public Layer {
 public:
  explicit AttentionLayer(const Settings& o)
      : Layer(o.score == Score::additive ? "AdditiveAttention" : "Attention", o.name),
        o_(o),
        seed_(o.seed ? *o.seed : global_generator().split()) {
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
      fail("layer '{}' ({}): every call must pass the same use_causal_mask and return_attention_scores",
           name(), class_name());
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
      fail_shape("query " + q.keras_str() + ", value " + v.keras_str() + ": systolic's " + class_name() +
                 " takes (steps, features) inputs");
    if (k[0] != v[0])
      fail_shape("key " + k.keras_str() + " and value " + v.keras_str() + " must have as many steps");
    if (q[1] != k[1])
      fail_shape("query " + q.keras_str() + " and key " + k.keras_str() + ": the " +
                 (o_.score == Score::dot ? "dot product" : "additive score") +
                 " needs as many features in both");
    return Shape({q[0], v[1]});
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["use_scale"] = o_.use_scale;
    if (o_.score != Score::additive) c["score_mode"] = o_.score == Score::concat ? "concat" : "dot";
    c["dropout"] = o_.dropout;
    c["seed"] = o_.seed ? json(*o_.seed) : json(nullptr);
  }

 protected:
  int input_count() const override { return 2; }
  int max_input_count() const override { return 3; }

  // Keras's weights, in its order: scale (use_scale; AdditiveAttention's one per feature of the query), then
  // concat_score_weight ("concat").
  void build(const std::vector<Shape>& in) override {
    called_ = true;
    if (o_.use_scale) {
      if (o_.score == Score::additive)
        add_weight("scale", Shape({in[0][1]}), "glorot_uniform", true);
      else
        add_weight("scale", Shape(std::vector<std::int64_t>{}), "ones", true);
    }
    if (o_.score == Score::concat)
      add_weight("concat_score_weight", Shape(std::vector<std::int64_t>{}), "ones", true);
  }

  void forward(LayerCall& c) override {
    const Dims n = dims(c);
    Tensor q = query4(c, n), k = key4(c, n), query_mask, key_mask;
    if (scales_inputs()) {  // Attention's scale: the query's (dot), or the query's and the key's (concat)
      q = slot(c, kScaledQuery, q.shape(), q);
      ops::broadcast_forward(ops::BinaryKind::multiply, query4(c, n), scale(), q);
      if (o_.score == Score::concat) {
        k = slot(c, kScaledKey, k.shape(), k);
        ops::broadcast_forward(ops::BinaryKind::multiply, key4(c, n), scale(), k);
      }
    }
    masks(c, n, query_mask, key_mask);
    Tensor probs = slot(c, kProbs, Shape({n.N, 1, n.T, n.S}), q);
    Tensor y = query_mask.defined() ? slot(c, kUnmasked, Shape({n.N, n.T, 1, n.E}), q)
                                    : c.output.reshape({n.N, n.T, 1, n.E});
    ops::attention_forward(params(c), q, k, value4(c, n), score_weights(), Tensor(), key_mask, Tensor(),
                           step_of(c), y, probs);
    if (query_mask.defined()) {  // Keras's where(query_mask, output, 0)
      Tensor out = c.output.reshape({n.N, n.T, 1, n.E});
      ops::broadcast_forward(ops::BinaryKind::multiply, y, query_mask.reshape({n.N, n.T, 1, 1}), out);
    }
    // The scores output: Keras returns the probabilities after the dropout (the op's mask, drawn again).
    if (!c.more_outputs.empty() && c.more_outputs[0].defined()) {
      Tensor scores = c.more_outputs[0].reshape(probs.shape());
      const ops::AttentionParams p = params(c);
      if (p.dropout > 0)
        ops::dropout_forward(probs, scores, p.dropout, p.seed, step_of(c));
      else
        ops::copy(probs, scores);
    }
  }

  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(c.saved.size() == kSlots && c.saved[kProbs].defined(),
                   "layer '{}': backward without a forward", name());
    const Dims n = dims(c);
    const Tensor& like = c.inputs[0];
    Tensor query_mask, key_mask;
    masks(c, n, query_mask, key_mask);
    Tensor dy = c.doutput.reshape({n.N, n.T, 1, n.E});
    if (query_mask.defined()) {
      Tensor masked = slot(c, kUnmaskedGrad, dy.shape(), like);
      ops::broadcast_forward(ops::BinaryKind::multiply, dy, query_mask.reshape({n.N, n.T, 1, 1}), masked);
      dy = masked;
    }
    // The key's gradient: its own input's, or added to the value's when the value is the key.
    const bool own_key = c.inputs.size() == 3;
    Tensor dquery = grad4(c, 0, n.D, n.T), dvalue = grad4(c, 1, n.E, n.S);
    Tensor dkey = own_key
                      ? grad4(c, 2, n.D, n.S)
                      : (dvalue.defined() ? slot(c, kKeyGrad, Shape({n.N, n.S, 1, n.D}), like) : Tensor());
    // The scaled inputs' gradients, when the scale's gradient or the input's is wanted.
    const bool scaled = scales_inputs(), scaled_key = scaled && o_.score == Score::concat;
    const bool dscale = scaled && weights()[0].grad.defined();
    Tensor dq = scaled && (dscale || dquery.defined())
                    ? slot(c, kScaledQueryGrad, Shape({n.N, n.T, 1, n.D}), like)
                    : (scaled ? Tensor() : dquery);
    Tensor dk = scaled_key && (dscale || dkey.defined())
                    ? slot(c, kScaledKeyGrad, Shape({n.N, n.S, 1, n.D}), like)
                    : (scaled_key ? Tensor() : dkey);
    // The scores output's gradient, back through its dropout, reaches the probabilities.
    Tensor dprobs;
    if (!c.more_doutputs.empty() && c.more_doutputs[0].defined()) {
      dprobs = c.more_doutputs[0].reshape(c.saved[kProbs].shape());
      const ops::AttentionParams p = params(c);
      if (p.dropout > 0) {
        Tensor dropped = slot(c, kProbsGrad, dprobs.shape(), like);
        ops::dropout_backward(dprobs, dropped, p.dropout, p.seed, step_of(c));
        dprobs = dropped;
      }
    }
    const Weight* sw = score_weight();
    const Tensor w = score_weights();
    Tensor dw = sw && sw->grad.defined() ? slot(c, kWeightsGrad, w.shape(), like) : Tensor();
    ops::attention_backward(params(c), scaled ? c.saved[kScaledQuery] : query4(c, n),
                            scaled_key ? c.saved[kScaledKey] : key4(c, n), value4(c, n), w, Tensor(),
                            key_mask, Tensor(), step_of(c), c.saved[kProbs], dy, dprobs, dq, dk, dvalue, dw);
    if (dw.defined()) add_weight_gradient(c, kWideGrad, kSlots, dw, *sw);
    // scaled = input * scale: the input's gradient is the scaled one's times scale; the scale's, the sum of their
    // product.
    auto unscale = [&](const Tensor& input, const Tensor& dscaled, Tensor& dinput) {
      if (!dscaled.defined()) return;
      Tensor ds = dscale ? slot(c, kScaleGrad, Shape({1}), like) : Tensor();
      ops::broadcast_backward(ops::BinaryKind::multiply, input, scale(), dscaled, dinput, ds);
      if (ds.defined()) add_weight_gradient(c, kWideGrad, kSlots, ds, weights()[0]);
    };
    if (scaled) unscale(query4(c, n), dq, dquery);
    if (scaled_key) unscale(key4(c, n), dk, dkey);
    if (!own_key && dvalue.defined()) ops::accumulate(dkey, dvalue);
  }

 private:
  // LayerCall::saved: forward's scaled inputs and probabilities (read by backward), then scratch.
  enum Slot : std::size_t {
    kScaledQuery,
    kScaledKey,
    kProbs,
    kUnmasked,
    kUnmaskedGrad,
    kKeyGrad,
    kScaledQueryGrad,
    kScaledKeyGrad,
    kProbsGrad,
    kWeightsGrad,
    kScaleGrad,
    kWideGrad,
    kSlots
  };
  static Tensor slot(LayerCall& c, Slot i, const Shape& s, const Tensor& like) {
    return saved_slot(c, i, kSlots, s, like.dtype(), like.device());
  }

  struct Dims {
    std::int64_t N, T, S, D, E;
  };
  static Dims dims(const LayerCall& c) {
    const Tensor& q = c.inputs[0];
    const Tensor& v = c.inputs[1];
    return {q.dim(0), q.dim(1), v.dim(1), q.dim(2), v.dim(2)};
  }

  // Whether Attention's scalar scale multiplies the inputs (AdditiveAttention's scale is the score's weights).
  bool scales_inputs() const { return o_.use_scale && o_.score != Score::additive; }
  Tensor scale() const { return weights()[0].operand().reshape({1}); }
  // The additive score's weights: concat_score_weight, or AdditiveAttention's scale; none for the dot product.
  const Weight* score_weight() const {
    if (o_.score == Score::concat) return &weights()[o_.use_scale ? 1 : 0];
    if (o_.score == Score::additive && o_.use_scale) return &weights()[0];
    return nullptr;
  }
  Tensor score_weights() const {
    const Weight* w = score_weight();
    return w ? w->operand().reshape({w->operand().numel()}) : Tensor();
  }
  static Tensor query4(const LayerCall& c, const Dims& n) { return c.inputs[0].reshape({n.N, n.T, 1, n.D}); }
  static Tensor value4(const LayerCall& c, const Dims& n) { return c.inputs[1].reshape({n.N, n.S, 1, n.E}); }
  static Tensor key4(const LayerCall& c, const Dims& n) {
    return (c.inputs.size() == 3 ? c.inputs[2] : c.inputs[1]).reshape({n.N, n.S, 1, n.D});
  }
  // Input i's gradient viewed as [N, steps, 1, features]; undefined when not wanted.
  static Tensor grad4(const LayerCall& c, std::size_t i, std::int64_t features, std::int64_t steps) {
    if (i >= c.dinputs.size() || !c.dinputs[i].defined()) return Tensor();
    return c.dinputs[i].reshape({c.dinputs[i].dim(0), steps, 1, features});
  }

  // Keras's masks as the op takes them: the query's [N, T] (applied to the output) and the value's [N, S] (keys).
  static void masks(const LayerCall& c, const Dims& n, Tensor& query_mask, Tensor& key_mask) {
    if (c.mask.defined()) query_mask = c.mask.reshape({n.N, n.T});
    if (c.masks.size() > 1 && c.masks[1].defined()) key_mask = c.masks[1].reshape({n.N, n.S});
  }

  ops::AttentionParams params(const LayerCall& c) const {
    ops::AttentionParams p{
        .scale = 1.0,
        .score = o_.score == Score::dot ? ops::AttentionScore::dot : ops::AttentionScore::additive,
        .causal = o_.use_causal_mask,
        .empty_rows_uniform = true};
    if (c.training && o_.dropout > 0) {
      p.dropout = o_.dropout;
      p.seed = philox::replica_seed(seed_, c.training->replica);
    }
    return p;
  }
  static Tensor step_of(const LayerCall& c) { return c.training ? c.training->counter : Tensor(); }

  Settings o_;
  std::uint64_t seed_;
  bool called_ = false;
};

// The options both classes' structs hold.
template <class Options>
Settings settings(const Options& o, Score score) {
  return {.score = score,
          .use_scale = o.use_scale,
          .dropout = o.dropout,
          .use_causal_mask = o.use_causal_mask,
          .return_attention_scores = o.return_attention_scores,
          .seed = o.seed,
          .name = o.name};
}

LayerRef make(const Settings& s) {
  auto layer = std::make_shared<AttentionLayer>(s);
  layer->set_call({.causal = s.use_causal_mask, .scores = s.return_attention_scores});
  return LayerRef(layer);
}

// The options both classes' configs hold.
void read_common(ConfigReader& r, Settings& s, bool use_scale_default) {
  s.use_scale = r.get_bool("use_scale", use_scale_default);
  s.dropout = r.get_double("dropout", 0.0);
  if (auto seed = r.get_optional_int("seed")) s.seed = static_cast<std::uint64_t>(*seed);
  s.name = r.name();
}

}  // namespace

std::shared_ptr<Layer> attention_from_config(ConfigReader& r) {
  Settings s;
  const std::string mode = r.get_string("score_mode", "dot");
  if (mode != "dot" && mode != "concat") r.fail_option("score_mode", "must be \"dot\" or \"concat\"");
  s.score = mode == "concat" ? Score::concat : Score::dot;
  read_common(r, s, false);
  return std::make_shared<AttentionLayer>(s);
}

std::shared_ptr<Layer> additive_attention_from_config(ConfigReader& r) {
  Settings s{.score = Score::additive};
  read_common(r, s, true);
  return std::make_shared<AttentionLayer>(s);
}

LayerRef Attention(const AttentionOptions& o) {
  SYSTOLIC_CHECK(o.score_mode == "dot" || o.score_mode == "concat",
                 "layer '{}': score_mode must be \"dot\" or \"concat\", got \"{}\"", o.name, o.score_mode);
  return make(settings(o, o.score_mode == "concat" ? Score::concat : Score::dot));
}

LayerRef AdditiveAttention(const AdditiveAttentionOptions& o) {
  return make(settings(o, Score::additive));
}

}  // namespace systolic::layers
