// Keras 3's reshaping layers of the norm area: Reshape (target_shape, one -1 inferred; the output is a view of the
// input), Permute (dims: a permutation of the non-batch axes, numbered from 1; ops::transpose), RepeatVector
// (n: (N, F) -> (N, n, F), through ops::broadcast_forward against zeros, whose backward sums the copies).
#include <systolic/layers.h>

#include <algorithm>

#include "layers/config.h"
#include "layers/permutation.h"

namespace systolic::layers {

namespace {
class ReshapeLayer final : public Layer {
 public:
  ReshapeLayer(std::vector<std::int64_t> target, const NameOptions& o)
      : Layer("Reshape", o.name), target_(std::move(target)) {
    SYSTOLIC_CHECK(std::count(target_.begin(), target_.end(), -1) <= 1,
                   "layer '{}': target_shape has more than one -1", name());
    for (auto d : target_) SYSTOLIC_CHECK(d == -1 || d > 0, "layer '{}': bad target_shape dim {}", name(), d);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    std::int64_t known = 1;
    for (auto d : target_)
      if (d != -1) known *= d;
    std::vector<std::int64_t> dims = target_;
    const std::int64_t n = in[0].numel();
    for (auto& d : dims)
      if (d == -1) d = known ? n / known : 0;
    Shape out(dims);
    if (out.numel() != n)
      fail_shape("cannot reshape input " + in[0].keras_str() + " (" + std::to_string(n) +
                 " values) to target_shape " + json(target_).dump());
    return out;
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["target_shape"] = target_;
  }

 protected:
  void forward(LayerCall& c) override { c.output = c.inputs[0].reshape(c.output.shape()); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::copy(c.doutput, c.dinputs[0]);
  }

 private:
  std::vector<std::int64_t> target_;
};

class PermuteLayer final : public Layer {
 public:
  PermuteLayer(std::vector<int> dims, const NameOptions& o)
      : Layer("Permute", o.name), dims_(std::move(dims)) {
    std::vector<int> sorted = dims_;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size(); ++i)
      SYSTOLIC_CHECK(sorted[i] == int(i) + 1, "layer '{}': dims must be a permutation of 1..{}, got {}",
                     name(), sorted.size(), json(dims_).dump());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != int(dims_.size()))
      fail_shape("dims " + json(dims_).dump() + " do not fit input " + in[0].keras_str());
    std::vector<std::int64_t> out;
    for (int d : dims_) out.push_back(in[0][d - 1]);
    return Shape(out);
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["dims"] = dims_;
  }

 protected:
  std::vector<int> perm() const {
    std::vector<int> p{0};
    for (int d : dims_) p.push_back(d);
    return p;
  }
  void forward(LayerCall& c) override { ops::transpose(c.inputs[0], c.output, perm()); }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    ops::transpose(c.doutput, c.dinputs[0], inverse_permutation(perm()));
  }

 private:
  std::vector<int> dims_;
};

class RepeatVectorLayer final : public Layer {
 public:
  RepeatVectorLayer(int n, const NameOptions& o) : Layer("RepeatVector", o.name), n_(n) {
    SYSTOLIC_CHECK(n > 0, "layer '{}': n must be positive, got {}", name(), n);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 1) fail_shape("expects input (features,), got " + in[0].keras_str());
    return {n_, in[0][0]};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["n"] = n_;
  }

 protected:
  // x as (N, 1, F) plus zeros (1, n, F): the copies; zeros kept on the data's device.
  const Tensor& zeros(const Tensor& like, std::int64_t f) {
    if (!zeros_.defined() || zeros_.dim(2) != f || zeros_.dtype() != like.dtype() ||
        !(zeros_.device() == like.device())) {
      zeros_ = Tensor({1, n_, f}, like.dtype(), like.device());
      ops::fill(zeros_, 0.0);
    }
    return zeros_;
  }
  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    ops::broadcast_forward(ops::BinaryKind::add, x.reshape({x.dim(0), 1, x.dim(1)}), zeros(x, x.dim(1)),
                           c.output);
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    const Tensor& x = c.inputs[0];
    Tensor dx = c.dinputs[0].reshape({x.dim(0), 1, x.dim(1)}), none;
    ops::broadcast_backward(ops::BinaryKind::add, x.reshape({x.dim(0), 1, x.dim(1)}), zeros(x, x.dim(1)),
                            c.doutput, dx, none);
  }

 private:
  std::int64_t n_;
  Tensor zeros_;
};
}  // namespace

std::shared_ptr<Layer> reshape_from_config(ConfigReader& r) {
  auto& t = r.get_raw("target_shape");
  if (!t.is_array() || !std::all_of(t.begin(), t.end(), [](const json& e) { return e.is_number_integer(); }))
    r.fail_option("target_shape", "expected a list of ints, got " + t.dump());
  return std::make_shared<ReshapeLayer>(t.get<std::vector<std::int64_t>>(), NameOptions{r.name()});
}

std::shared_ptr<Layer> permute_from_config(ConfigReader& r) {
  auto& d = r.get_raw("dims");
  if (!d.is_array() || !std::all_of(d.begin(), d.end(), [](const json& e) { return e.is_number_integer(); }))
    r.fail_option("dims", "expected a list of ints, got " + d.dump());
  return std::make_shared<PermuteLayer>(d.get<std::vector<int>>(), NameOptions{r.name()});
}

std::shared_ptr<Layer> repeat_vector_from_config(ConfigReader& r) {
  if (!r.has("n")) r.fail_option("n", "missing");
  return std::make_shared<RepeatVectorLayer>(r.get_int("n", 0), NameOptions{r.name()});
}

LayerRef Reshape(std::vector<std::int64_t> target_shape, const NameOptions& options) {
  return LayerRef(std::make_shared<ReshapeLayer>(std::move(target_shape), options));
}
LayerRef Permute(std::vector<int> dims, const NameOptions& options) {
  return LayerRef(std::make_shared<PermuteLayer>(std::move(dims), options));
}
LayerRef RepeatVector(int n, const NameOptions& options) {
  return LayerRef(std::make_shared<RepeatVectorLayer>(n, options));
}

}  // namespace systolic::layers
