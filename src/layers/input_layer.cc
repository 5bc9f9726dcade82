// Input / InputLayer (Keras): the graph's entry; the model feeds batches straight into its node.
#include <systolic/layers.h>

namespace systolic::layers {

namespace {
class InputLayer final : public Layer {
 public:
  InputLayer(Shape shape, const InputOptions& o)
      : Layer("InputLayer", o.name.empty() ? unique_layer_name("input", false) : o.name), shape_(std::move(shape)) {}
  Shape compute_output_shape(const std::vector<Shape>&) const override { return shape_; }
  bool is_input_layer() const override { return true; }
  const Shape& input_shape() const { return shape_; }

 protected:
  int input_count() const override { return 0; }
  void forward(LayerCall&) override { fail("InputLayer '{}' is fed by the model, not called", name()); }
  void backward(LayerCall&) override {}

 private:
  Shape shape_;
};
}  // namespace

SymbolicTensor Input(Shape shape, const InputOptions& options) {
  for (auto d : shape.dims()) SYSTOLIC_CHECK(d > 0, "Input: shape {} must have positive dimensions", shape.str());
  auto layer = std::make_shared<InputLayer>(shape, options);
  return (*layer)(std::vector<SymbolicTensor>{});
}

}  // namespace systolic::layers
