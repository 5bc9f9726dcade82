// ZeroPadding1D, Cropping1D and UpSampling1D (Keras, channels_last): zero steps added before and after, steps
// removed, each step repeated `size` times. Each runs its 2-D op (pad2d, pad2d in reverse, nearest resize2d) on
// (N, 1, L, C) views.
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
// A layer that changes the steps only: (L, C) -> (steps(L), C).
class Steps1DLayer : public Layer {
 public:
  using Layer::Layer;

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 2) fail_shape("expects input (steps, channels), got " + in[0].keras_str());
    const std::int64_t steps = this->steps(in[0][0]);
    if (steps <= 0) fail_shape("leaves no steps of " + in[0].keras_str());
    return {steps, in[0][1]};
  }

 protected:
  virtual std::int64_t steps(std::int64_t in) const = 0;
};

class ZeroPadding1DLayer final : public Steps1DLayer {
 public:
  ZeroPadding1DLayer(Pair p, const NameOptions& o)
      : Steps1DLayer("ZeroPadding1D", o.name), p_{0, 0, p[0], p[1]} {
    SYSTOLIC_CHECK(p[0] >= 0 && p[1] >= 0, "layer '{}': negative padding", name());
  }
  void get_config(json& c) const override {
    Layer::get_config(c);
    c["padding"] = {p_.left, p_.right};
    c["data_format"] = "channels_last";
  }

 protected:
  std::int64_t steps(std::int64_t in) const override { return in + p_.left + p_.right; }
  void forward(LayerCall& c) override {
    Tensor y = as_2d(c.output);
    ops::pad2d_forward(as_2d(c.inputs[0]), y, p_);
  }
  void backward(LayerCall& c) override {
    Tensor dx = as_2d(c.dinputs[0]);
    if (dx.defined()) ops::pad2d_backward(as_2d(c.doutput), dx, p_);
  }

 private:
  ops::Pad2D p_;
};

class Cropping1DLayer final : public Steps1DLayer {
 public:
  Cropping1DLayer(Pair p, const NameOptions& o) : Steps1DLayer("Cropping1D", o.name), p_{0, 0, p[0], p[1]} {
    SYSTOLIC_CHECK(p[0] >= 0 && p[1] >= 0, "layer '{}': negative cropping", name());
  }
  void get_config(json& c) const override {
    Layer::get_config(c);
    c["cropping"] = {p_.left, p_.right};
  }

 protected:
  std::int64_t steps(std::int64_t in) const override { return in - p_.left - p_.right; }
  void forward(LayerCall& c) override {
    Tensor y = as_2d(c.output);
    ops::pad2d_backward(as_2d(c.inputs[0]), y, p_);
  }
  void backward(LayerCall& c) override {
    Tensor dx = as_2d(c.dinputs[0]);
    if (dx.defined()) ops::pad2d_forward(as_2d(c.doutput), dx, p_);
  }

 private:
  ops::Pad2D p_;
};

class UpSampling1DLayer final : public Steps1DLayer {
 public:
  UpSampling1DLayer(int size, const NameOptions& o) : Steps1DLayer("UpSampling1D", o.name), size_(size) {
    SYSTOLIC_CHECK(size > 0, "layer '{}': size must be positive, got {}", name(), size);
  }
  void get_config(json& c) const override {
    Layer::get_config(c);
    c["size"] = size_;
  }

 protected:
  std::int64_t steps(std::int64_t in) const override { return in * size_; }
  void forward(LayerCall& c) override {
    Tensor y = as_2d(c.output);
    ops::resize2d_forward(as_2d(c.inputs[0]), y, ops::Interpolation::nearest);
  }
  void backward(LayerCall& c) override {
    Tensor dx = as_2d(c.dinputs[0]);
    if (dx.defined()) ops::resize2d_backward(as_2d(c.doutput), dx, ops::Interpolation::nearest);
  }

 private:
  int size_;
};

// Keras's (before, after) of a 1-D padding or cropping: an int n (n, n) or a list of two.
Pair before_after(ConfigReader& r, const char* key) {
  return r.get_pair(key, {1, 1});
}
}  // namespace

std::shared_ptr<Layer> zero_padding1d_from_config(ConfigReader& r) {
  r.require_value("data_format", "channels_last");
  return std::make_shared<ZeroPadding1DLayer>(before_after(r, "padding"), NameOptions{r.name()});
}
std::shared_ptr<Layer> cropping1d_from_config(ConfigReader& r) {
  return std::make_shared<Cropping1DLayer>(before_after(r, "cropping"), NameOptions{r.name()});
}
std::shared_ptr<Layer> upsampling1d_from_config(ConfigReader& r) {
  return std::make_shared<UpSampling1DLayer>(r.get_int("size", 2), NameOptions{r.name()});
}

LayerRef ZeroPadding1D(Pair padding, const NameOptions& options) {
  return LayerRef(std::make_shared<ZeroPadding1DLayer>(padding, options));
}
LayerRef Cropping1D(Pair cropping, const NameOptions& options) {
  return LayerRef(std::make_shared<Cropping1DLayer>(cropping, options));
}
LayerRef UpSampling1D(int size, const NameOptions& options) {
  return LayerRef(std::make_shared<UpSampling1DLayer>(size, options));
}

}  // namespace systolic::layers
