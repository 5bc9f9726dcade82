// The Layer base: naming, building on the first call, weights, and the fused activation that Conv2D, Dense,
// Activation, ReLU and Softmax share (so a loss can take the output layer's logits, as Keras does).
#include <systolic/layer.h>

#include <cmath>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

namespace systolic {

namespace {
struct Session {
  std::mutex mutex;
  std::map<std::string, int> counters;
  std::int64_t next_node_id = 0;
  DType floatx = DType::float32;
  bool mixed_bfloat16 = false;
};
Session& session() {
  static Session s;
  return s;
}
}  // namespace

void set_floatx(DType dtype) {
  SYSTOLIC_CHECK(dtype == DType::float32 || dtype == DType::float64,
                 "set_floatx: {} is not a float type for layers", dtype_name(dtype));
  session().floatx = dtype;
}
DType floatx() {
  return session().floatx;
}

namespace mixed_precision {
void set_global_policy(const std::string& name) {
  if (name == "mixed_bfloat16") {
    SYSTOLIC_CHECK(floatx() == DType::float32,
                   "set_global_policy('mixed_bfloat16') needs floatx float32, not {}", dtype_name(floatx()));
    session().mixed_bfloat16 = true;
  } else if (name == "float32" || name == dtype_name(floatx())) {
    session().mixed_bfloat16 = false;
  } else {
    fail("set_global_policy: policy '{}' is not supported (float32 or mixed_bfloat16)", name);
  }
}
std::string global_policy() {
  return session().mixed_bfloat16 ? "mixed_bfloat16" : std::string(dtype_name(floatx()));
}
PolicyScope::PolicyScope(const std::string& name) : previous_(global_policy()) {
  set_global_policy(name);
}
PolicyScope::~PolicyScope() {
  set_global_policy(previous_);
}
}  // namespace mixed_precision

std::string unique_layer_name(const std::string& prefix, bool zero_based) {
  std::lock_guard lock(session().mutex);
  int n = session().counters[prefix]++;
  if (!zero_based) return prefix + "_" + std::to_string(n + 1);
  return n == 0 ? prefix : prefix + "_" + std::to_string(n);
}

void clear_session() {
  std::lock_guard lock(session().mutex);
  session().counters.clear();
}

std::string to_snake_case(const std::string& name) {
  // Keras: re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name), then re.sub("([a-z])([A-Z])", r"\1_\2", ...).lower()
  std::string s = std::regex_replace(name, std::regex("(.)([A-Z][a-z]+)"), "$1_$2");
  s = std::regex_replace(s, std::regex("([a-z])([A-Z])"), "$1_$2");
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const Shape& SymbolicTensor::shape() const {
  SYSTOLIC_CHECK(node_, "use of an undefined symbolic tensor");
  return node_->shape;
}
DType SymbolicTensor::dtype() const {
  SYSTOLIC_CHECK(node_, "use of an undefined symbolic tensor");
  return node_->dtype;
}

Layer::Layer(std::string class_name, const std::string& name, Activation activation)
    : activation_(activation),
      class_name_(std::move(class_name)),
      name_(name.empty() ? unique_layer_name(to_snake_case(class_name_)) : name),
      dtype_(floatx()),
      compute_dtype_(session().mixed_bfloat16 ? DType::bfloat16 : floatx()) {}

std::string Layer::keras3_key() const {
  return to_snake_case(class_name_);
}

std::string Layer::dtype_policy() const {
  return compute_dtype_ == dtype_ ? std::string(dtype_name(dtype_))
                                  : "mixed_" + std::string(dtype_name(compute_dtype_));
}

SymbolicTensor Layer::operator()(const SymbolicTensor& input) {
  return (*this)(std::vector<SymbolicTensor>{input});
}

Shape Layer::build_for(const std::vector<Shape>& shapes) {
  Shape out = compute_output_shape(shapes);
  // The inputs a layer is built for: all, or those it always takes when it takes more optionally (an RNN's initial
  // states, checked by compute_output_shape).
  const int want = input_count();
  const std::size_t fixed =
      want >= 0 && max_input_count() > want ? static_cast<std::size_t>(want) : shapes.size();
  if (!built_) {
    build(shapes);
    built_shapes_ = shapes;
    built_ = true;
  } else if (!std::equal(built_shapes_.begin(), built_shapes_.begin() + std::min(fixed, built_shapes_.size()),
                         shapes.begin(), shapes.begin() + std::min(fixed, shapes.size()))) {
    fail_shape("it was built for input shape " + built_shapes_[0].keras_str() + " and is now called on " +
               shapes[0].keras_str());
  }
  return out;
}

void Layer::adapt(const Tensor&) {
  fail("layer '{}' ({}) has no adapt(): only preprocessing layers (Normalization) compute state from data",
       name_, class_name_);
}

void Layer::read_keras_call(std::size_t, const std::vector<std::string>& tensor_keywords,
                            const nlohmann::ordered_json& options) {
  if (!tensor_keywords.empty())
    fail("layer '{}' ({}): call argument '{}' is not supported", name_, class_name_, tensor_keywords[0]);
  for (auto& [k, v] : options.items())
    fail("layer '{}' ({}): call argument '{}'={} is not supported", name_, class_name_, k, v.dump());
}

SymbolicTensor Layer::operator()(const std::vector<SymbolicTensor>& inputs) {
  return call_all(inputs)[0];
}

std::vector<SymbolicTensor> Layer::call_all(const std::vector<SymbolicTensor>& inputs) {
  const int want = input_count(), most = max_input_count(), given = static_cast<int>(inputs.size());
  if (want < 0)
    SYSTOLIC_CHECK(given >= 2, "layer '{}' ({}) takes at least 2 inputs, got {}", name_, class_name_, given);
  else if (most > want)
    SYSTOLIC_CHECK(given >= want && given <= most, "layer '{}' ({}) takes {} to {} inputs, got {}", name_,
                   class_name_, want, most, given);
  else
    SYSTOLIC_CHECK(given == want, "layer '{}' ({}) takes {} input(s), got {}", name_, class_name_, want,
                   given);
  std::vector<Shape> shapes;
  for (auto& in : inputs) {
    SYSTOLIC_CHECK(in.defined(), "layer '{}' called on an undefined tensor", name_);
    shapes.push_back(in.shape());
  }
  Shape out = build_for(shapes);
  auto node = std::make_shared<Node>();
  node->layer = shared_from_this();
  node->inputs = inputs;
  node->shape = out;
  node->dtype = compute_dtype_;
  node->id = next_node_id();
  std::vector<SymbolicTensor> outs{SymbolicTensor(node)};
  // The other outputs: a node each, on the first (Node::output).
  int k = 0;
  for (auto& shape : more_output_shapes(shapes)) {
    auto more = std::make_shared<Node>();
    more->layer = node->layer;
    more->inputs = {outs[0]};
    more->shape = shape;
    more->dtype = compute_dtype_;
    more->id = next_node_id();
    more->output = ++k;
    outs.emplace_back(more);
  }
  return outs;
}

std::int64_t next_node_id() {
  std::lock_guard lock(session().mutex);
  return session().next_node_id++;
}

std::vector<Weight*> all_weights(Layer& layer) {
  std::vector<Weight*> out;
  for (auto& w : layer.weights()) out.push_back(&w);
  for (auto& l : layer.sublayers())
    for (auto* w : all_weights(*l)) out.push_back(w);
  return out;
}

void Layer::fail_shape(const std::string& why) const {
  fail("layer '{}' ({}): {}", name_, class_name_, why);
}

Weight& Layer::add_weight(const std::string& name, Shape shape, const Initializer& initializer,
                          bool trainable, const WeightOptions& options) {
  Weight w;
  w.name = name;
  w.trainable_variable = trainable;
  w.trainable = trainable && trainable_;
  w.regularizer = options.regularizer;
  w.constraint = options.constraint;
  w.value = Tensor(shape, dtype_);
  Generator g(global_generator().split());
  initialize(w.value, initializer, g);
  if (w.trainable) w.grad = Tensor::zeros(shape, dtype_);
  // Keras order: trainable weights first, then non-trainable, each in creation order (freezing keeps it).
  auto at = weights_.end();
  if (trainable)
    at =
        std::find_if(weights_.begin(), weights_.end(), [](const Weight& x) { return !x.trainable_variable; });
  return *weights_.insert(at, std::move(w));
}

void Layer::set_trainable(bool trainable) {
  trainable_ = trainable;
  for (auto& w : weights_) {
    bool t = w.trainable_variable && trainable;
    if (t == w.trainable) continue;
    w.trainable = t;
    // A model that packs its weights gives the trainable ones views of its buffers when it is compiled again.
    w.grad = t ? Tensor::zeros(w.value.shape(), w.value.dtype(), w.value.device()) : Tensor();
  }
}

std::int64_t Layer::count_params() const {
  std::int64_t n = 0;
  for (auto& w : weights_) n += w.value.numel();
  return n;
}

std::int64_t Layer::count_trainable_params() const {
  std::int64_t n = 0;
  for (auto& w : weights_)
    if (w.trainable) n += w.value.numel();
  return n;
}

void Layer::call_forward(LayerCall& call) {
  forward(call);
  if (activation_ == Activation::linear || fuses_activation()) return;
  if (activation_.kind != Activation::softmax && !activation_.backward_needs_input()) {
    ops::activation_forward(activation_, call.output, call.output);
    return;
  }
  // The pre-activation values stay (the loss's logits; the input of the activation's gradient): the activation
  // writes a second buffer, which becomes the output. The buffer only grows, so a smaller last batch does not
  // move it (a captured step graph holds its address).
  Tensor& buf = call.activated;
  if (!buf.defined() || buf.numel() < call.output.numel() || buf.device() != call.output.device() ||
      buf.dtype() != call.output.dtype())
    buf = Tensor({call.output.numel()}, call.output.dtype(), call.output.device());
  call.preactivation = call.output;
  call.output = buf.view(0, call.preactivation.shape());
  ops::activation_forward(activation_, call.preactivation, call.output);
}

void Layer::call_backward(LayerCall& call, bool grad_is_preactivation) {
  if (activation_ != Activation::linear && !grad_is_preactivation)
    ops::activation_backward(activation_, call.preactivation, call.output, call.doutput, call.doutput);
  backward(call);
}

}  // namespace systolic
