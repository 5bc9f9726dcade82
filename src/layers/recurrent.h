// The recurrence that SimpleRNN, LSTM and GRU (recurrent.cc) and Bidirectional (bidirectional.cc) run: a cell over
// the steps of (N, T, F), time-major. The input's product with the kernel for every step at once (one matrix
// product), then per step the state's product with the recurrent kernel and the cell's gates
// (ops::rnn_cell_forward); backward runs the steps in reverse, then one product for the kernel's gradient and the
// input's.
#pragma once

#include <systolic/layers.h>

#include <functional>
#include <string>
#include <vector>

#include "layers/config.h"

namespace systolic::layers {

// One recurrent layer's arguments, checked.
struct RecurrentSpec {
  const char* class_name = "LSTM";
  ops::RnnCell cell = ops::RnnCell::lstm;
  std::int64_t units = 0;
  RecurrentOptions options;
  ops::RnnCellParams params;
  // With return_sequences and go_backwards: the outputs in time order rather than in the order of the steps run
  // (Bidirectional's backward run).
  bool flip_sequences = false;
  // Keras's implementation 1 (which Keras 3 uses whenever recurrent_dropout is set, and a tf.keras config may
  // name): the input's dropout draws a mask per gate rather than one.
  bool gate_masks = false;
  std::uint64_t seed = 0;  // of the dropout masks: options.seed, or drawn when a rate is set
};
// The spec of a SimpleRNN, LSTM or GRU layer; null for another layer.
const RecurrentSpec* recurrent_spec_of(const Layer& layer);
// How many tensors recurrent_forward and recurrent_backward keep in `saved`.
inline constexpr std::size_t kRecurrentSaved = 50;
// Where a training forward keeps its dropout masks in `saved` (undefined when nothing is dropped): the input's
// [1 or G, N, F] and the state's [G, N, units], values 0 or 1/(1 - rate); G: the cell's gates in Keras's order.
inline constexpr std::size_t kRecurrentInputMasks = 19, kRecurrentStateMasks = 20;
// Checks the arguments (errors name the layer).
RecurrentSpec recurrent_spec(const char* class_name, ops::RnnCell cell, int units, const RecurrentOptions& o);
// Reads a Keras 3 or tf.keras config of SimpleRNN, LSTM or GRU (the class's), the name included.
RecurrentSpec recurrent_spec_from_config(ConfigReader& r, const std::string& class_name);
// (steps, features) -> (units,), or (steps, units) with return_sequences; "" when the input is not a sequence.
std::string recurrent_shape_error(const Shape& in);
// The mask the steps run by: the call's, unless it was given initial states. Keras 3 passes a layer its input's mask
// only when the layer's call has one tensor argument; with initial_state it has two, and the recurrence runs every
// step (the output still carries the mask on, with return_sequences). tf.keras used the mask there.
Tensor steps_mask(const LayerCall& c);
// Checks the initial states among a call's input shapes (from in[first] on; none given is fine): state_count of
// them, each (units,); fail_with throws.
void check_initial_states(const RecurrentSpec& s, const std::vector<Shape>& in, std::size_t first,
                          const std::function<void(const std::string&)>& fail_with);
Shape recurrent_output_shape(const RecurrentSpec& s, const Shape& in);
// The keys Keras writes after the base config (name, trainable, dtype), in its order.
void write_recurrent_config(const RecurrentSpec& s, json& c);
// "lstm_cell", "gru_cell", "simple_rnn_cell".
const char* recurrent_cell_name(ops::RnnCell cell);

// The cell's weights, in Keras's order: kernel, recurrent_kernel, bias (when use_bias).
struct RecurrentWeights {
  Weight* kernel = nullptr;
  Weight* recurrent = nullptr;
  Weight* bias = nullptr;
};
// Creates them through `add` (a layer's add_weight), named prefix + "<cell>/kernel", ... (the LSTM's forget bias at
// 1 with unit_forget_bias).
using AddWeight = std::function<Weight&(const std::string&, Shape, const Initializer&, const WeightOptions&)>;
void add_recurrent_weights(const RecurrentSpec& s, std::int64_t features, const std::string& prefix,
                           const AddWeight& add);

// (Re)allocates buffers[first...] (growing the vector) of these shapes in `like`'s dtype and device, keeping those
// that already fit: the buffers a layer keeps in LayerCall::saved from call to call.
void reuse_or_allocate(std::vector<Tensor>& buffers, std::size_t first, const std::vector<Shape>& shapes,
                       const Tensor& like);

// The states at the recurrence's ends, [N, units] each, h then (LSTM) c: Keras's initial_state (forward reads
// `initial`; empty: zeros) and return_state (forward writes `final`, the states after the last step; an undefined
// one is not wanted). Backward reads the final states' gradients (`dfinal`; undefined: zero) and writes the initial
// states' (`dinitial`, =; undefined: not wanted).
struct RecurrentStates {
  std::vector<Tensor> initial, final, dfinal, dinitial;
};
// How many states the cell carries: 2 for an LSTM (h, c), else 1.
inline std::size_t state_count(const RecurrentSpec& s) {
  return s.cell == ops::RnnCell::lstm ? 2 : 1;
}

// A stateful layer's states (Keras's stateful), kept from call to call: zeros at first, for the first batch size
// seen, which every call must have (the model makes them before it records a step: Layer::reserve_batch).
class KeptStates {
 public:
  // The states for x's batch, made (zeros) at the first call; another batch size is refused, naming `layer`.
  std::vector<Tensor>& for_input(const RecurrentSpec& s, const Layer& layer, const Tensor& x);
  // Zeros, unless states of this batch, device and dtype exist (a model moved to another device starts again).
  void make(const RecurrentSpec& s, std::int64_t batch, Device device, DType dtype);
  // Layer::reserve_batch: made for the batch unless states of another batch size exist (refused at the call).
  void reserve(const RecurrentSpec& s, std::int64_t batch, Device device, DType dtype);
  void reset();
  const std::vector<Tensor>& states() const { return kept_; }

 private:
  std::vector<Tensor> kept_;
};

// y = the recurrence over x [N, T, F] (y: [N, units] or [N, T, units]); `saved` keeps what backward reads. mask
// [N, T] (Keras's; undefined: none): a masked step keeps the state, and with return_sequences outputs the previous
// step's output, or zeros with zero_output_for_mask. training (null: inference): the step whose dropout masks
// this call draws. states (null: none given, none wanted): the initial and final states.
void recurrent_forward(const RecurrentSpec& s, const RecurrentWeights& w, const Tensor& x, const Tensor& mask,
                       const TrainingStep* training, Tensor& y, std::vector<Tensor>& saved,
                       const RecurrentStates* states = nullptr);
// dx (=; undefined: not computed) and the weights' gradients (+=) from dy (the mask: forward's); with states, the
// final states' gradients join and the initial states' are written.
void recurrent_backward(const RecurrentSpec& s, const RecurrentWeights& w, const Tensor& dy,
                        const Tensor& mask, Tensor& dx, std::vector<Tensor>& saved,
                        const RecurrentStates* states = nullptr);

}  // namespace systolic::layers
