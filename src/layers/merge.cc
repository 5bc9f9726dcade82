// Keras 3's elementwise merge layers Multiply, Subtract, Average, Maximum, Minimum: inputs broadcast as Keras
// broadcasts them (an input of lower rank gets axes of 1 inserted after the batch axis, then NumPy's rule over
// the shapes: each dim equal or 1), folded left to right as Keras folds them (((x0 op x1) op x2) ...; Average:
// the sum divided by the count; Subtract: exactly two inputs). Backward runs the fold in reverse through
// ops::broadcast_backward, from the partial results forward kept in training. Keras 3's masks: see combines_masks.
#include <systolic/layers.h>

#include <algorithm>

#include "layers/config.h"
#include "layers/merge_masks.h"

namespace systolic::layers {

namespace {

// Keras's broadcast of two shapes without the batch; empty optional when they do not broadcast.
std::optional<Shape> merged_shape(const Shape& a, const Shape& b) {
  int rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    std::int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    std::int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    dims[i] = da == 1 ? db : da;
  }
  return Shape(dims);
}

class MergeLayer final : public Layer {
 public:
  // Keras 3's masks: Subtract and Average merge the values as they are, and Multiply reads a masked input's masked
  // values as 1s (its output then zeroed where no input counts); each passes on the OR of the masks when every input
  // has one. Maximum and Minimum, which read a masked input's values as the other inputs', refuse masked inputs.
  bool combines_masks(const std::vector<bool>& masked) const override {
    return !skips_masked_values() && std::all_of(masked.begin(), masked.end(), [](bool m) { return m; });
  }
  std::string mask_refusal() const override {
    if (!skips_masked_values()) return {};
    return "Keras 3's " + class_name() +
           " reads a masked input's values as the other inputs', which systolic does not do yet";
  }
  MergeLayer(std::string class_name, ops::BinaryKind kind, bool average, const NameOptions& o)
      : Layer(std::move(class_name), o.name), kind_(kind), average_(average) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in.size() < 2) fail_shape("needs at least two inputs");
    if (class_name() == "Subtract" && in.size() != 2)
      fail_shape("takes exactly two inputs, got " + std::to_string(in.size()));
    Shape out = in[0];
    for (std::size_t i = 1; i < in.size(); ++i) {
      auto m = merged_shape(out, in[i]);
      if (!m) fail_shape("inputs " + out.keras_str() + " and " + in[i].keras_str() + " do not broadcast");
      out = *m;
    }
    return out;
  }

 protected:
  int input_count() const override { return -1; }
  bool skips_masked_values() const {
    return kind_ == ops::BinaryKind::maximum || kind_ == ops::BinaryKind::minimum;
  }
  bool multiply() const { return kind_ == ops::BinaryKind::multiply; }
  // Multiply's masks, from saved[masked_slot(n, i)] on (after backward's scratch, n + 1 for n inputs): input i with
  // its masked values 1 (undefined when it has no mask), 1 - its mask, and its mask in the data's dtype.
  static std::size_t masked_slot(std::size_t n, std::size_t i) { return n + 1 + 3 * i; }
  // A mask [N, ...] as its input's shape with a last axis of 1 (aligned to `rank`).
  static Tensor mask_view(const Tensor& mask, const Tensor& input, int rank) {
    std::vector<std::int64_t> dims = input.shape().dims();
    dims.back() = 1;
    return aligned(mask.view(0, Shape(dims)), rank);
  }
  // The inputs as the fold reads them: Multiply's masked inputs with their masked values 1.
  std::vector<Tensor> fold_inputs(LayerCall& c) const {
    std::vector<Tensor> ins = c.inputs;
    if (!multiply() || c.masks.empty()) return ins;
    const std::size_t n = ins.size();
    if (c.saved.size() < masked_slot(n, n)) c.saved.resize(masked_slot(n, n));
    for (std::size_t i = 0; i < n; ++i) {
      if (!c.masks[i].defined()) continue;
      const Tensor& x = c.inputs[i];
      Tensor &ones = c.saved[masked_slot(n, i)], &rest = c.saved[masked_slot(n, i) + 1],
             &m = c.saved[masked_slot(n, i) + 2];
      for (auto [t, shape] : {std::pair{&ones, x.shape()}, std::pair{&rest, c.masks[i].shape()},
                              std::pair{&m, c.masks[i].shape()}})
        if (!t->defined() || t->shape() != shape || t->dtype() != x.dtype())
          *t = Tensor(shape, x.dtype(), x.device());
      ops::cast(c.masks[i], m);
      ops::scale_shift(m, rest, -1.0, 1.0);
      const int rank = x.rank();
      ops::broadcast_forward(ops::BinaryKind::multiply, x, mask_view(m, x, rank), ones);
      ops::broadcast_forward(ops::BinaryKind::add, ones, mask_view(rest, x, rank), ones);
      ins[i] = ones;
    }
    return ins;
  }

  // Input i as Keras sees it: axes of 1 inserted after the batch up to the output's rank.
  static Tensor aligned(const Tensor& t, int rank) {
    if (!t.defined() || t.rank() == rank) return t;
    std::vector<std::int64_t> dims{t.dim(0)};
    for (int k = t.rank(); k < rank; ++k) dims.push_back(1);
    for (int k = 1; k < t.rank(); ++k) dims.push_back(t.dim(k));
    return t.reshape(Shape(dims));
  }
  // The shape of the fold after input i (batch included).
  Shape partial_shape(const LayerCall& c, std::size_t i) const {
    const int rank = c.output.rank();
    Shape s = aligned(c.inputs[0], rank).shape();
    for (std::size_t k = 1; k <= i; ++k) {
      Shape b = aligned(c.inputs[k], rank).shape();
      for (int d = 0; d < rank; ++d) s[d] = s[d] == 1 ? b[d] : s[d];
    }
    return s;
  }

  void forward(LayerCall& c) override {
    const std::size_t n = c.inputs.size();
    const int rank = c.output.rank();
    // The partial folds 1 .. n-2 (kept for backward; the last one is the output).
    if (c.saved.size() < n - 2) c.saved.resize(n - 2);
    for (std::size_t i = 1; i + 1 < n; ++i) {
      Shape s = partial_shape(c, i);
      Tensor& t = c.saved[i - 1];
      if (!t.defined() || t.shape() != s) t = Tensor(s, c.output.dtype(), c.output.device());
    }
    const std::vector<Tensor> ins = fold_inputs(c);
    Tensor acc = aligned(ins[0], rank);
    for (std::size_t i = 1; i < n; ++i) {
      Tensor& out = i + 1 == n ? c.output : c.saved[i - 1];
      ops::broadcast_forward(kind_, acc, aligned(ins[i], rank), out);
      acc = out;
    }
    if (average_) ops::scale_shift(c.output, c.output, 1.0 / double(n), 0.0);
    if (c.output_mask.defined()) {
      merge_masks_or(name(), c.masks, c.output_mask);
      // Multiply: zeros where no input counts.
      if (multiply())
        ops::broadcast_forward(ops::BinaryKind::multiply, c.output, mask_view(c.output_mask, c.output, rank),
                               c.output);
    }
  }

  // Backward's buffer k after the partial folds (the averaged gradient, then two that alternate between the
  // folds' gradients), like `like`; kept in c.saved, so a replayed step allocates nothing.
  static Tensor& scratch(LayerCall& c, std::size_t k, const Tensor& like) {
    if (c.saved.size() <= k) c.saved.resize(k + 1);
    Tensor& t = c.saved[k];
    if (!t.defined() || t.shape() != like.shape() || t.dtype() != like.dtype())
      t = Tensor(like.shape(), like.dtype(), like.device());
    return t;
  }

  void backward(LayerCall& c) override {
    const std::size_t n = c.inputs.size();
    const int rank = c.doutput.rank();
    Tensor g = c.doutput;
    if (average_ || (multiply() && c.output_mask.defined())) {
      // Average's scale; Multiply's output zeroed where no input counts passes no gradient there.
      Tensor& scaled = scratch(c, n - 2, g);
      if (average_)
        ops::scale_shift(g, scaled, 1.0 / double(n), 0.0);
      else
        ops::broadcast_forward(ops::BinaryKind::multiply, g, mask_view(c.output_mask, g, rank), scaled);
      g = scaled;
    }
    // The fold's inputs (Multiply's masked inputs with 1s, kept by forward).
    std::vector<Tensor> ins = c.inputs;
    const bool masked = multiply() && !c.masks.empty();
    if (masked)
      for (std::size_t i = 0; i < n; ++i)
        if (c.masks[i].defined()) ins[i] = c.saved[masked_slot(n, i)];
    for (std::size_t i = n - 1; i >= 1; --i) {
      Tensor left = i == 1 ? aligned(ins[0], rank) : c.saved[i - 2];
      Tensor dleft;
      if (i > 1 || c.dinputs[0].defined())
        dleft = i == 1 ? aligned(c.dinputs[0], rank) : scratch(c, n - 1 + (i % 2), left);
      Tensor dright = aligned(c.dinputs[i], rank);
      ops::broadcast_backward(kind_, left, aligned(ins[i], rank), g, dleft, dright);
      g = dleft;
      if (!g.defined()) break;  // input 0 needs no gradient and nothing is left to its left
    }
    // A masked value was read as 1: no gradient reaches it.
    if (masked)
      for (std::size_t i = 0; i < n; ++i)
        if (c.masks[i].defined() && c.dinputs[i].defined())
          ops::broadcast_forward(ops::BinaryKind::multiply, c.dinputs[i],
                                 mask_view(c.saved[masked_slot(n, i) + 2], c.dinputs[i], c.dinputs[i].rank()),
                                 c.dinputs[i]);
  }

 private:
  ops::BinaryKind kind_;
  bool average_;
};

std::shared_ptr<Layer> make(const char* cls, ops::BinaryKind kind, bool average, const NameOptions& o) {
  return std::make_shared<MergeLayer>(cls, kind, average, o);
}
}  // namespace

std::shared_ptr<Layer> multiply_from_config(ConfigReader& r) {
  return make("Multiply", ops::BinaryKind::multiply, false, {r.name()});
}
std::shared_ptr<Layer> subtract_from_config(ConfigReader& r) {
  return make("Subtract", ops::BinaryKind::subtract, false, {r.name()});
}
std::shared_ptr<Layer> average_from_config(ConfigReader& r) {
  return make("Average", ops::BinaryKind::add, true, {r.name()});
}
std::shared_ptr<Layer> maximum_from_config(ConfigReader& r) {
  return make("Maximum", ops::BinaryKind::maximum, false, {r.name()});
}
std::shared_ptr<Layer> minimum_from_config(ConfigReader& r) {
  return make("Minimum", ops::BinaryKind::minimum, false, {r.name()});
}

LayerRef Multiply(const NameOptions& o) {
  return LayerRef(make("Multiply", ops::BinaryKind::multiply, false, o));
}
LayerRef Subtract(const NameOptions& o) {
  return LayerRef(make("Subtract", ops::BinaryKind::subtract, false, o));
}
LayerRef Average(const NameOptions& o) {
  return LayerRef(make("Average", ops::BinaryKind::add, true, o));
}
LayerRef Maximum(const NameOptions& o) {
  return LayerRef(make("Maximum", ops::BinaryKind::maximum, false, o));
}
LayerRef Minimum(const NameOptions& o) {
  return LayerRef(make("Minimum", ops::BinaryKind::minimum, false, o));
}

}  // namespace systolic::layers
