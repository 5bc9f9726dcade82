// Embedding (Keras): ids -> rows of the embeddings (input_dim, output_dim). Forward casts the ids to int32 (toward
// zero, as Keras's ops.cast) and gathers their rows into the output in its compute dtype; backward adds the
// output's gradient rows back into the embeddings' gradient (repeated ids add up). Ids get no gradient.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class EmbeddingLayer final : public Layer {
 public:
  EmbeddingLayer(int input_dim, int output_dim, const EmbeddingOptions& o)
      : Layer("Embedding", o.name), input_dim_(input_dim), output_dim_(output_dim), o_(o) {
    SYSTOLIC_CHECK(input_dim > 0, "layer '{}': input_dim must be a positive integer, got {}", name(),
                   input_dim);
    SYSTOLIC_CHECK(output_dim > 0, "layer '{}': output_dim must be a positive integer, got {}", name(),
                   output_dim);
    set_activity_regularizer(o.activity_regularizer);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    std::vector<std::int64_t> dims = in[0].dims();
    dims.push_back(output_dim_);
    return Shape(dims);
  }
  bool autocast() const override { return false; }
  // mask_zero: the output's mask is 1 where the id is not 0.
  bool makes_mask() const override { return o_.mask_zero; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["input_dim"] = input_dim_;
    c["output_dim"] = output_dim_;
    c["embeddings_initializer"] = initializer_config(o_.embeddings_initializer);
    c["embeddings_regularizer"] = regularizer_config(o_.embeddings_regularizer);
    if (!c.contains("activity_regularizer"))
      c["activity_regularizer"] = nullptr;  // base_config wrote one set
    c["embeddings_constraint"] = constraint_config(o_.embeddings_constraint);
    c["mask_zero"] = o_.mask_zero;
    c["quantization_config"] = nullptr;
  }

 protected:
  void build(const std::vector<Shape>&) override {
    add_weight("embeddings", {input_dim_, output_dim_}, o_.embeddings_initializer, true,
               {o_.embeddings_regularizer, o_.embeddings_constraint});
  }
  // saved[0]: the ids as int32, kept for backward; saved[1]: the mask in the ids' dtype when the data's differs.
  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    const std::int64_t n = x.numel();
    if (c.saved.size() != 2 || c.saved[0].numel() != n || c.saved[0].device() != x.device())
      c.saved = {Tensor({n}, DType::int32, x.device()), Tensor({n}, x.dtype(), x.device())};
    ops::cast(x, c.saved[0]);
    Tensor rows = c.output.view(0, {n, output_dim_});
    ops::gather_rows(weights()[0].value, c.saved[0], rows);
    if (!c.output_mask.defined()) return;
    // The ids compared with 0 in their own dtype, then the mask in the data's.
    Tensor ids = x.view(0, {n, 1}), mask = c.output_mask.view(0, {n});
    if (mask.dtype() == x.dtype()) return ops::compute_mask(ids, 0.0, mask);
    ops::compute_mask(ids, 0.0, c.saved[1]);
    ops::cast(c.saved[1], mask);
  }
  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(c.saved.size() == 2, "layer '{}': backward without a forward", name());
    if (c.dinputs[0].defined()) ops::fill(c.dinputs[0], 0.0);  // ids have no gradient
    Tensor& g = weights()[0].grad;
    if (!g.defined()) return;
    const std::int64_t n = c.saved[0].numel();
    ops::scatter_add_rows(c.doutput.view(0, {n, output_dim_}), c.saved[0], g);
  }

 private:
  std::int64_t input_dim_, output_dim_;
  EmbeddingOptions o_;
};
}  // namespace

std::shared_ptr<Layer> embedding_from_config(ConfigReader& r) {
  for (const char* key : {"input_dim", "output_dim"})
    if (!r.has(key)) r.fail_option(key, "missing");
  EmbeddingOptions o{.embeddings_initializer = r.get_initializer("embeddings_initializer", "random_uniform"),
                     .embeddings_regularizer = r.get_regularizer("embeddings_regularizer"),
                     .embeddings_constraint = r.get_constraint("embeddings_constraint"),
                     .mask_zero = r.get_bool("mask_zero", false),
                     .name = r.name()};
  for (auto* k : {"lora_rank", "quantization_config"}) r.require_null(k);
  r.ignore("lora_alpha");  // only used with lora_rank
  // tf.keras's: the input's length, which the model's input gives, and the input shape it writes in every
  // Embedding's config (a Sequential model's first layer gives the model's input from it before this reads it).
  r.ignore("input_length");
  r.ignore("batch_input_shape");
  return std::make_shared<EmbeddingLayer>(r.get_int("input_dim", 0), r.get_int("output_dim", 0), o);
}

LayerRef Embedding(int input_dim, int output_dim, const EmbeddingOptions& options) {
  return LayerRef(std::make_shared<EmbeddingLayer>(input_dim, output_dim, options));
}

}  // namespace systolic::layers
