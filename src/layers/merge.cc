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
  // values as 1s (its output then zeroed where no input counts); Maximum and Minimum take the extremum of the values
  // that count (Keras's _apply_merge_op_and_or_mask), and where none does the first input's. Each passes on the OR
  // of the masks when every input has one.
  bool combines_masks(const std::vector<bool>& masked) const override {
    return std::all_of(masked.begin(), masked.end(), [](bool m) { return m; });
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
  // Whether the fold reads masked values as a value of its own (masked_value): Multiply's and the extrema's.
  bool reads_masks(const LayerCall& c) const {
    return !c.masks.empty() && (multiply() || skips_masked_values());
  }
  // What a masked value reads as: Multiply's 1; for Maximum (Minimum) a value below (above) any the data holds,
  // so that the extremum is of the values that count.
  double masked_value() const {
    constexpr double kBeyond = 1e30;
    return multiply() ? 1.0 : kind_ == ops::BinaryKind::maximum ? -kBeyond : kBeyond;
  }
  // The masks' buffers, from saved[masked_slot(n, i)] on (after backward's scratch, n + 1 for n inputs): input i
  // with its masked values read as masked_value() (undefined when it has no mask), masked_value() where it is
  // masked (else 0), and its mask in the data's dtype; then at masked_slot(n, n) the extrema's 1 - the output's mask
  // and at masked_slot(n, n) + 1 backward's scratch for the first input's gradient.
  static std::size_t masked_slot(std::size_t n, std::size_t i) { return n + 1 + 3 * i; }
  // A mask [N, ...] as its input's shape with a last axis of 1 (aligned to `rank`).
  static Tensor mask_view(const Tensor& mask, const Tensor& input, int rank) {
    std::vector<std::int64_t> dims = input.shape().dims();
    dims.back() = 1;
    return aligned(mask.view(0, Shape(dims)), rank);
  }
  // The inputs as the fold reads them: masked inputs with their masked values masked_value().
  std::vector<Tensor> fold_inputs(LayerCall& c) const {
    std::vector<Tensor> ins = c.inputs;
    if (!reads_masks(c)) return ins;
    const std::size_t n = ins.size();
    if (c.saved.size() < masked_slot(n, n) + 2) c.saved.resize(masked_slot(n, n) + 2);
    const double v = masked_value();
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
      ops::scale_shift(m, rest, -v, v);
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
      // Multiply: zeros where no input counts. Maximum and Minimum: the first input's values there.
      if (multiply() || skips_masked_values())
        ops::broadcast_forward(ops::BinaryKind::multiply, c.output, mask_view(c.output_mask, c.output, rank),
                               c.output);
      if (skips_masked_values()) {
        const Tensor x0 = aligned(c.inputs[0], rank), none = mask_view(outside(c), c.output, rank);
        if (merged_shape(x0.shape(), none.shape()) != c.output.shape())
          fail_shape("takes masked inputs whose first has the output's last axis (" +
                     c.inputs[0].shape().str() + " for an output " + c.output.shape().str() + ")");
        Tensor& first = scratch(c, masked_slot(n, n) + 1, c.output);
        ops::broadcast_forward(ops::BinaryKind::multiply, x0, none, first);
        ops::broadcast_forward(ops::BinaryKind::add, c.output, first, c.output);
      }
    }
  }

  // The extrema's 1 - the output's mask, where no input counts (in the data's dtype: input 0's mask's buffer).
  static Tensor& outside(LayerCall& c) {
    const std::size_t n = c.inputs.size();
    const Tensor like = c.saved[masked_slot(n, 0) + 2];
    Tensor& t = scratch(c, masked_slot(n, n), like);
    ops::cast(c.output_mask, t);
    ops::scale_shift(t, t, -1.0, 1.0);
    return t;
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
    const bool extrema = skips_masked_values() && c.output_mask.defined();
    if (average_ || ((multiply() || extrema) && c.output_mask.defined())) {
      // Average's scale; Multiply's output zeroed where no input counts passes no gradient there, nor the extrema's
      // (the first input's value there gets it, below).
      Tensor& scaled = scratch(c, n - 2, g);
      if (average_)
        ops::scale_shift(g, scaled, 1.0 / double(n), 0.0);
      else
        ops::broadcast_forward(ops::BinaryKind::multiply, g, mask_view(c.output_mask, g, rank), scaled);
      g = scaled;
    }
    // The fold's inputs (masked inputs with masked_value(), kept by forward).
    std::vector<Tensor> ins = c.inputs;
    const bool masked = reads_masks(c);
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
    // A masked value was read as masked_value(): no gradient reaches it.
    if (masked)
      for (std::size_t i = 0; i < n; ++i)
        if (c.masks[i].defined() && c.dinputs[i].defined())
          ops::broadcast_forward(ops::BinaryKind::multiply, c.dinputs[i],
                                 mask_view(c.saved[masked_slot(n, i) + 2], c.dinputs[i], c.dinputs[i].rank()),
                                 c.dinputs[i]);
    // The extrema where no input counts: the first input's value, its gradient.
    if (extrema && c.dinputs[0].defined()) {
      const Tensor& none = c.saved[masked_slot(n, n)];
      Tensor x0 = aligned(c.inputs[0], rank), dx0 = aligned(c.dinputs[0], rank);
      Tensor& extra = scratch(c, masked_slot(n, n) + 1, dx0);
      Tensor no_gradient;
      ops::broadcast_backward(ops::BinaryKind::multiply, x0, mask_view(none, c.doutput, rank), c.doutput,
                              extra, no_gradient);
      ops::broadcast_forward(ops::BinaryKind::add, dx0, extra, dx0);
    }
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
