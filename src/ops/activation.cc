// Activation values: Keras's default parameters per kind, names (from SYSTOLIC_ACTIVATIONS), and which kinds'
// gradients need the forward input.
#include <systolic/error.h>
#include <systolic/ops.h>

#include <string>

namespace systolic {

Activation::Activation(Kind k) : kind(k) {
  switch (k) {
    case leaky_relu:  // keras.activations.leaky_relu(x, negative_slope=0.2)
      alpha = 0.2;
      break;
    case elu:
    case celu:
      alpha = 1.0;
      break;
    case soft_shrink:
    case hard_shrink:
      alpha = 0.5;
      break;
    case squareplus:
      alpha = 4.0;
      break;
    default:
      break;
  }
}

bool Activation::backward_needs_input() const {
  switch (kind) {
    case linear:
    case relu6:
    case sigmoid:
    case tanh:
    case softmax:
    case log_softmax:
    case exponential:
      return false;
    case relu:  // plain relu: y > 0 where x > 0
      return !(alpha == 0 && threshold == 0 && max_value == INFINITY);
    default:
      return true;
  }
}

Activation activation_from_name(const std::string& name) {
  if (name.empty()) return Activation::linear;
#define SYSTOLIC_ACTIVATION_FROM_NAME(kind, keras_name, alias) \
  if (name == keras_name || (*alias && name == alias)) return Activation::kind;
  SYSTOLIC_ACTIVATIONS(SYSTOLIC_ACTIVATION_FROM_NAME)
#undef SYSTOLIC_ACTIVATION_FROM_NAME
  std::string known;
#define SYSTOLIC_ACTIVATION_KNOWN(kind, keras_name, alias) \
  known += std::string(known.empty() ? "" : ", ") + keras_name + (*alias ? std::string(", ") + alias : "");
  SYSTOLIC_ACTIVATIONS(SYSTOLIC_ACTIVATION_KNOWN)
#undef SYSTOLIC_ACTIVATION_KNOWN
  fail("unknown activation '{}' (known: {})", name, known);
}

std::string activation_name(const Activation& a) {
  switch (a.kind) {
#define SYSTOLIC_ACTIVATION_NAME(kind, keras_name, alias) \
  case Activation::kind:                                  \
    return keras_name;
    SYSTOLIC_ACTIVATIONS(SYSTOLIC_ACTIVATION_NAME)
#undef SYSTOLIC_ACTIVATION_NAME
  }
  return "?";
}

}  // namespace systolic
