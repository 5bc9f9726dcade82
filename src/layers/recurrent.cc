// SimpleRNN, LSTM and GRU (Keras 3), and the recurrence they share with Bidirectional (recurrent.h). The weights are
// the cell's, named as Keras names them ("lstm_cell/kernel": Keras's variable path lstm/lstm_cell/kernel, tf.keras's
// .h5 name lstm/lstm_cell/kernel:0), and Keras 3's weights files keep them under the layer's cell/vars.
#include "layers/recurrent.h"

#include <algorithm>

#include "core/philox.h"
#include "ops/rnn_math.h"

namespace systolic::layers {

using ops::RnnCell;

namespace {

// Step s of a time-major buffer [steps, N, width].
Tensor step(const Tensor& t, std::int64_t s, std::int64_t width, std::int64_t N) {
  return t.view(s * N * width, {N, width});
}

// The mask [N, T] time-major in x's dtype, kept in saved[16] (undefined without a mask).
Tensor time_major_mask(const RecurrentSpec& s, const Tensor& mask, const Tensor& x,
                       std::vector<Tensor>& saved) {
  if (!mask.defined()) {
    saved[16] = Tensor();
    return {};
  }
  const std::int64_t N = x.dim(0), T = x.dim(1);
  SYSTOLIC_CHECK(mask.numel() == N * T, "{}: a mask of shape {} for sequences {}", s.class_name,
                 mask.shape().str(), x.shape().str());
  reuse_or_allocate(saved, 16, {{T, N}}, x);
  Tensor m = mask.view(0, {N, T});
  if (m.dtype() != x.dtype()) {
    reuse_or_allocate(saved, 17, {{N, T}}, x);
    ops::cast(m, saved[17]);
    m = saved[17];
  }
  ops::transpose(m, saved[16], {1, 0});
  return saved[16];
}
Tensor mask_at(const Tensor& mt, std::int64_t t, std::int64_t N) {
  return mt.defined() ? mt.view(t * N, {N}) : Tensor();
}
// Keras's zero_output_for_mask: the masked steps' outputs are zeros (with return_sequences). A layer that runs
// backwards gives its outputs in the order of its steps, and would zero them by the mask reversed: refused.
bool zeroes_masked_outputs(const RecurrentSpec& s, const Tensor& mask) {
  if (!mask.defined() || !s.options.return_sequences || !s.options.zero_output_for_mask) return false;
  SYSTOLIC_CHECK(!s.options.go_backwards || s.flip_sequences,
                 "{}: zero_output_for_mask with go_backwards and a mask is not supported yet", s.class_name);
  return true;
}
// The mask as [N, T, 1], to multiply outputs [N, T, u] by.
Tensor output_mask(const Tensor& mask) {
  return mask.view(0, {mask.dim(0), mask.numel() / mask.dim(0), 1});
}

// GRU's bias with reset_after (2, 3u): row 0 the input's, row 1 the recurrent product's; the others' bias (GRU's
// without reset_after too) is the input's alone.
bool two_biases(const RecurrentSpec& s) {
  return s.cell == RnnCell::gru && s.options.reset_after;
}
// GRU without reset_after: the candidate's recurrent product reads r * h_prev.
bool reset_before(const RecurrentSpec& s) {
  return s.cell == RnnCell::gru && !s.options.reset_after;
}
Tensor input_part(const RecurrentSpec& s, const Tensor& bias) {
  if (!bias.defined()) return {};
  return two_biases(s) ? bias.view(0, {ops::rnn_math::gates(s.cell) * s.units}) : bias;
}
Tensor recurrent_part(const RecurrentSpec& s, const Tensor& bias) {
  if (!bias.defined() || !two_biases(s)) return {};
  return bias.view(ops::rnn_math::gates(s.cell) * s.units, {ops::rnn_math::gates(s.cell) * s.units});
}

// Keras's dropout (DropoutRNNCell): the masks, drawn once per call and used at every step, live in `saved` after the
// recurrence's own tensors (0-18, listed at recurrent_forward and recurrent_backward).
// The slots' contents: Gi input masks (1, or G with gate_masks), G the cell's gates, u its units.
//   kInputMasks [Gi, N, F], kStateMasks [G, N, u] (recurrent.h); kInputOnes, kStateOnes: what they are drawn over;
//   kMaskedInput [N, T, F]: x times the one input mask; kGateInputs [G, T, N, F]: x (time-major) times each gate's;
//   kGateKernels [G, F, u]: the kernel's blocks; kGateProducts [G, T*N, u]: each gate's input product (backward:
//   the gradients of the gates' products); kStateKernels [G, u, u]: the recurrent kernel's blocks; kMaskedStates
//   [G, T, N, u]: each step's state times each gate's mask; kStepProducts [G, N, u]: one step's products of those
//   (backward: their gradients); kStepStateGrad, kStepStateGradMasked [N, u]: one gate's masked state's gradient,
//   and it times the mask; kGateInputGrad, kGateInputGradMasked [T, N, F]: likewise for the input; kGateKernelGrads
//   [G, F, u], kKernelGrad [F, G*u], kStateKernelGrads [G, u, u], kStateKernelGrad [u, G*u]: the kernels' gradients.
// GRU without reset_after runs the gates' products apart too (the candidate's reads r * h): kResetPre, kReset
// [T, N, u]: r's pre-activation and r at each step; kResetTemp, kResetStateGrad [N, u]: backward's temporaries;
// kStepInputGrads [G, N, u]: one step's input-product gradients by gate. Its kMaskedStates' third block holds
// r * h (times the mask).
enum DropoutSlot : std::size_t {
  kInputMasks = kRecurrentInputMasks,
  kStateMasks = kRecurrentStateMasks,
  kInputOnes,
  kStateOnes,
  kMaskedInput,
  kGateInputs,
  kGateKernels,
  kGateProducts,
  kStateKernels,
  kMaskedStates,
  kStepProducts,
  kStepStateGrad,
  kStepStateGradMasked,
  kGateInputGrad,
  kGateInputGradMasked,
  kGateKernelGrads,
  kKernelGrad,
  kStateKernelGrads,
  kStateKernelGrad,
  kResetPre,
  kReset,
  kResetStateGrad,
  kResetTemp,
  kStepInputGrads,
  // The whole recurrence as one op (ops::rnn_sequence_forward; whole_forward below): kWholeY [T, N, u] its
  // outputs, time-major in time order, defined only when forward ran it (backward's sign of which path ran);
  // kWholeWorkspace the op's workspace (training); kWholeDy [T, N, u] the outputs' gradient as the op takes it;
  // kWholeDhLast [N, u] the last state's; kWholeSteps [T, N, u] the outputs in the order of the steps;
  // kWholeInitial [S, N, u] the initial states given (h, then an LSTM's c; undefined: none), kept for backward (a
  // stateful layer's are overwritten by the call's final states); kWholeFinal [S, N, u] the final states.
  kWholeY,
  kWholeWorkspace,
  kWholeDy,
  kWholeDhLast,
  kWholeSteps,
  kWholeInitial,
  kWholeFinal,
  kSlots
};
static_assert(kStateMasks == kInputMasks + 1 && kSlots == kRecurrentSaved);

bool drops(double rate) {
  return rate > 0 && rate < 1;
}  // Keras: `if training and 0.0 < rate < 1.0`
double clamped_rate(double r) {
  return !(r > 0) ? 0.0 : r > 1 ? 1.0 : r;
}
std::int64_t gate_count(const RecurrentSpec& s) {
  return ops::rnn_math::gates(s.cell);
}

// The g-th of a [G, ...] buffer's blocks, each of `shape`.
Tensor block(const Tensor& t, std::int64_t g, const Shape& shape) {
  return t.view(g * shape.numel(), shape);
}
std::vector<Tensor> blocks(const Tensor& t, std::int64_t G, const Shape& shape) {
  std::vector<Tensor> b;
  for (std::int64_t g = 0; g < G; ++g) b.push_back(block(t, g, shape));
  return b;
}
// Gate g's u values of a bias (undefined without one).
Tensor bias_block(const Tensor& bias, std::int64_t g, std::int64_t u) {
  return bias.defined() ? bias.view(g * u, {u}) : Tensor();
}

// Whether gate g's recurrent product reads states kept in kMaskedStates (the state times its mask, or GRU's r * h
// without reset_after) rather than the states h themselves.
bool kept_gate_states(const Tensor& state_masks, bool before, std::int64_t g) {
  return state_masks.defined() || (before && g == 2);
}

// Draws this call's masks into saved[kInputMasks] and saved[kStateMasks] (undefined for what is not dropped):
// dropout_forward over ones, keyed by the layer's seed (the replica's) and the training step.
void draw_masks(const RecurrentSpec& s, const TrainingStep* training, const Tensor& x,
                std::vector<Tensor>& saved) {
  const std::int64_t N = x.dim(0), F = x.dim(2), G = gate_count(s);
  auto draw = [&](std::size_t slot, std::size_t ones, Shape shape, double rate, std::uint64_t seed) {
    reuse_or_allocate(saved, ones, {shape}, x);
    ops::fill(saved[ones], 1.0);
    reuse_or_allocate(saved, slot, {shape}, x);
    ops::dropout_forward(saved[ones], saved[slot], rate, philox::replica_seed(seed, training->replica),
                         training->counter);
  };
  saved[kInputMasks] = saved[kStateMasks] = Tensor();
  if (!training) return;
  if (drops(s.options.dropout))
    draw(kInputMasks, kInputOnes, {s.gate_masks ? G : 1, N, F}, s.options.dropout, s.seed);
  if (drops(s.options.recurrent_dropout))
    draw(kStateMasks, kStateOnes, {G, N, s.units}, s.options.recurrent_dropout,
         philox::mix64(s.seed ^ 0x5DEECE66Dull));
}

class RecurrentLayer final : public Layer {
 public:
  explicit RecurrentLayer(RecurrentSpec s, const std::string& name)
      : Layer(s.class_name, name), s_(std::move(s)) {
    set_activity_regularizer(s_.options.activity_regularizer);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    auto why = recurrent_shape_error(in[0]);
    if (!why.empty()) fail_shape(why);
    check_initial_states(s_, in, 1, [this](const std::string& w) { fail_shape(w); });
    return recurrent_output_shape(s_, in[0]);
  }
  // return_state: the final states, h then (LSTM) c.
  std::vector<Shape> more_output_shapes(const std::vector<Shape>&) const override {
    if (!s_.options.return_state) return {};
    return std::vector<Shape>(state_count(s_), Shape{s_.units});
  }
  // initial_state: the inputs after the sequences.
  int max_input_count() const override { return 1 + static_cast<int>(state_count(s_)); }
  const char* keras_list_argument() const override { return "initial_state"; }
  std::vector<VariableGroup> keras3_variable_groups() const override {
    return {{"vars", 0}, {"cell/vars", weights().size()}};
  }
  void get_config(json& c) const override {
    Layer::get_config(c);
    write_recurrent_config(s_, c);
  }
  const RecurrentSpec& spec() const { return s_; }

 protected:
  void build(const std::vector<Shape>& in) override {
    add_recurrent_weights(
        s_, in[0][1], "",
        [this](const std::string& n, Shape sh, const Initializer& i, const WeightOptions& o) -> Weight& {
          return add_weight(n, std::move(sh), i, true, o);
        });
  }
  // Keras's RNN passes its input's mask on with return_sequences.
  bool output_masked(bool input_masked) const override { return input_masked && s_.options.return_sequences; }
  void forward(LayerCall& c) override {
    RecurrentStates states;
    states.initial.assign(c.inputs.begin() + 1, c.inputs.end());
    states.final = c.more_outputs;
    if (s_.options.stateful) {
      // Keras's stateful: the states kept from the last call start this one (unless states are given), and this
      // call's final states are kept.
      std::vector<Tensor>& kept = kept_.for_input(s_, *this, c.inputs[0]);
      if (states.initial.empty()) states.initial = kept;
      states.final = kept;
    }
    recurrent_forward(s_, cell_weights(), c.inputs[0], steps_mask(c), c.training, c.output, c.saved, &states);
    if (s_.options.stateful)
      for (std::size_t k = 0; k < c.more_outputs.size(); ++k)
        if (Tensor out = c.more_outputs[k]; out.defined()) ops::copy(kept_.states()[k], out);
  }
  void reset_state() override { kept_.reset(); }
  void reserve_batch(std::int64_t batch, Device device, DType dtype) override {
    if (s_.options.stateful) kept_.reserve(s_, batch, device, dtype);
  }
  void backward(LayerCall& c) override {
    RecurrentStates states;
    states.dfinal = c.more_doutputs;
    states.dinitial.assign(c.dinputs.begin() + 1, c.dinputs.end());
    recurrent_backward(s_, cell_weights(), c.doutput, steps_mask(c), c.dinputs[0], c.saved, &states);
  }

 private:
  RecurrentWeights cell_weights() {
    auto& w = weights();
    return {&w[0], &w[1], s_.options.use_bias ? &w[2] : nullptr};
  }
  RecurrentSpec s_;
  KeptStates kept_;
};

}  // namespace

const RecurrentSpec* recurrent_spec_of(const Layer& layer) {
  auto* r = dynamic_cast<const RecurrentLayer*>(&layer);
  return r ? &r->spec() : nullptr;
}

const char* recurrent_cell_name(RnnCell k) {
  return k == RnnCell::lstm ? "lstm_cell" : k == RnnCell::gru ? "gru_cell" : "simple_rnn_cell";
}

RecurrentSpec recurrent_spec(const char* class_name, RnnCell cell, int units, const RecurrentOptions& o) {
  const std::string name = o.name.empty() ? class_name : o.name;
  SYSTOLIC_CHECK(units > 0, "layer '{}': units must be positive, got {}", name, units);
  RecurrentSpec s{.class_name = class_name, .cell = cell, .units = units, .options = o};
  s.params.cell = cell;
  s.params.activation = activation_from_name(o.activation);
  s.params.recurrent_activation = activation_from_name(o.recurrent_activation);
  for (const systolic::Activation& a : {s.params.activation, s.params.recurrent_activation})
    SYSTOLIC_CHECK(!a.over_last_axis(),
                   "layer '{}': {} works over rows; a recurrent cell's activations act on each value", name,
                   activation_name(a));
  s.params.reset_after = cell != RnnCell::gru || o.reset_after;
  s.options.dropout = clamped_rate(o.dropout);
  s.options.recurrent_dropout = clamped_rate(o.recurrent_dropout);
  // Keras 3 runs implementation 1 (a mask per gate) whenever recurrent_dropout is set.
  s.gate_masks = s.options.recurrent_dropout != 0;
  // Drawn only when a mask will be, so that a layer without dropout leaves the global generator as it was.
  if (drops(s.options.dropout) || drops(s.options.recurrent_dropout))
    s.seed = o.seed ? *o.seed : global_generator().split();
  return s;
}

void check_initial_states(const RecurrentSpec& s, const std::vector<Shape>& in, std::size_t first,
                          const std::function<void(const std::string&)>& fail_with) {
  if (in.size() <= first) return;
  const std::size_t n = state_count(s);
  if (in.size() - first != n)
    fail_with(fmt::format("initial_state takes {} state(s) (h{}), got {}", n, n == 2 ? ", c" : "",
                          in.size() - first));
  for (std::size_t k = first; k < in.size(); ++k)
    if (in[k] != Shape{s.units})
      fail_with("an initial state has shape " + Shape{s.units}.keras_str() + ", got " + in[k].keras_str());
}

Tensor steps_mask(const LayerCall& c) {
  return c.inputs.size() > 1 ? Tensor() : c.mask;
}

std::string recurrent_shape_error(const Shape& in) {
  return in.rank() == 2 ? "" : "expects sequences (steps, features), got " + in.keras_str();
}

Shape recurrent_output_shape(const RecurrentSpec& s, const Shape& in) {
  return s.options.return_sequences ? Shape{in[0], s.units} : Shape{s.units};
}

void write_recurrent_config(const RecurrentSpec& s, json& c) {
  const RecurrentOptions& o = s.options;
  c["return_sequences"] = o.return_sequences;
  c["return_state"] = o.return_state;
  c["go_backwards"] = o.go_backwards;
  c["stateful"] = o.stateful;
  c["unroll"] = o.unroll;
  c["zero_output_for_mask"] = o.zero_output_for_mask;
  c["units"] = s.units;
  c["activation"] = o.activation;
  if (s.cell != RnnCell::simple) c["recurrent_activation"] = o.recurrent_activation;
  c["use_bias"] = o.use_bias;
  c["kernel_initializer"] = initializer_config(o.kernel_initializer);
  c["recurrent_initializer"] = initializer_config(o.recurrent_initializer);
  c["bias_initializer"] = initializer_config(o.bias_initializer);
  if (s.cell == RnnCell::lstm) c["unit_forget_bias"] = o.unit_forget_bias;
  c["kernel_regularizer"] = regularizer_config(o.kernel_regularizer);
  c["recurrent_regularizer"] = regularizer_config(o.recurrent_regularizer);
  c["bias_regularizer"] = regularizer_config(o.bias_regularizer);
  if (!c.contains("activity_regularizer")) c["activity_regularizer"] = nullptr;  // base_config wrote one set
  c["kernel_constraint"] = constraint_config(o.kernel_constraint);
  c["recurrent_constraint"] = constraint_config(o.recurrent_constraint);
  c["bias_constraint"] = constraint_config(o.bias_constraint);
  c["dropout"] = o.dropout;
  c["recurrent_dropout"] = o.recurrent_dropout;
  if (s.cell == RnnCell::gru) c["reset_after"] = o.reset_after;
  if (s.cell != RnnCell::simple) c["seed"] = o.seed ? json(*o.seed) : json(nullptr);
}

RecurrentSpec recurrent_spec_from_config(ConfigReader& r, const std::string& class_name) {
  const RnnCell cell = class_name == "LSTM"  ? RnnCell::lstm
                       : class_name == "GRU" ? RnnCell::gru
                                             : RnnCell::simple;
  const char* name = cell == RnnCell::lstm ? "LSTM" : cell == RnnCell::gru ? "GRU" : "SimpleRNN";
  SYSTOLIC_CHECK(class_name == name, "layer '{}': {} is not a recurrent layer (SimpleRNN, LSTM, GRU)",
                 r.name(), class_name);
  if (!r.has("units")) r.fail_option("units", "missing");
  RecurrentOptions o;
  o.return_sequences = r.get_bool("return_sequences", false);
  o.return_state = r.get_bool("return_state", false);
  o.go_backwards = r.get_bool("go_backwards", false);
  o.stateful = r.get_bool("stateful", false);
  o.unroll = r.get_bool("unroll", false);
  o.zero_output_for_mask = r.get_bool("zero_output_for_mask", false);
  r.require_value("time_major", false);  // tf.keras
  o.activation = r.get_activation("activation", "tanh");
  if (cell != RnnCell::simple) o.recurrent_activation = r.get_activation("recurrent_activation", "sigmoid");
  o.use_bias = r.get_bool("use_bias", true);
  o.kernel_initializer = r.get_initializer("kernel_initializer", "glorot_uniform");
  o.recurrent_initializer = r.get_initializer("recurrent_initializer", "orthogonal");
  o.bias_initializer = r.get_initializer("bias_initializer", "zeros");
  if (cell == RnnCell::lstm) o.unit_forget_bias = r.get_bool("unit_forget_bias", true);
  o.kernel_regularizer = r.get_regularizer("kernel_regularizer");
  o.recurrent_regularizer = r.get_regularizer("recurrent_regularizer");
  o.bias_regularizer = r.get_regularizer("bias_regularizer");
  o.kernel_constraint = r.get_constraint("kernel_constraint");
  o.recurrent_constraint = r.get_constraint("recurrent_constraint");
  o.bias_constraint = r.get_constraint("bias_constraint");
  o.dropout = r.get_double("dropout", 0.0);
  o.recurrent_dropout = r.get_double("recurrent_dropout", 0.0);
  if (cell == RnnCell::gru) o.reset_after = r.get_bool("reset_after", true);
  if (auto seed = r.get_optional_int("seed")) o.seed = static_cast<std::uint64_t>(*seed);
  // tf.keras (and Keras 3's constructor): how the gates' products are grouped; the same values, except that
  // implementation 1 draws an input dropout mask per gate.
  const auto implementation = r.get_optional_int("implementation");
  r.ignore("use_cudnn");  // Keras 3: which kernel runs, not what it computes
  o.name = r.name();
  RecurrentSpec s = recurrent_spec(name, cell, r.get_int("units", 0), o);
  if (implementation && *implementation == 1) s.gate_masks = true;
  return s;
}

void add_recurrent_weights(const RecurrentSpec& s, std::int64_t features, const std::string& prefix,
                           const AddWeight& add) {
  const RecurrentOptions& o = s.options;
  const std::string cell = prefix + recurrent_cell_name(s.cell);
  const std::int64_t G = ops::rnn_math::gates(s.cell) * s.units;
  add(cell + "/kernel", {features, G}, o.kernel_initializer, {o.kernel_regularizer, o.kernel_constraint});
  add(cell + "/recurrent_kernel", {s.units, G}, o.recurrent_initializer,
      {o.recurrent_regularizer, o.recurrent_constraint});
  if (!o.use_bias) return;
  Shape bias = two_biases(s) ? Shape{2, G} : Shape{G};
  Weight& b = add(cell + "/bias", bias, o.bias_initializer, {o.bias_regularizer, o.bias_constraint});
  // Keras's unit_forget_bias: the forget gate's bias (the second of i, f, c, o) starts at 1.
  if (s.cell == RnnCell::lstm && o.unit_forget_bias) b.value.view(s.units, {s.units}).fill(1.0);
}

// saved: 0 the input time-major [T, N, F]; 1 its products x W + b [T, N, G*u]; 2 the states h [T+1, N, u]; 3 the
// cell states c [T+1, N, u] (LSTM); 4 the pre-activations [T, N, G*u]; 5 the recurrent products h W_r (+ b_r)
// [T, N, G*u].
void reuse_or_allocate(std::vector<Tensor>& buffers, std::size_t first, const std::vector<Shape>& shapes,
                       const Tensor& like) {
  buffers.resize(std::max(buffers.size(), first + shapes.size()));
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    Tensor& b = buffers[first + i];
    if (!b.defined() || b.shape() != shapes[i] || b.dtype() != like.dtype() || !(b.device() == like.device()))
      b = Tensor(shapes[i], like.dtype(), like.device());
  }
}

namespace {

// Whether the recurrence runs as one op (ops::rnn_sequence_forward: oneDNN's RNN primitives on the CPU) rather
// than step by step: the backend has it for the dtype, the cell has Keras's default activations, no mask, and no
// dropout other than the input's one mask (x times it is the op's input).
bool runs_whole(const RecurrentSpec& s, const Tensor& x, const Tensor& mask,
                const std::vector<Tensor>& saved) {
  const Tensor& in_masks = saved[kInputMasks];
  return !mask.defined() && !saved[kStateMasks].defined() && (!in_masks.defined() || in_masks.dim(0) == 1) &&
         ops::rnn_sequence_takes(s.params) &&
         ops::supports(ops::Op::rnn_sequence_forward, x.dtype(), x.device());
}
// x [N, T, F] time-major into saved[0], times the input's one dropout mask when there is one (the same mask [N, F]
// at every step, in saved[kMaskedInput]).
void time_major_input(const Tensor& x, std::vector<Tensor>& saved) {
  const Tensor& in_masks = saved[kInputMasks];
  if (!in_masks.defined() || in_masks.dim(0) != 1) return ops::transpose(x, saved[0], {1, 0, 2});
  reuse_or_allocate(saved, kMaskedInput, {x.shape()}, x);
  ops::broadcast_forward(ops::BinaryKind::multiply, x, in_masks.view(0, {x.dim(0), 1, x.dim(2)}),
                         saved[kMaskedInput]);
  ops::transpose(saved[kMaskedInput], saved[0], {1, 0, 2});
}
// dx [N, T, F] from its time-major dxt, through time_major_input's mask.
void input_gradient(const Tensor& dxt, Tensor& dx, const std::vector<Tensor>& saved) {
  ops::transpose(dxt, dx, {1, 0, 2});
  const Tensor& in_masks = saved[kInputMasks];
  if (in_masks.defined() && in_masks.dim(0) == 1)
    ops::broadcast_forward(ops::BinaryKind::multiply, dx, in_masks.view(0, {dx.dim(0), 1, dx.dim(2)}), dx);
}
// The steps' outputs run in reverse time (go_backwards) but wanted in the order of the steps: time T-1-k at k.
bool steps_reversed(const RecurrentSpec& s) {
  return s.options.go_backwards && !s.flip_sequences;
}
// [T, N, u] time-major, its steps in reverse order, into `out`.
void reverse_steps(const Tensor& in, Tensor& out) {
  const std::int64_t T = in.dim(0), N = in.dim(1), u = in.dim(2);
  for (std::int64_t k = 0; k < T; ++k) {
    Tensor to = step(out, T - 1 - k, u, N);
    ops::copy(step(in, k, u, N), to);
  }
}
const Tensor& state_or_none(const std::vector<Tensor>& states, std::size_t k) {
  static const Tensor none;
  return k < states.size() ? states[k] : none;
}
// State k ([N, u]) of a [S, N, u] buffer, or undefined with the buffer (or for an LSTM's c of another cell).
Tensor state_of(const Tensor& states, std::size_t k) {
  if (!states.defined() || static_cast<std::int64_t>(k) >= states.dim(0)) return {};
  return states.view(static_cast<std::int64_t>(k) * states.dim(1) * states.dim(2),
                     {states.dim(1), states.dim(2)});
}

void whole_forward(const RecurrentSpec& s, const RecurrentWeights& w, const Tensor& x,
                   const TrainingStep* training, Tensor& y, std::vector<Tensor>& saved,
                   const RecurrentStates* states) {
  const std::int64_t N = x.dim(0), T = x.dim(1), F = x.dim(2), u = s.units;
  reuse_or_allocate(saved, 0, {{T, N, F}}, x);
  reuse_or_allocate(saved, kWholeY, {{T, N, u}}, x);
  time_major_input(x, saved);
  // A defined workspace asks the op for what its backward reads.
  Tensor& workspace = saved[kWholeWorkspace];
  if (!training)
    workspace = Tensor();
  else if (!workspace.defined())
    workspace = Tensor(Shape{1}, DType::uint8, x.device());
  // The states through buffers of the layer's own: a stateful layer's initial and final states are one tensor.
  const std::int64_t S = static_cast<std::int64_t>(state_count(s));
  if (states && !states->initial.empty()) {
    reuse_or_allocate(saved, kWholeInitial, {{S, N, u}}, x);
    for (std::size_t k = 0; k < states->initial.size(); ++k) {
      Tensor to = state_of(saved[kWholeInitial], k);
      ops::copy(states->initial[k], to);
    }
  } else {
    saved[kWholeInitial] = Tensor();
  }
  const bool finals = states && !states->final.empty();
  if (finals) reuse_or_allocate(saved, kWholeFinal, {{S, N, u}}, x);
  Tensor h_last = finals ? state_of(saved[kWholeFinal], 0) : Tensor(),
         c_last = finals ? state_of(saved[kWholeFinal], 1) : Tensor();
  Tensor& yt = saved[kWholeY];
  const Tensor& initial = saved[kWholeInitial];
  ops::rnn_sequence_forward(s.params, s.options.go_backwards, saved[0], w.kernel->operand(),
                            w.recurrent->operand(), w.bias ? w.bias->value : Tensor(), state_of(initial, 0),
                            state_of(initial, 1), yt, h_last, c_last, workspace);
  if (finals)
    for (std::size_t k = 0; k < states->final.size(); ++k)
      if (Tensor out = states->final[k]; out.defined()) ops::copy(state_of(saved[kWholeFinal], k), out);
  if (!s.options.return_sequences) return ops::copy(step(yt, s.options.go_backwards ? 0 : T - 1, u, N), y);
  if (!steps_reversed(s)) return ops::transpose(yt, y, {1, 0, 2});
  reuse_or_allocate(saved, kWholeSteps, {{T, N, u}}, x);
  reverse_steps(yt, saved[kWholeSteps]);
  ops::transpose(saved[kWholeSteps], y, {1, 0, 2});
}

void whole_backward(const RecurrentSpec& s, const RecurrentWeights& w, const Tensor& dy, Tensor& dx,
                    std::vector<Tensor>& saved, const RecurrentStates* states) {
  const Tensor &xt = saved[0], &yt = saved[kWholeY];
  const std::int64_t T = xt.dim(0), N = xt.dim(1), F = xt.dim(2), u = s.units;
  const std::vector<Tensor> none;
  const Tensor& initial = saved[kWholeInitial];
  const std::vector<Tensor>& dfinal = states ? states->dfinal : none;
  const std::vector<Tensor>& dinitial = states ? states->dinitial : none;
  Tensor dyt, dh_last = state_or_none(dfinal, 0);
  if (s.options.return_sequences) {
    reuse_or_allocate(saved, kWholeDy, {{T, N, u}}, xt);
    dyt = saved[kWholeDy];
    if (steps_reversed(s)) {
      reuse_or_allocate(saved, kWholeSteps, {{T, N, u}}, xt);
      ops::transpose(dy, saved[kWholeSteps], {1, 0, 2});
      reverse_steps(saved[kWholeSteps], dyt);
    } else {
      ops::transpose(dy, dyt, {1, 0, 2});
    }
  } else {
    // The output is the last state: its gradient joins the final state's.
    reuse_or_allocate(saved, kWholeDhLast, {{N, u}}, xt);
    if (dh_last.defined())
      ops::add_n({dy, dh_last}, saved[kWholeDhLast]);
    else
      ops::copy(dy, saved[kWholeDhLast]);
    dh_last = saved[kWholeDhLast];
  }
  Tensor dxt = dx.defined() ? (reuse_or_allocate(saved, 14, {{T, N, F}}, xt), saved[14]) : Tensor();
  Tensor dkernel = w.kernel->grad, drecurrent = w.recurrent->grad, dbias = w.bias ? w.bias->grad : Tensor();
  Tensor dh0 = state_or_none(dinitial, 0), dc0 = state_or_none(dinitial, 1);
  ops::rnn_sequence_backward(s.params, s.options.go_backwards, xt, w.kernel->operand(),
                             w.recurrent->operand(), w.bias ? w.bias->value : Tensor(), state_of(initial, 0),
                             state_of(initial, 1), yt, saved[kWholeWorkspace], dyt, dh_last,
                             state_or_none(dfinal, 1), dxt, dkernel, drecurrent, dbias, dh0, dc0);
  if (dx.defined()) input_gradient(dxt, dx, saved);
}

}  // namespace

void recurrent_forward(const RecurrentSpec& s, const RecurrentWeights& w, const Tensor& x, const Tensor& mask,
                       const TrainingStep* training, Tensor& y, std::vector<Tensor>& saved,
                       const RecurrentStates* states) {
  const std::int64_t N = x.dim(0), T = x.dim(1), F = x.dim(2), u = s.units, Gn = gate_count(s), G = Gn * u;
  const bool lstm = s.cell == RnnCell::lstm;
  saved.resize(kRecurrentSaved);
  draw_masks(s, training, x, saved);
  if (runs_whole(s, x, mask, saved)) return whole_forward(s, w, x, training, y, saved, states);
  saved[kWholeY] = Tensor();
  reuse_or_allocate(saved, 0, {{T, N, F}, {T, N, G}, {T + 1, N, u}, {T + 1, N, u}, {T, N, G}, {T, N, G}}, x);
  Tensor &xt = saved[0], &xp = saved[1], &h = saved[2], &cs = saved[3], &z = saved[4], &hp = saved[5];
  const Tensor bias = w.bias ? w.bias->value : Tensor();
  const Tensor &in_masks = saved[kInputMasks], &state_masks = saved[kStateMasks];
  const bool one_input_mask = in_masks.defined() && in_masks.dim(0) == 1;
  time_major_input(x, saved);
  Tensor xp_flat = xp.view(0, {T * N, G});
  const Tensor in_bias = input_part(s, bias);
  const bool before = reset_before(s), gate_masks = in_masks.defined() && !one_input_mask;
  if (gate_masks || before) {
    // The gates' input products apart: gate g's columns are (x * mask_g) @ kernel_g (+ its bias), with a mask per
    // gate; GRU without reset_after reads r's columns alone at each step.
    reuse_or_allocate(saved, kGateKernels, {{Gn, F, u}, {Gn, T * N, u}}, x);
    if (gate_masks) reuse_or_allocate(saved, kGateInputs, {{Gn, T, N, F}}, x);
    std::vector<Tensor> kernels = blocks(saved[kGateKernels], Gn, {F, u}),
                        products = blocks(saved[kGateProducts], Gn, {T * N, u});
    ops::concat_backward(w.kernel->operand(), kernels, 1);
    for (std::int64_t g = 0; g < Gn; ++g) {
      Tensor xg = gate_masks ? block(saved[kGateInputs], g, {T, N, F}) : xt;
      if (gate_masks)
        ops::broadcast_forward(ops::BinaryKind::multiply, xt, block(in_masks, g, {1, N, F}), xg);
      ops::dense_forward(xg.view(0, {T * N, F}), kernels[g], bias_block(in_bias, g, u), products[g]);
    }
    ops::concat_forward(products, xp_flat, 1);
  } else {
    ops::dense_forward(xt.view(0, {T * N, F}), w.kernel->operand(), in_bias, xp_flat);
  }
  Tensor h0 = step(h, 0, u, N), c0 = step(cs, 0, u, N), none;
  const bool given = states && !states->initial.empty();
  given ? ops::copy(states->initial[0], h0) : ops::fill(h0, 0.0);
  given&& lstm ? ops::copy(states->initial.at(1), c0) : ops::fill(c0, 0.0);
  const Tensor rec_bias = recurrent_part(s, bias);
  std::vector<Tensor> state_kernels, step_products;
  const bool gate_states = state_masks.defined() || before;
  if (gate_states) {
    reuse_or_allocate(saved, kStateKernels, {{Gn, u, u}, {Gn, T, N, u}, {Gn, N, u}}, x);
    if (before) reuse_or_allocate(saved, kResetPre, {{T, N, u}, {T, N, u}}, x);
    state_kernels = blocks(saved[kStateKernels], Gn, {u, u});
    step_products = blocks(saved[kStepProducts], Gn, {N, u});
    ops::concat_backward(w.recurrent->operand(), state_kernels, 1);
  }
  const Tensor mt = time_major_mask(s, mask, x, saved);
  for (std::int64_t k = 0; k < T; ++k) {
    const std::int64_t t = s.options.go_backwards ? T - 1 - k : k;
    Tensor hs = step(h, k, u, N), hnext = step(h, k + 1, u, N), zs = step(z, k, G, N),
           hps = step(hp, k, G, N);
    Tensor cprev = lstm ? step(cs, k, u, N) : none, cnext = lstm ? step(cs, k + 1, u, N) : none;
    if (gate_states) {
      // Keras's implementation 1: gate g's recurrent columns are (h * mask_g) @ recurrent_kernel_g; GRU without
      // reset_after: the candidate's are (r * h * mask_h) @ recurrent_kernel_h, r from this step's r columns.
      for (std::int64_t g = 0; g < Gn; ++g) {
        const bool kept = kept_gate_states(state_masks, before, g);
        Tensor hm = kept ? block(saved[kMaskedStates], g * T + k, {N, u}) : hs;
        if (state_masks.defined())
          ops::broadcast_forward(ops::BinaryKind::multiply, hs, block(state_masks, g, {N, u}), hm);
        else if (kept)
          ops::copy(hs, hm);
        if (before && g == 2) {
          Tensor pre = step(saved[kResetPre], k, u, N), r = step(saved[kReset], k, u, N);
          ops::add_n({block(saved[kGateProducts], 1, {T * N, u}).view(t * N * u, {N, u}), step_products[1]},
                     pre);
          ops::activation_forward(s.params.recurrent_activation, pre, r);
          ops::broadcast_forward(ops::BinaryKind::multiply, hm, r, hm);
        }
        ops::dense_forward(hm, state_kernels[g], bias_block(rec_bias, g, u), step_products[g]);
      }
      ops::concat_forward(step_products, hps, 1);
    } else {
      ops::dense_forward(hs, w.recurrent->operand(), rec_bias, hps);
    }
    ops::rnn_cell_forward(s.params, step(xp, t, G, N), hps, hs, cprev, mask_at(mt, t, N), hnext, cnext, zs);
  }
  // The states after the last step (a masked step carried its state on).
  if (states)
    for (std::size_t k = 0; k < states->final.size(); ++k)
      if (Tensor out = states->final[k]; out.defined()) ops::copy(step(k == 0 ? h : cs, T, u, N), out);
  if (!s.options.return_sequences) return ops::copy(step(h, T, u, N), y);
  if (!s.flip_sequences) {
    ops::transpose(h.view(N * u, {T, N, u}), y, {1, 0, 2});
  } else {
    // Step k ran time T-1-k: the outputs in time order.
    reuse_or_allocate(saved, 15, {{T, N, u}}, x);
    reverse_steps(h.view(N * u, {T, N, u}), saved[15]);
    ops::transpose(saved[15], y, {1, 0, 2});
  }
  if (zeroes_masked_outputs(s, mask))
    ops::broadcast_forward(ops::BinaryKind::multiply, y, output_mask(mask), y);
}

// saved, after forward's: 6 the output's gradient time-major [T, N, u]; 7 the products' gradients [T, N, G*u]; 8 the
// recurrent products' gradients, in the order of the steps [T, N, G*u]; 9-13 [N, u] each: dh, dc, the direct parts dh_prev and dc_prev, dh
// through the recurrent kernel; 14 the input's gradient time-major [T, N, F]. Forward's 15: its outputs in time
// order (flip_sequences); 16: the mask time-major [T, N]; 17: the mask cast to the data's dtype. 18: the output's
// gradient times the mask (zero_output_for_mask).
void recurrent_backward(const RecurrentSpec& s, const RecurrentWeights& w, const Tensor& dy,
                        const Tensor& mask, Tensor& dx, std::vector<Tensor>& saved,
                        const RecurrentStates* states) {
  SYSTOLIC_CHECK(saved.size() == kRecurrentSaved, "{}: backward without a forward", s.class_name);
  if (saved[kWholeY].defined()) return whole_backward(s, w, dy, dx, saved, states);
  const std::int64_t T = saved[0].dim(0), N = saved[0].dim(1), F = saved[0].dim(2), u = s.units,
                     Gn = gate_count(s), G = Gn * u;
  const bool lstm = s.cell == RnnCell::lstm, gru = s.cell == RnnCell::gru;
  reuse_or_allocate(saved, 6,
                    {{T, N, u}, {T, N, G}, {T, N, G}, {N, u}, {N, u}, {N, u}, {N, u}, {N, u}, {T, N, F}},
                    saved[0]);
  Tensor &xt = saved[0], &h = saved[2], &cs = saved[3], &z = saved[4], &hp = saved[5];
  Tensor &dyt = saved[6], &dxp = saved[7], &dhp = saved[8], &dh = saved[9], &dc = saved[10],
         &dh_direct = saved[11], &dc_prev = saved[12], &dh_rec = saved[13], &dxt = saved[14];
  const Tensor mt = saved[16];  // forward's time-major mask
  const Tensor &in_masks = saved[kInputMasks], &state_masks = saved[kStateMasks];
  if (s.options.return_sequences) {
    if (zeroes_masked_outputs(s, mask)) {  // the zeroed outputs pass no gradient
      reuse_or_allocate(saved, 18, {dy.shape()}, dy);
      ops::broadcast_forward(ops::BinaryKind::multiply, dy, output_mask(mask), saved[18]);
      ops::transpose(saved[18], dyt, {1, 0, 2});
    } else {
      ops::transpose(dy, dyt, {1, 0, 2});
    }
    ops::fill(dh, 0.0);
  } else {
    ops::copy(dy, dh);
  }
  ops::fill(dc, 0.0);
  // The final states' own gradients (return_state) join those reaching them through the output.
  const std::vector<Tensor> no_states;
  const std::vector<Tensor>& dfinal = states ? states->dfinal : no_states;
  if (!dfinal.empty() && dfinal[0].defined()) ops::accumulate(dfinal[0], dh);
  if (lstm && dfinal.size() > 1 && dfinal[1].defined()) ops::copy(dfinal[1], dc);
  Tensor none, bias_grad = w.bias ? w.bias->grad : Tensor();
  Tensor db_in = input_part(s, bias_grad), db_rec = recurrent_part(s, bias_grad);
  std::vector<Tensor> state_kernels, step_grads, step_input_grads;
  const bool before = reset_before(s), gate_states = state_masks.defined() || before;
  // Gate g's states for its recurrent product at step k, and at every step [T*N, u].
  auto state_at = [&](std::int64_t g, std::int64_t k) {
    return kept_gate_states(state_masks, before, g) ? block(saved[kMaskedStates], g * T + k, {N, u})
                                                    : step(h, k, u, N);
  };
  auto states_of = [&](std::int64_t g) {
    return kept_gate_states(state_masks, before, g) ? block(saved[kMaskedStates], g, {T * N, u})
                                                    : h.view(0, {T * N, u});
  };
  if (gate_states) {
    reuse_or_allocate(saved, kStepStateGrad, {{N, u}, {N, u}}, saved[0]);
    state_kernels = blocks(saved[kStateKernels], Gn, {u, u});
    step_grads = blocks(saved[kStepProducts], Gn, {N, u});
  }
  if (before) {
    reuse_or_allocate(saved, kResetStateGrad, {{N, u}, {N, u}, {Gn, N, u}}, saved[0]);
    step_input_grads = blocks(saved[kStepInputGrads], Gn, {N, u});
  }
  // The gradient reaching h_prev other than through the recurrent kernel: GRU's z * h_prev, a masked row's all.
  const bool direct = gru || mask.defined();
  for (std::int64_t k = T - 1; k >= 0; --k) {
    const std::int64_t t = s.options.go_backwards ? T - 1 - k : k;
    if (s.options.return_sequences) ops::accumulate(step(dyt, s.flip_sequences ? T - 1 - k : k, u, N), dh);
    Tensor hs = step(h, k, u, N), dxs = step(dxp, t, G, N), dhs = step(dhp, k, G, N);
    Tensor dcp_arg = lstm ? dc_prev : none;
    ops::rnn_cell_backward(s.params, step(hp, k, G, N), hs, lstm ? step(cs, k, u, N) : none, step(z, k, G, N),
                           lstm ? step(cs, k + 1, u, N) : none, mask_at(mt, t, N), dh, lstm ? dc : none, dxs,
                           dhs, dh_direct, dcp_arg);
    // dh_prev = dh_part @ W_r^T (+ the direct part); W_r's gradient is taken once for every step, below.
    if (gate_states) {
      // Through each gate's masked state: the sum over g of mask_g * (dh_part_g @ W_r,g^T).
      ops::concat_backward(dhs, step_grads, 1);
      if (before) {
        // The candidate's product read r * h (* mask_h): its gradient d reaches r as d * h (* mask_h), then r's
        // pre-activation, which joins the r columns of dx_part and dh_part (the cell left them 0), and h as d * r
        // (* mask_h).
        Tensor &d = saved[kResetStateGrad], &dr = saved[kResetTemp];
        ops::dense_backward(state_at(2, k), state_kernels[2], step_grads[2], d, none, none);
        ops::broadcast_forward(ops::BinaryKind::multiply, d, hs, dr);
        if (state_masks.defined())
          ops::broadcast_forward(ops::BinaryKind::multiply, dr, block(state_masks, 2, {N, u}), dr);
        ops::activation_backward(s.params.recurrent_activation, step(saved[kResetPre], k, u, N),
                                 step(saved[kReset], k, u, N), dr, step_grads[1]);
        ops::concat_forward(step_grads, dhs, 1);
        ops::concat_backward(dxs, step_input_grads, 1);
        ops::copy(step_grads[1], step_input_grads[1]);
        ops::concat_forward(step_input_grads, dxs, 1);
        ops::broadcast_forward(ops::BinaryKind::multiply, d, step(saved[kReset], k, u, N), dh_rec);
        if (state_masks.defined())
          ops::broadcast_forward(ops::BinaryKind::multiply, dh_rec, block(state_masks, 2, {N, u}), dh_rec);
      }
      for (std::int64_t g = 0; g < Gn; ++g) {
        if (before && g == 2) continue;  // above
        const bool first = g == 0 && !before;
        ops::dense_backward(state_at(g, k), state_kernels[g], step_grads[g], saved[kStepStateGrad], none,
                            none);
        Tensor& into = first ? dh_rec : saved[kStepStateGradMasked];
        if (state_masks.defined())
          ops::broadcast_forward(ops::BinaryKind::multiply, saved[kStepStateGrad],
                                 block(state_masks, g, {N, u}), into);
        else
          ops::copy(saved[kStepStateGrad], into);
        if (!first) ops::accumulate(into, dh_rec);
      }
      if (direct)
        ops::add_n({dh_direct, dh_rec}, dh);
      else
        ops::copy(dh_rec, dh);
    } else if (direct) {
      ops::dense_backward(hs, w.recurrent->operand(), dhs, dh_rec, none, none);
      ops::add_n({dh_direct, dh_rec}, dh);
    } else {
      ops::dense_backward(hs, w.recurrent->operand(), dhs, dh, none, none);
    }
    if (lstm) std::swap(dc, dc_prev);
  }
  // What reached the states before the first step: the initial states' gradients (initial_state).
  if (states)
    for (std::size_t k = 0; k < states->dinitial.size(); ++k)
      if (Tensor out = states->dinitial[k]; out.defined()) ops::copy(k == 0 ? dh : dc, out);
  // W_r's gradient (and the recurrent bias's): sum over the steps of h_prev^T @ dh_part, as one product (one per
  // gate when the gates' products ran apart: each gate's states).
  if (gate_states) {
    reuse_or_allocate(saved, kStateKernelGrads, {{Gn, u, u}, {u, G}}, w.recurrent->grad);
    reuse_or_allocate(saved, kGateProducts, {{Gn, T * N, u}}, saved[0]);
    std::vector<Tensor> grads = blocks(saved[kGateProducts], Gn, {T * N, u}),
                        kernel_grads = blocks(saved[kStateKernelGrads], Gn, {u, u});
    ops::concat_backward(dhp.view(0, {T * N, G}), grads, 1);
    ops::fill(saved[kStateKernelGrads], 0.0);
    for (std::int64_t g = 0; g < Gn; ++g) {
      Tensor db = bias_block(db_rec, g, u);
      ops::dense_backward(states_of(g), state_kernels[g], grads[g], none, kernel_grads[g], db);
    }
    ops::concat_forward(kernel_grads, saved[kStateKernelGrad], 1);
    ops::accumulate(saved[kStateKernelGrad], w.recurrent->grad);
  } else {
    ops::dense_backward(h.view(0, {T * N, u}), w.recurrent->operand(), dhp.view(0, {T * N, G}), none,
                        w.recurrent->grad, db_rec);
  }
  Tensor dx_flat = dx.defined() ? dxt.view(0, {T * N, F}) : none;
  const bool gate_masks = in_masks.defined() && in_masks.dim(0) > 1;
  if (gate_masks || before) {
    // The gates' input products apart: gate g's products' gradient to kernel_g, and (through mask_g) to the input.
    reuse_or_allocate(saved, kGateKernelGrads, {{Gn, F, u}, {F, G}}, w.kernel->grad);
    reuse_or_allocate(saved, kGateProducts, {{Gn, T * N, u}}, saved[0]);
    if (dx.defined()) reuse_or_allocate(saved, kGateInputGrad, {{T, N, F}, {T, N, F}}, saved[0]);
    std::vector<Tensor> grads = blocks(saved[kGateProducts], Gn, {T * N, u}),
                        kernels = blocks(saved[kGateKernels], Gn, {F, u}),
                        kernel_grads = blocks(saved[kGateKernelGrads], Gn, {F, u});
    ops::concat_backward(dxp.view(0, {T * N, G}), grads, 1);
    ops::fill(saved[kGateKernelGrads], 0.0);
    for (std::int64_t g = 0; g < Gn; ++g) {
      Tensor dxg = dx.defined() ? saved[kGateInputGrad].view(0, {T * N, F}) : none;
      Tensor db = bias_block(db_in, g, u);
      ops::dense_backward(gate_masks ? block(saved[kGateInputs], g, {T * N, F}) : xt.view(0, {T * N, F}),
                          kernels[g], grads[g], dxg, kernel_grads[g], db);
      if (!dx.defined()) continue;
      Tensor& into = g == 0 ? dxt : saved[kGateInputGradMasked];
      if (gate_masks)
        ops::broadcast_forward(ops::BinaryKind::multiply, saved[kGateInputGrad],
                               block(in_masks, g, {1, N, F}), into);
      else
        ops::copy(saved[kGateInputGrad], into);
      if (g > 0) ops::accumulate(into, dxt);
    }
    ops::concat_forward(kernel_grads, saved[kKernelGrad], 1);
    ops::accumulate(saved[kKernelGrad], w.kernel->grad);
  } else {
    ops::dense_backward(xt.view(0, {T * N, F}), w.kernel->operand(), dxp.view(0, {T * N, G}), dx_flat,
                        w.kernel->grad, db_in);
  }
  if (dx.defined()) input_gradient(dxt, dx, saved);
}

std::vector<Tensor>& KeptStates::for_input(const RecurrentSpec& s, const Layer& layer, const Tensor& x) {
  const std::int64_t N = x.dim(0);
  if (!kept_.empty() && kept_[0].dim(0) != N)
    fail(
        "layer '{}' ({}) is stateful and keeps states for batches of {}, but got a batch of {}: a stateful "
        "RNN "
        "needs the same batch size at every call (as in Keras), so choose one that divides the samples",
        layer.name(), layer.class_name(), kept_[0].dim(0), N);
  make(s, N, x.device(), x.dtype());
  return kept_;
}

void KeptStates::make(const RecurrentSpec& s, std::int64_t batch, Device device, DType dtype) {
  if (!kept_.empty() && kept_[0].dim(0) == batch && kept_[0].device() == device && kept_[0].dtype() == dtype)
    return;
  kept_.clear();
  for (std::size_t k = 0; k < state_count(s); ++k)
    kept_.push_back(Tensor::zeros({batch, s.units}, dtype, device));
}

void KeptStates::reserve(const RecurrentSpec& s, std::int64_t batch, Device device, DType dtype) {
  if (kept_.empty() || kept_[0].dim(0) == batch) make(s, batch, device, dtype);
}

void KeptStates::reset() {
  for (auto& t : kept_) ops::fill(t, 0.0);
}

std::shared_ptr<Layer> simple_rnn_from_config(ConfigReader& r) {
  return std::make_shared<RecurrentLayer>(recurrent_spec_from_config(r, "SimpleRNN"), r.name());
}
std::shared_ptr<Layer> lstm_from_config(ConfigReader& r) {
  return std::make_shared<RecurrentLayer>(recurrent_spec_from_config(r, "LSTM"), r.name());
}
std::shared_ptr<Layer> gru_from_config(ConfigReader& r) {
  return std::make_shared<RecurrentLayer>(recurrent_spec_from_config(r, "GRU"), r.name());
}

LayerRef SimpleRNN(int units, const RecurrentOptions& options) {
  return LayerRef(std::make_shared<RecurrentLayer>(
      recurrent_spec("SimpleRNN", RnnCell::simple, units, options), options.name));
}
LayerRef LSTM(int units, const RecurrentOptions& options) {
  return LayerRef(
      std::make_shared<RecurrentLayer>(recurrent_spec("LSTM", RnnCell::lstm, units, options), options.name));
}
LayerRef GRU(int units, const RecurrentOptions& options) {
  return LayerRef(
      std::make_shared<RecurrentLayer>(recurrent_spec("GRU", RnnCell::gru, units, options), options.name));
}

}  // namespace systolic::layers
