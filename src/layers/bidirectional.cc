// Bidirectional (Keras): a recurrent layer run forwards and a copy of it (or its backward_layer) run backwards over
// the same input, their outputs merged (concat, sum, ave, mul) or both given (merge_mode None: two outputs); with
// return_sequences the backward run's steps are put back in time order first. With return_state the two runs' final
// states follow (forward's, then backward's), and initial states split the same way. The weights: the forward layer's, then the backward one's, named as Keras names
// them ("forward_lstm/lstm_cell/kernel", ...); Keras 3's weights files keep them under forward_layer/cell/vars and
// backward_layer/cell/vars. On the CPU the two runs, which share nothing, go at once on two threads when a step is
// too small for the ops' own threads to pay (as TensorFlow runs a graph's independent halves at once).
#include <omp.h>

#include <exception>

#include "core/philox.h"
#include "layers/recurrent.h"

namespace systolic::layers {

namespace {

std::string without_prefix(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

class BidirectionalLayer final : public Layer {
 public:
  BidirectionalLayer(RecurrentSpec forward, RecurrentSpec backward, std::string merge_mode,
                     const std::string& name)
      : Layer("Bidirectional", name),
        f_(std::move(forward)),
        b_(std::move(backward)),
        merge_(std::move(merge_mode)) {
    SYSTOLIC_CHECK(
        merge_ == "concat" || merge_ == "sum" || merge_ == "ave" || merge_ == "mul" || merge_.empty(),
        "layer '{}': merge_mode '{}' is not supported (concat, sum, ave, mul, or \"\" for Keras's None)",
        this->name(), merge_);
    SYSTOLIC_CHECK(f_.options.go_backwards != b_.options.go_backwards,
                   "layer '{}': the forward and backward layers must differ in go_backwards", this->name());
    SYSTOLIC_CHECK(f_.options.return_sequences == b_.options.return_sequences,
                   "layer '{}': the forward and backward layers must agree on return_sequences",
                   this->name());
    SYSTOLIC_CHECK(f_.options.stateful == b_.options.stateful,
                   "layer '{}': the forward and backward layers must agree on stateful", this->name());
    SYSTOLIC_CHECK(f_.options.return_state == b_.options.return_state,
                   "layer '{}': the forward and backward layers must agree on return_state", this->name());
    SYSTOLIC_CHECK(merge_ == "concat" || merge_.empty() || f_.units == b_.units,
                   "layer '{}': merge_mode '{}' needs layers of the same units, got {} and {}", this->name(),
                   merge_, f_.units, b_.units);
    b_.flip_sequences = true;  // the backward run's outputs in time order
    // A copy of the forward layer draws dropout masks of its own (as Keras's copy, made from the config, has a seed
    // generator of its own), unless a seed was given.
    if (b_.seed == f_.seed && !b_.options.seed) b_.seed = philox::mix64(f_.seed + 1);
    // As Keras's Bidirectional forces it (it matters with masks only).
    for (RecurrentSpec* s : {&f_, &b_}) s->options.zero_output_for_mask = s->options.return_sequences;
  }

  void reset_state() override {
    for (auto& k : kept_) k.reset();
  }
  void reserve_batch(std::int64_t batch, Device device, DType dtype) override {
    if (!f_.options.stateful) return;
    kept_[0].reserve(f_, batch, device, dtype);
    kept_[1].reserve(b_, batch, device, dtype);
  }

  // Keras passes the input's mask on with return_sequences.
  bool output_masked(bool input_masked) const override { return input_masked && f_.options.return_sequences; }
  // merge_mode None: the backward run's sequences too.
  bool more_output_masked(int k, bool input_masked) const override {
    return k == 1 && merge_.empty() && output_masked(input_masked);
  }
  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    auto why = recurrent_shape_error(in[0]);
    if (!why.empty()) fail_shape(why);
    if (in.size() > 1) {  // initial_state: the forward layer's states, then the backward layer's
      const auto nf = static_cast<std::ptrdiff_t>(state_count(f_));
      if (in.size() != 1 + state_count(f_) + state_count(b_))
        fail_shape("initial_state takes " + std::to_string(state_count(f_) + state_count(b_)) +
                   " states (the forward layer's, then the backward layer's), got " +
                   std::to_string(in.size() - 1));
      std::vector<Shape> fw{in[0]}, bw{in[0]};
      fw.insert(fw.end(), in.begin() + 1, in.begin() + 1 + nf);
      bw.insert(bw.end(), in.begin() + 1 + nf, in.end());
      check_initial_states(f_, fw, 1,
                           [this](const std::string& w) { fail_shape("the forward layer's " + w); });
      check_initial_states(b_, bw, 1,
                           [this](const std::string& w) { fail_shape("the backward layer's " + w); });
    }
    Shape out = recurrent_output_shape(f_, in[0]);
    if (merge_ == "concat") out[-1] = f_.units + b_.units;
    return out;
  }
  // merge_mode None: the backward run's output; return_state: the forward run's final states, then the backward's.
  std::vector<Shape> more_output_shapes(const std::vector<Shape>& in) const override {
    std::vector<Shape> more;
    if (merge_.empty()) more.push_back(recurrent_output_shape(b_, in[0]));
    if (f_.options.return_state) {
      for (std::size_t k = 0; k < state_count(f_); ++k) more.push_back({f_.units});
      for (std::size_t k = 0; k < state_count(b_); ++k) more.push_back({b_.units});
    }
    return more;
  }
  int max_input_count() const override { return 1 + static_cast<int>(state_count(f_) + state_count(b_)); }
  const char* keras_list_argument() const override { return "initial_state"; }
  std::vector<VariableGroup> keras3_variable_groups() const override {
    return {{"vars", 0},
            {"forward_layer/vars", 0},
            {"forward_layer/cell/vars", forward_count_},
            {"backward_layer/vars", 0},
            {"backward_layer/cell/vars", weights().size() - forward_count_}};
  }
  void get_config(json& c) const override {
    Layer::get_config(c);
    c["merge_mode"] = merge_.empty() ? json(nullptr) : json(merge_);
    c["layer"] = nested_config(f_);
    c["backward_layer"] = nested_config(b_);
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    auto add = [this](const std::string& n, Shape sh, const Initializer& i,
                      const WeightOptions& o) -> Weight& { return add_weight(n, std::move(sh), i, true, o); };
    add_recurrent_weights(f_, in[0][1], f_.options.name + "/", add);
    forward_count_ = weights().size();
    // tf.keras names the backward layer's weights "backward_<its name>/..." even when it is given its own name
    // (Keras 3 keeps that name in the config).
    add_recurrent_weights(b_, in[0][1], "backward_" + without_prefix(b_.options.name, "backward_") + "/",
                          add);
  }

  // c.saved: 0 the forward run's output, 1 the backward run's, 2 and 3 their gradients, 4 the input gradient of
  // one run; then each run's own (kRecurrentSaved each).
  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    const std::int64_t N = x.dim(0);
    Shape of = recurrent_output_shape(f_, x.shape().without_batch()).with_batch(N),
          ob = recurrent_output_shape(b_, x.shape().without_batch()).with_batch(N);
    c.saved.resize(kFirstRun + 2 * kRecurrentSaved);
    reuse_or_allocate(c.saved, 0, {of, ob}, x);
    RecurrentStates states[2];
    const Tensor mask = steps_mask(c);
    split_states(c.inputs, 1, states[0].initial, states[1].initial);
    split_states(c.more_outputs, merge_.empty() ? 1 : 0, states[0].final, states[1].final);
    if (f_.options.stateful) {
      // Keras's stateful: each direction starts from the states its run ended with at the last call (unless states
      // are given) and keeps this call's.
      for (int i = 0; i < 2; ++i) {
        std::vector<Tensor>& kept = kept_[i].for_input(i == 0 ? f_ : b_, *this, x);
        if (states[i].initial.empty()) states[i].initial = kept;
        states[i].final = kept;
      }
    }
    both(concurrent(x), [&](int i) {
      run(c, i, [&](std::vector<Tensor>& s) {
        recurrent_forward(i == 0 ? f_ : b_, weights_of(i), x, mask, c.training, c.saved[i], s, &states[i]);
      });
    });
    if (f_.options.stateful && f_.options.return_state) {  // the kept final states are the call's too
      std::vector<Tensor> out[2];
      split_states(c.more_outputs, merge_.empty() ? 1 : 0, out[0], out[1]);
      for (int i = 0; i < 2; ++i)
        for (std::size_t k = 0; k < out[i].size(); ++k)
          if (out[i][k].defined()) ops::copy(kept_[i].states()[k], out[i][k]);
    }
    const Tensor &yf = c.saved[0], &yb = c.saved[1];
    if (merge_.empty()) {
      ops::copy(yf, c.output);
      if (!c.more_outputs.empty() && c.more_outputs[0].defined()) ops::copy(yb, c.more_outputs[0]);
    } else if (merge_ == "concat") {
      ops::concat_forward({yf, yb}, c.output, c.output.rank() - 1);
    } else if (merge_ == "mul") {
      ops::broadcast_forward(ops::BinaryKind::multiply, yf, yb, c.output);
    } else {
      ops::add_n({yf, yb}, c.output);
      if (merge_ == "ave") ops::scale_shift(c.output, c.output, 0.5, 0.0);
    }
  }
  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(c.saved.size() == kFirstRun + 2 * kRecurrentSaved,
                   "layer '{}': backward without a forward", name());
    const Tensor &yf = c.saved[0], &yb = c.saved[1];
    reuse_or_allocate(c.saved, 2, {yf.shape(), yb.shape()}, yf);
    Tensor &dyf = c.saved[2], &dyb = c.saved[3];
    if (merge_.empty()) {
      ops::copy(c.doutput, dyf);
      !c.more_doutputs.empty() && c.more_doutputs[0].defined() ? ops::copy(c.more_doutputs[0], dyb)
                                                               : ops::fill(dyb, 0.0);
    } else if (merge_ == "concat") {
      std::vector<Tensor> parts = {dyf, dyb};
      ops::concat_backward(c.doutput, parts, c.doutput.rank() - 1);
    } else if (merge_ == "mul") {
      ops::broadcast_backward(ops::BinaryKind::multiply, yf, yb, c.doutput, dyf, dyb);
    } else {
      const double scale = merge_ == "ave" ? 0.5 : 1.0;
      ops::scale_shift(c.doutput, dyf, scale, 0.0);
      ops::scale_shift(c.doutput, dyb, scale, 0.0);
    }
    Tensor& dx = c.dinputs[0];
    if (dx.defined()) reuse_or_allocate(c.saved, 4, {dx.shape()}, dx);
    Tensor dx_b = dx.defined() ? c.saved[4] : Tensor();
    RecurrentStates states[2];
    const Tensor mask = steps_mask(c);
    split_states(c.more_doutputs, merge_.empty() ? 1 : 0, states[0].dfinal, states[1].dfinal);
    split_states(c.dinputs, 1, states[0].dinitial, states[1].dinitial);
    both(concurrent(c.inputs[0]), [&](int i) {
      run(c, i, [&](std::vector<Tensor>& s) {
        recurrent_backward(i == 0 ? f_ : b_, weights_of(i), i == 0 ? dyf : dyb, mask, i == 0 ? dx : dx_b, s,
                           &states[i]);
      });
    });
    if (dx.defined()) ops::accumulate(dx_b, dx);
  }

 private:
  static constexpr std::size_t kFirstRun = 5;
  KeptStates kept_[2];  // stateful: the forward run's states, the backward run's
  // ts[first...]: the forward run's states, then the backward run's (none there: none for either).
  void split_states(const std::vector<Tensor>& ts, std::size_t first, std::vector<Tensor>& f,
                    std::vector<Tensor>& b) const {
    if (ts.size() < first + state_count(f_) + state_count(b_)) return;  // none given (or wanted)
    const auto at = ts.begin() + static_cast<std::ptrdiff_t>(first);
    f.assign(at, at + static_cast<std::ptrdiff_t>(state_count(f_)));
    b.assign(at + static_cast<std::ptrdiff_t>(state_count(f_)), ts.end());
  }
  // Whether the runs go at once: on the CPU with two threads or more, outside a parallel region, when one step's
  // recurrent product (N x units x 4 units) is below about 4 M multiply-adds; a larger one runs on all threads.
  bool concurrent(const Tensor& x) const {
    if (!x.device().is_cpu() || omp_in_parallel() || omp_get_max_threads() < 2) return false;
    const std::int64_t u = std::max(f_.units, b_.units);
    return x.dim(0) * u * 4 * u <= (std::int64_t(1) << 22);
  }
  // f(0) and f(1): at once on two threads, their ops single-threaded (nested regions do not fork), or in turn.
  template <class F>
  static void both(bool at_once, F&& f) {
    if (!at_once) {
      f(0);
      f(1);
      return;
    }
    std::exception_ptr error[2];
#pragma omp parallel num_threads(2)
    {
      const int n = omp_get_num_threads();
      for (int i = omp_get_thread_num(); i < 2; i += n) {
        try {
          f(i);
        } catch (...) {
          error[i] = std::current_exception();
        }
      }
    }
    for (auto& e : error)
      if (e) std::rethrow_exception(e);
  }
  // Runs f on run i's part of c.saved (a vector of its own, written back).
  template <class F>
  static void run(LayerCall& c, int i, F&& f) {
    auto first = c.saved.begin() + kFirstRun + i * kRecurrentSaved;
    std::vector<Tensor> own(first, first + kRecurrentSaved);
    f(own);
    SYSTOLIC_CHECK(own.size() <= kRecurrentSaved, "Bidirectional: a run keeps {} tensors", own.size());
    std::copy(own.begin(), own.end(), first);
  }
  RecurrentWeights weights_of(int i) {
    auto& w = weights();
    const std::size_t at = i == 0 ? 0 : forward_count_;
    const RecurrentSpec& s = i == 0 ? f_ : b_;
    return {&w[at], &w[at + 1], s.options.use_bias ? &w[at + 2] : nullptr};
  }
  static json nested_config(const RecurrentSpec& s) {
    json config = {{"name", s.options.name}, {"trainable", true}, {"dtype", "float32"}};
    write_recurrent_config(s, config);
    return {{"module", "keras.layers"},
            {"class_name", s.class_name},
            {"config", config},
            {"registered_name", nullptr}};
  }

  RecurrentSpec f_, b_;
  std::string merge_;
  std::size_t forward_count_ = 0;
};

// A serialized layer ({"class_name", "config"}, Keras 3's with module and registered_name) of a recurrent class.
RecurrentSpec nested_spec(ConfigReader& outer, const char* key) {
  const json& v = outer.get_serialized_layer(key);
  const std::string cls = v["class_name"];
  ConfigReader r(v["config"], cls);
  RecurrentSpec s = recurrent_spec_from_config(r, cls);
  r.require_null("activity_regularizer");  // the wrapped layer's own (the Bidirectional's may have one)
  r.finish();
  return s;
}

}  // namespace

std::shared_ptr<Layer> bidirectional_from_config(ConfigReader& r) {
  RecurrentSpec f = nested_spec(r, "layer");
  std::string inner = f.options.name;
  f.options.name = "forward_" + without_prefix(inner, "forward_");
  RecurrentSpec b;
  if (r.has("backward_layer") && !r.get_raw("backward_layer").is_null()) {
    b = nested_spec(r, "backward_layer");
  } else {  // tf.keras: a copy of the layer that goes backwards
    b = f;
    b.options.go_backwards = true;
    b.options.name = "backward_" + without_prefix(inner, "backward_");
  }
  const json& mode = r.get_raw("merge_mode");
  if (!mode.is_string() && !mode.is_null())
    r.fail_option("merge_mode", "must be concat, sum, ave, mul or null, got " + mode.dump());
  return std::make_shared<BidirectionalLayer>(f, b, mode.is_null() ? "" : mode.get<std::string>(), r.name());
}

LayerRef Bidirectional(const LayerRef& layer, const BidirectionalOptions& options) {
  auto spec_of = [](const LayerRef& l) {
    const RecurrentSpec* s = recurrent_spec_of(*l);
    SYSTOLIC_CHECK(s, "Bidirectional: layer '{}' ({}) is not a recurrent layer (SimpleRNN, LSTM, GRU)",
                   l->name(), l->class_name());
    RecurrentSpec copy = *s;
    copy.options.name = l->name();
    return copy;
  };
  RecurrentSpec f = spec_of(layer), b = options.backward_layer ? spec_of(*options.backward_layer) : f;
  const std::string inner = f.options.name;
  f.options.name = "forward_" + without_prefix(inner, "forward_");
  if (!options.backward_layer) {
    b.options.go_backwards = !f.options.go_backwards;
    b.options.name = "backward_" + without_prefix(inner, "backward_");
  }
  return LayerRef(std::make_shared<BidirectionalLayer>(f, b, options.merge_mode, options.name));
}

}  // namespace systolic::layers
