// Keras 3 operation nodes of keras.src.ops.numpy. With one tensor and one number (`x + 3.0`, `x * (1/6)`, as
// MobileNetV3's hard_sigmoid writes them): y = x*scale + shift through ops::scale_shift. With two tensors of one
// rank (`inputs + x`, ConvNeXt's residuals, `x / y`): NumPy's broadcasting add, subtract, multiply or divide through
// ops::broadcast_forward. With one tensor and a constant array (`x + positions`, where the positions' embedding was
// computed eagerly: Keras writes its value, a "__tensor__" argument): the same broadcasting op with the array, which
// broadcasts into the tensor (aligned on the right) and gets no gradient. Keras writes them as entries of the
// model's layers with module "keras.src.ops.numpy" and the numbers and arrays among the call's args; so does
// systolic (keras_module, keras_call_args). Like Keras's operations, they drop Keras's masks.
#include <systolic/error.h>
#include <systolic/layers.h>

#include <algorithm>
#include <functional>
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
  // One tensor and a constant array (its shape without a batch axis, or with one of 1), first or second.
  NumpyOperationLayer(const std::string& class_name, const std::string& name, Tensor array,
                      bool constant_first)
      : NumpyOperationLayer(class_name, name) {
    two_tensors_ = false;
    array_ = std::move(array);
    constant_first_ = constant_first;
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
    if (array_.defined()) {
      const Shape& a = array_.shape();
      bool fits = a.rank() <= in[0].rank() + 1 && (a.rank() <= in[0].rank() || a[0] == 1);
      for (int i = 1; fits && i <= std::min(a.rank(), in[0].rank()); ++i)
        fits = a[-i] == 1 || a[-i] == in[0][-i];
      if (!fits)
        fail_shape("the constant " + a.str() + " does not broadcast into input " + in[0].keras_str());
      return in[0];
    }
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
    if (array_.defined()) {
      json constant = {
          {"class_name", "__tensor__"},
          {"config", {{"value", nested(array_.to_doubles(), array_.shape(), 0, 0)}, {"dtype", "float32"}}}};
      args = constant_first_ ? json::array({constant, nullptr}) : json::array({nullptr, constant});
      return true;
    }
    if (two_tensors_)
      args = json::array({nullptr, nullptr});
    else
      args = constant_first_ ? json::array({constant_, nullptr}) : json::array({nullptr, constant_});
    return true;
  }

 protected:
  int input_count() const override { return two_tensors_ ? 2 : 1; }
  void build(const std::vector<Shape>& in) override { input_rank_ = in[0].rank(); }
  void reserve_batch(std::int64_t, Device device, DType dtype) override {
    if (array_.defined()) operand(device, dtype);
  }
  void forward(LayerCall& c) override {
    if (array_.defined()) {
      const Tensor& a = operand(c.inputs[0].device(), c.inputs[0].dtype());
      return constant_first_ ? ops::broadcast_forward(kind_, a, c.inputs[0], c.output)
                             : ops::broadcast_forward(kind_, c.inputs[0], a, c.output);
    }
    if (two_tensors_) return ops::broadcast_forward(kind_, c.inputs[0], c.inputs[1], c.output);
    ops::scale_shift(c.inputs[0], c.output, scale_, shift_);
  }
  void backward(LayerCall& c) override {
    if (array_.defined()) {
      if (!c.dinputs[0].defined()) return;
      const Tensor& a = operand(c.inputs[0].device(), c.inputs[0].dtype());
      Tensor none;
      return constant_first_ ? ops::broadcast_backward(kind_, a, c.inputs[0], c.doutput, none, c.dinputs[0])
                             : ops::broadcast_backward(kind_, c.inputs[0], a, c.doutput, c.dinputs[0], none);
    }
    if (two_tensors_)
      return ops::broadcast_backward(kind_, c.inputs[0], c.inputs[1], c.doutput, c.dinputs[0], c.dinputs[1]);
    if (c.dinputs[0].defined()) ops::scale_shift(c.doutput, c.dinputs[0], scale_, 0.0);
  }

 private:
  // The array as the op takes it: of the input's rank with its batch axis (1s in front), its dtype and device; made
  // once per device and dtype (reserve_batch makes it before a step is recorded).
  const Tensor& operand(Device device, DType dtype) {
    if (!operand_.defined() || operand_.device() != device || operand_.dtype() != dtype) {
      std::vector<std::int64_t> dims(static_cast<std::size_t>(input_rank()) + 1 - array_.shape().rank(), 1);
      for (int i = 0; i < array_.shape().rank(); ++i) dims.push_back(array_.shape()[i]);
      operand_ = array_.to(dtype).reshape(Shape(dims)).to(device);
    }
    return operand_;
  }
  int input_rank() const { return std::max(array_.shape().rank(), input_rank_); }
  // Keras's nested lists of an array's values (row-major), from axis `axis` at element `at`.
  static json nested(const std::vector<double>& v, const Shape& s, int axis, std::size_t at) {
    json out = json::array();
    std::size_t stride = 1;
    for (int i = axis + 1; i < s.rank(); ++i) stride *= static_cast<std::size_t>(s[i]);
    for (std::int64_t i = 0; i < s[axis]; ++i) {
      const std::size_t k = at + static_cast<std::size_t>(i) * stride;
      out.push_back(axis + 1 == s.rank() ? json(v[k]) : nested(v, s, axis + 1, k));
    }
    return out;
  }

  Tensor array_, operand_;
  int input_rank_ = 0;  // the input's rank without its batch axis (set by build)
  bool two_tensors_ = false;
  ops::BinaryKind kind_ = ops::BinaryKind::add;
  double constant_ = 0;
  bool constant_first_ = false;
  double scale_ = 1, shift_ = 0;
};
// A "__tensor__" argument's array: {"config": {"value": nested lists of numbers, "dtype": ...}}, rectangular.
Tensor constant_array(const json& arg, const std::string& name) {
  const json* value = arg.contains("config") && arg["config"].is_object() && arg["config"].contains("value")
                          ? &arg["config"]["value"]
                          : nullptr;
  auto bad = [&](const std::string& why) {
    fail("operation '{}': its constant array {}: {}", name, arg.dump().substr(0, 120), why);
  };
  if (!value) bad("no config.value");
  std::vector<std::int64_t> dims;
  for (const json* v = value; v->is_array(); v = &(*v)[0]) {
    dims.push_back(static_cast<std::int64_t>(v->size()));
    if (v->empty()) break;
  }
  if (dims.size() > 8) bad("more than 8 axes");
  std::vector<double> flat;
  std::function<void(const json&, std::size_t)> walk = [&](const json& v, std::size_t axis) {
    if (axis == dims.size()) {
      if (!v.is_number()) bad("a value that is not a number");
      flat.push_back(v.get<double>());
      return;
    }
    if (!v.is_array() || static_cast<std::int64_t>(v.size()) != dims[axis]) bad("not rectangular");
    for (auto& e : v) walk(e, axis + 1);
  };
  walk(*value, 0);
  if (dims.empty()) dims.push_back(1);  // a scalar array
  return Tensor::from_vector(flat, Shape(dims)).to(DType::float32);
}
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
  auto is_array = [](const json& a) { return a.is_object() && a.value("class_name", "") == "__tensor__"; };
  if (args.is_array() && args.size() == 2 &&
      ((is_tensor(args[0]) && is_array(args[1])) || (is_array(args[0]) && is_tensor(args[1])))) {
    const bool first = is_array(args[0]);
    return std::make_shared<NumpyOperationLayer>(class_name, name, constant_array(args[first ? 0 : 1], name),
                                                 first);
  }
  if (!args.is_array() || args.size() != 2 ||
      !((is_tensor(args[0]) && args[1].is_number()) || (args[0].is_number() && is_tensor(args[1]))))
    fail(
        "operation '{}' (keras.src.ops.numpy.{}): systolic runs it on one tensor and one number, one "
        "tensor and one array, or two tensors, got the arguments {}",
        name, class_name, args.dump().substr(0, 200));
  bool constant_first = args[0].is_number();
  double constant = args[constant_first ? 0 : 1].get<double>();
  return std::make_shared<NumpyOperationLayer>(class_name, name, constant, constant_first);
}

}  // namespace systolic::layers
