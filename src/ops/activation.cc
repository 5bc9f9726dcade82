#include <systolic/error.h>
#include <systolic/ops.h>

namespace systolic {

Activation activation_from_name(const std::string& name) {
  if (name.empty() || name == "linear") return Activation::linear;
  if (name == "relu") return Activation::relu;
  if (name == "sigmoid") return Activation::sigmoid;
  if (name == "tanh") return Activation::tanh;
  if (name == "softmax") return Activation::softmax;
  fail("unknown activation '{}' (known: linear, relu, sigmoid, tanh, softmax)", name);
}

std::string activation_name(Activation a) {
  switch (a) {
    case Activation::linear: return "linear";
    case Activation::relu: return "relu";
    case Activation::sigmoid: return "sigmoid";
    case Activation::tanh: return "tanh";
    case Activation::softmax: return "softmax";
  }
  return "?";
}

}  // namespace systolic
