// Input / InputLayer (Keras): the graph's entry; the model feeds batches straight into its node.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class InputLayer final : public Layer {
 public:
  InputLayer(Shape shape, const InputOptions& o)
      : Layer("InputLayer", o.name.empty() ? unique_layer_name("input", false) : o.name),
        shape_(std::move(shape)),
        batch_size_(o.batch_size) {}
  Shape compute_output_shape(const std::vector<Shape>&) const override { return shape_; }
  bool is_input_layer() const override { return true; }
  const Shape& input_shape() const { return shape_; }

  void get_config(json& c) const override {
    // tf.keras's form (Keras 3 reads it too): batch_input_shape with the batch dimension first (null unless fixed).
    json shape = json::array({batch_size_ ? json(*batch_size_) : json(nullptr)});
    for (auto d : shape_.dims()) shape.push_back(d);
    c = {{"batch_input_shape", shape},
         {"dtype", dtype_name(dtype())},
         {"sparse", false},
         {"ragged", false},
         {"name", name()}};
  }

 protected:
  int input_count() const override { return 0; }
  void forward(LayerCall&) override { fail("InputLayer '{}' is fed by the model, not called", name()); }
  void backward(LayerCall&) override {}

 private:
  Shape shape_;
  std::optional<std::int64_t> batch_size_;
};
}  // namespace

std::shared_ptr<Layer> input_layer_from_config(ConfigReader& r) {
  // tf.keras: batch_input_shape; Keras 3: batch_shape; both with the batch dimension first (null).
  const char* key = r.has("batch_shape") ? "batch_shape" : "batch_input_shape";
  auto& v = r.get_raw(key);
  if (!v.is_array() || v.size() < 2) r.fail_option(key, "expected [null, dims...], got " + v.dump());
  std::vector<std::int64_t> dims;
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() <= 0)
      r.fail_option(key, "every dimension after the batch must be a positive integer, got " + v.dump());
    dims.push_back(v[i].get<std::int64_t>());
  }
  if (!v[0].is_null() && !(v[0].is_number_integer() && v[0].get<std::int64_t>() > 0))
    r.fail_option(key, "bad batch dimension in " + v.dump());
  r.require_value("sparse", false);
  r.require_value("ragged", false);
  r.require_value("optional", false);
  InputOptions o{.name = r.name()};
  if (!v[0].is_null()) o.batch_size = v[0].get<std::int64_t>();
  return std::make_shared<InputLayer>(Shape(dims), o);
}

SymbolicTensor Input(Shape shape, const InputOptions& options) {
  for (auto d : shape.dims())
    SYSTOLIC_CHECK(d > 0, "Input: shape {} must have positive dimensions", shape.str());
  SYSTOLIC_CHECK(!options.batch_size || *options.batch_size > 0, "Input: batch_size must be positive, got {}",
                 options.batch_size.value_or(0));
  auto layer = std::make_shared<InputLayer>(shape, options);
  return (*layer)(std::vector<SymbolicTensor>{});
}

}  // namespace systolic::layers
