// Keras 3 operation nodes of keras.src.ops.numpy. With one tensor and one number (`x + 3.0`, `x * (1/6)`, as
// MobileNetV3's hard_sigmoid writes them): y = x*scale + shift through ops::scale_shift. With two tensors of one
// rank (`inputs + x`, ConvNeXt's residuals, `x / y`): NumPy's broadcasting add, subtract, multiply or divide through
// ops::broadcast_forward. Keras writes them as entries of the model's layers with module "keras.src.ops.numpy"
// and the numbers among the call's args; so does systolic (keras_module, keras_call_args).
#include <systolic/error.h>
#include <systolic/layers.h>

#include <nlohmann/json.hpp>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class NumpyOperationLayer final : public Layer {
 public:
  // Two tensors.
  NumpyOperationLayer(const std::string& class_name, const std::string& name)
      : Layer(class_name, name), two_tensors_(true) {
    if (class_name == "Add")
      kind_ = ops::BinaryKind::add;
    else if (class_name == "Subtract")
      kind_ = ops::BinaryKind::subtract;
    else if (class_name == "Multiply")
      kind_ = ops::BinaryKind::multiply;
    else if (class_name == "Divide" || class_name == "TrueDivide")
      kind_ = ops::BinaryKind::divide;
    else
      fail(
          "operation '{}': keras.src.ops.numpy.{} of two tensors is not supported (systolic runs Add, "
          "Subtract, Multiply and Divide of two tensors)",
          name, class_name);
  }
  // One tensor and a number.
  NumpyOperationLayer(const std::string& class_name, const std::string& name, double constant,
                      bool constant_first)
      : Layer(class_name, name), constant_(constant), constant_first_(constant_first) {
    if (class_name == "Add") {
      scale_ = 1, shift_ = constant;
    } else if (class_name == "Subtract") {
      scale_ = constant_first ? -1 : 1, shift_ = constant_first ? constant : -constant;
    } else if (class_name == "Multiply") {
      scale_ = constant, shift_ = 0;
    } else if ((class_name == "Divide" || class_name == "TrueDivide") && !constant_first) {
      SYSTOLIC_CHECK(constant != 0, "operation '{}' ({}): division by zero", name, class_name);
      scale_ = 1 / constant, shift_ = 0;
    } else {
      fail(
          "operation '{}': keras.src.ops.numpy.{} with {} is not supported (systolic runs Add, Subtract, "
          "Multiply, and Divide by a number, of one tensor and one number)",
          name, class_name, constant_first ? "a number first" : "these arguments");
    }
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (!two_tensors_) return in[0];
    if (in[0].rank() != in[1].rank())
      fail_shape("inputs " + in[0].keras_str() + " and " + in[1].keras_str() + " have different ranks");
    std::vector<std::int64_t> dims;
    for (int i = 0; i < in[0].rank(); ++i) {
      if (in[0][i] != in[1][i] && in[0][i] != 1 && in[1][i] != 1)
        fail_shape("inputs " + in[0].keras_str() + " and " + in[1].keras_str() + " do not broadcast");
      dims.push_back(in[0][i] == 1 ? in[1][i] : in[0][i]);
    }
    return Shape(dims);
  }
  void get_config(json& c) const override { c = {{"name", name()}}; }
  const char* keras_module() const override { return "keras.src.ops.numpy"; }
  bool keras_call_args(json& args) const override {
    if (two_tensors_)
      args = json::array({nullptr, nullptr});
    else
      args = constant_first_ ? json::array({constant_, nullptr}) : json::array({nullptr, constant_});
    return true;
  }

 protected:
  int input_count() const override { return two_tensors_ ? 2 : 1; }
  void forward(LayerCall& c) override {
    if (two_tensors_) return ops::broadcast_forward(kind_, c.inputs[0], c.inputs[1], c.output);
    ops::scale_shift(c.inputs[0], c.output, scale_, shift_);
  }
  void backward(LayerCall& c) override {
    if (two_tensors_)
      return ops::broadcast_backward(kind_, c.inputs[0], c.inputs[1], c.doutput, c.dinputs[0], c.dinputs[1]);
    if (c.dinputs[0].defined()) ops::scale_shift(c.doutput, c.dinputs[0], scale_, 0.0);
  }

 private:
  bool two_tensors_ = false;
  ops::BinaryKind kind_ = ops::BinaryKind::add;
  double constant_ = 0;
  bool constant_first_ = false;
  double scale_ = 1, shift_ = 0;
};
}  // namespace

std::shared_ptr<Layer> numpy_operation_from_entry(const std::string& class_name, const json& config,
                                                  const json& args) {
  std::string name = config.is_object() && config.contains("name") && config["name"].is_string()
                         ? config["name"].get<std::string>()
                         : "?";
  if (!config.is_object() || config.size() != 1 || !config.contains("name"))
    fail("operation '{}' (keras.src.ops.numpy.{}): its config must hold only its name, got {}", name,
         class_name, config.dump().substr(0, 200));
  auto is_tensor = [](const json& a) {
    return a.is_object() && a.value("class_name", "") == "__keras_tensor__";
  };
  if (args.is_array() && args.size() == 2 && is_tensor(args[0]) && is_tensor(args[1]))
    return std::make_shared<NumpyOperationLayer>(class_name, name);
  if (!args.is_array() || args.size() != 2 ||
      !((is_tensor(args[0]) && args[1].is_number()) || (args[0].is_number() && is_tensor(args[1]))))
    fail(
        "operation '{}' (keras.src.ops.numpy.{}): systolic runs it on one tensor and one number or on two "
        "tensors, got the arguments {}",
        name, class_name, args.dump().substr(0, 200));
  bool constant_first = args[0].is_number();
  double constant = args[constant_first ? 0 : 1].get<double>();
  return std::make_shared<NumpyOperationLayer>(class_name, name, constant, constant_first);
}

}  // namespace systolic::layers
