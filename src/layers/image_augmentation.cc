// Keras 3's image augmentation layers (keras/src/layers/preprocessing/image_preprocessing): RandomFlip,
// RandomTranslation, RandomRotation, RandomZoom, RandomContrast, RandomCrop. Active only while training; the
// identity at inference (RandomCrop: see layers.h). Each geometric layer draws one Keras transform per image
// (ops::random_image_transforms, on the device, keyed by the layer's seed and the training step, so a captured
// CUDA graph draws anew every replay) and samples the images through it (ops::affine_transform_images, Keras's
// affine_transform: fill modes and interpolation as TensorFlow's). systolic's draws cannot equal TensorFlow's; the
// distributions are Keras's (the same ranges, uniform).
//
// Gradients: Keras puts these layers on a model's inputs, where no gradient is wanted. Their backward passes
// none: a model that needs the gradient of one's input (a trainable layer before it) is refused with an Error
// naming the layer. GaussianNoise and GaussianDropout (gaussian_noise.cc) do pass gradients.
#include <systolic/layers.h>

#include <cmath>

#include "core/philox.h"
#include "layers/config.h"

namespace systolic::layers {

namespace {

ops::FillMode fill_mode_of(const std::string& name, const std::string& layer) {
  if (name == "reflect") return ops::FillMode::reflect;
  if (name == "wrap") return ops::FillMode::wrap;
  if (name == "constant") return ops::FillMode::constant;
  if (name == "nearest") return ops::FillMode::nearest;
  fail("layer '{}': unknown fill_mode '{}' (expected reflect, wrap, constant or nearest)", layer, name);
}
ops::Interpolation interpolation_of(const std::string& name, const std::string& layer) {
  if (name == "bilinear") return ops::Interpolation::bilinear;
  if (name == "nearest") return ops::Interpolation::nearest;
  fail("layer '{}': unknown interpolation '{}' (expected nearest or bilinear)", layer, name);
}

json factor_json(const Factor& f) {
  return f.pair ? json::array({f.lower, f.upper}) : json(f.upper);
}
json seed_json(const std::optional<std::uint64_t>& s) {
  return s ? json(*s) : json(nullptr);
}

// What the augmentation layers share: the seed, training-only execution, no input gradient.
class AugmentationLayer : public Layer {
 public:
  AugmentationLayer(const char* class_name, const std::string& name, std::optional<std::uint64_t> seed)
      : Layer(class_name, name), seed_(seed ? *seed : global_generator().split()), given_seed_(seed) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects images (H, W, C), got " + in[0].keras_str());
    return in[0];
  }

 protected:
  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(!c.dinputs[0].defined(),
                   "layer '{}': {} passes no gradient to its input; put it on the model's inputs (before any "
                   "layer with trainable weights), as Keras's augmentation layers are meant to be",
                   name(), class_name());
  }
  std::uint64_t seed_for(const LayerCall& c) const {
    return philox::replica_seed(seed_, c.training ? c.training->replica : 0);
  }
  // The per-image transforms of this call (kept in saved[0]).
  Tensor& transforms(LayerCall& c) {
    const std::int64_t n = c.inputs[0].dim(0);
    if (c.saved.size() != 1 || c.saved[0].dim(0) != n || c.saved[0].device() != c.inputs[0].device())
      c.saved = {Tensor({n, 8}, DType::float32, c.inputs[0].device())};
    return c.saved[0];
  }
  void write_base(json& c) const {
    Layer::get_config(c);
    c["data_format"] = "channels_last";
  }

  std::uint64_t seed_;
  std::optional<std::uint64_t> given_seed_;
};

// The geometric layers: a transform per image, then the sampling.
class GeometricLayer : public AugmentationLayer {
 public:
  GeometricLayer(const char* class_name, const ImageAugmentOptions& o)
      : AugmentationLayer(class_name, o.name, o.seed), options_(o) {
    sample_ = {.fill_mode = fill_mode_of(o.fill_mode, name()),
               .interpolation = interpolation_of(o.interpolation, name()),
               .fill_value = o.fill_value};
  }

 protected:
  void forward(LayerCall& c) override {
    if (!c.training) {
      c.output = c.inputs[0];
      return;
    }
    const Tensor& x = c.inputs[0];
    Tensor& m = transforms(c);
    ops::random_image_transforms(m, params_, x.dim(1), x.dim(2), seed_for(c), c.training->counter);
    ops::affine_transform_images(x, m, c.output, sample_);
  }
  // fill_mode, interpolation, seed, fill_value under Keras's keys, in the order `keys` gives.
  void write_options(json& c, std::initializer_list<const char*> keys) const {
    for (const char* k : keys) {
      std::string key = k;
      if (key == "fill_mode") c[key] = options_.fill_mode;
      if (key == "interpolation") c[key] = options_.interpolation;
      if (key == "seed") c[key] = seed_json(given_seed_);
      if (key == "fill_value") c[key] = options_.fill_value;
    }
  }

  ImageAugmentOptions options_;
  ops::ImageTransformParams params_;
  ops::AffineTransformParams sample_;
};

class RandomFlipLayer final : public AugmentationLayer {
 public:
  RandomFlipLayer(const std::string& mode, const NoiseOptions& o)
      : AugmentationLayer("RandomFlip", o.name, o.seed), mode_(mode) {
    params_.kind = ops::ImageTransformKind::flip;
    params_.horizontal = mode == "horizontal" || mode == "horizontal_and_vertical";
    params_.vertical = mode == "vertical" || mode == "horizontal_and_vertical";
    SYSTOLIC_CHECK(params_.horizontal || params_.vertical,
                   "layer '{}': mode '{}' is not horizontal, vertical or horizontal_and_vertical", name(),
                   mode);
  }
  void get_config(json& c) const override {
    write_base(c);
    c["seed"] = seed_json(given_seed_);
    c["mode"] = mode_;
  }

 protected:
  void forward(LayerCall& c) override {
    if (!c.training) {
      c.output = c.inputs[0];
      return;
    }
    const Tensor& x = c.inputs[0];
    Tensor& m = transforms(c);
    ops::random_image_transforms(m, params_, x.dim(1), x.dim(2), seed_for(c), c.training->counter);
    // A flip reads whole pixels: nearest interpolation is exact.
    ops::affine_transform_images(x, m, c.output, {.interpolation = ops::Interpolation::nearest});
  }

 private:
  std::string mode_;
  ops::ImageTransformParams params_;
};

void check_range(const std::string& layer, const char* key, const Factor& f, double lo, double hi,
                 bool open_lo) {
  bool ok = f.lower <= f.upper && f.upper <= hi && (open_lo ? f.lower > lo : f.lower >= lo);
  SYSTOLIC_CHECK(ok, "layer '{}': {} must lie in {}{}, {}], got ({}, {})", layer, key, open_lo ? "(" : "[",
                 lo, hi, f.lower, f.upper);
}

class RandomTranslationLayer final : public GeometricLayer {
 public:
  RandomTranslationLayer(Factor h, Factor w, const ImageAugmentOptions& o)
      : GeometricLayer("RandomTranslation", o), h_(h), w_(w) {
    check_range(name(), "height_factor", h, -1, 1, false);
    check_range(name(), "width_factor", w, -1, 1, false);
    params_ = {.kind = ops::ImageTransformKind::translation,
               .lower0 = h.lower,
               .upper0 = h.upper,
               .lower1 = w.lower,
               .upper1 = w.upper};
  }
  void get_config(json& c) const override {
    write_base(c);
    c["height_factor"] = factor_json(h_);
    c["width_factor"] = factor_json(w_);
    write_options(c, {"fill_mode", "interpolation", "seed", "fill_value"});
  }

 private:
  Factor h_, w_;
};

class RandomRotationLayer final : public GeometricLayer {
 public:
  RandomRotationLayer(Factor f, const ImageAugmentOptions& o) : GeometricLayer("RandomRotation", o), f_(f) {
    check_range(name(), "factor", f, -1, 1, false);
    params_ = {.kind = ops::ImageTransformKind::rotation, .lower0 = f.lower, .upper0 = f.upper};
  }
  void get_config(json& c) const override {
    write_base(c);
    c["factor"] = json::array({f_.lower, f_.upper});  // Keras 3 writes the (lower, upper) pair
    write_options(c, {"fill_mode", "fill_value", "interpolation", "seed"});
  }

 private:
  Factor f_;
};

class RandomZoomLayer final : public GeometricLayer {
 public:
  RandomZoomLayer(Factor h, std::optional<Factor> w, const ImageAugmentOptions& o)
      : GeometricLayer("RandomZoom", o), h_(h), w_(w) {
    check_range(name(), "height_factor", h, -1, 1, true);
    if (w) check_range(name(), "width_factor", *w, -1, 1, true);
    params_ = {.kind = ops::ImageTransformKind::zoom,
               .lower0 = h.lower,
               .upper0 = h.upper,
               .lower1 = w ? w->lower : h.lower,
               .upper1 = w ? w->upper : h.upper,
               .same_zoom = !w};
  }
  void get_config(json& c) const override {
    write_base(c);
    c["height_factor"] = factor_json(h_);
    c["width_factor"] = w_ ? factor_json(*w_) : json(nullptr);
    write_options(c, {"fill_mode", "interpolation", "seed", "fill_value"});
  }

 private:
  Factor h_;
  std::optional<Factor> w_;
};

class RandomContrastLayer final : public AugmentationLayer {
 public:
  RandomContrastLayer(Factor f, const RandomContrastOptions& o)
      : AugmentationLayer("RandomContrast", o.name, o.seed), o_(o) {
    // Keras 3 (BaseImagePreprocessingLayer._set_factor with bounds (0, 1)): a number f is the pair (0, f).
    if (!f.pair) f.lower = 0;
    check_range(name(), "factor", f, 0, 1, false);
    f_ = f;
    SYSTOLIC_CHECK(o.value_range[0] <= o.value_range[1], "layer '{}': value_range ({}, {}) is not increasing",
                   name(), o.value_range[0], o.value_range[1]);
    params_ = {.lower = 1.0 - f.lower,
               .upper = 1.0 + f.upper,
               .value_min = o.value_range[0],
               .value_max = o.value_range[1]};
  }
  void get_config(json& c) const override {
    write_base(c);
    c["factor"] = json::array({f_.lower, f_.upper});
    c["value_range"] = json::array({o_.value_range[0], o_.value_range[1]});
    c["seed"] = seed_json(given_seed_);
  }

 protected:
  void forward(LayerCall& c) override {
    if (!c.training) {
      c.output = c.inputs[0];
      return;
    }
    ops::random_contrast(c.inputs[0], c.output, params_, seed_for(c), c.training->counter);
  }

 private:
  Factor f_ = 0.0;
  RandomContrastOptions o_;
  ops::ContrastParams params_;
};

class RandomCropLayer final : public AugmentationLayer {
 public:
  RandomCropLayer(int height, int width, const NoiseOptions& o)
      : AugmentationLayer("RandomCrop", o.name, o.seed), height_(height), width_(width) {
    SYSTOLIC_CHECK(height > 0 && width > 0, "layer '{}': height and width must be positive, got {}x{}",
                   name(), height, width);
  }
  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects images (H, W, C), got " + in[0].keras_str());
    return {height_, width_, in[0][2]};
  }
  void get_config(json& c) const override {
    write_base(c);
    c["height"] = height_;
    c["width"] = width_;
    c["seed"] = json(seed_);  // Keras 3 writes the seed it drew when none was given
  }

 protected:
  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    if (!c.training && x.dim(1) == height_ && x.dim(2) == width_) {
      c.output = x;
      return;
    }
    ops::ImageTransformParams p{.kind = ops::ImageTransformKind::crop,
                                .crop_h = height_,
                                .crop_w = width_,
                                .crop_center = !c.training};
    Tensor& m = transforms(c);
    ops::random_image_transforms(m, p, x.dim(1), x.dim(2), seed_for(c),
                                 c.training ? c.training->counter : Tensor());
    ops::affine_transform_images(x, m, c.output, {.fill_mode = ops::FillMode::nearest});
  }

 private:
  std::int64_t height_, width_;
};

// ---- config readers

Factor read_factor(ConfigReader& r, const std::string& key) {
  if (!r.has(key)) r.fail_option(key, "missing");
  const json& v = r.get_raw(key);
  if (v.is_number()) return Factor(v.get<double>());
  if (v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number())
    return Factor(v[0].get<double>(), v[1].get<double>());
  r.fail_option(key, "expected a number or a pair of numbers, got " + v.dump());
}

std::optional<std::uint64_t> read_seed(ConfigReader& r) {
  if (auto s = r.get_optional_int("seed")) return static_cast<std::uint64_t>(*s);
  return std::nullopt;
}

void read_base(ConfigReader& r) {
  r.require_value("data_format", "channels_last");
  r.require_null("bounding_box_format");
}

ImageAugmentOptions read_options(ConfigReader& r) {
  read_base(r);
  ImageAugmentOptions o;
  o.fill_mode = r.get_string("fill_mode", o.fill_mode);
  o.interpolation = r.get_string("interpolation", o.interpolation);
  o.seed = read_seed(r);
  o.fill_value = r.get_double("fill_value", o.fill_value);
  o.name = r.name();
  return o;
}

}  // namespace

std::shared_ptr<Layer> random_flip_from_config(ConfigReader& r) {
  read_base(r);
  std::string mode = r.get_string("mode", "horizontal_and_vertical");
  return std::make_shared<RandomFlipLayer>(mode, NoiseOptions{.seed = read_seed(r), .name = r.name()});
}

std::shared_ptr<Layer> random_translation_from_config(ConfigReader& r) {
  Factor h = read_factor(r, "height_factor"), w = read_factor(r, "width_factor");
  return std::make_shared<RandomTranslationLayer>(h, w, read_options(r));
}

std::shared_ptr<Layer> random_rotation_from_config(ConfigReader& r) {
  Factor f = read_factor(r, "factor");
  return std::make_shared<RandomRotationLayer>(f, read_options(r));
}

std::shared_ptr<Layer> random_zoom_from_config(ConfigReader& r) {
  Factor h = read_factor(r, "height_factor");
  std::optional<Factor> w;
  if (r.has("width_factor") && !r.get_raw("width_factor").is_null()) w = read_factor(r, "width_factor");
  return std::make_shared<RandomZoomLayer>(h, w, read_options(r));
}

std::shared_ptr<Layer> random_contrast_from_config(ConfigReader& r) {
  read_base(r);
  Factor f = read_factor(r, "factor");
  RandomContrastOptions o;
  if (r.has("value_range")) {
    const json& v = r.get_raw("value_range");
    if (!(v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number()))
      r.fail_option("value_range", "expected a pair of numbers, got " + v.dump());
    o.value_range = {v[0].get<double>(), v[1].get<double>()};
  }
  o.seed = read_seed(r);
  o.name = r.name();
  return std::make_shared<RandomContrastLayer>(f, o);
}

std::shared_ptr<Layer> random_crop_from_config(ConfigReader& r) {
  read_base(r);
  if (!r.has("height")) r.fail_option("height", "missing");
  if (!r.has("width")) r.fail_option("width", "missing");
  int h = r.get_int("height", 0), w = r.get_int("width", 0);
  return std::make_shared<RandomCropLayer>(h, w, NoiseOptions{.seed = read_seed(r), .name = r.name()});
}

LayerRef RandomFlip(const std::string& mode, const NoiseOptions& options) {
  return LayerRef(std::make_shared<RandomFlipLayer>(mode, options));
}
LayerRef RandomTranslation(Factor height_factor, Factor width_factor, const ImageAugmentOptions& options) {
  return LayerRef(std::make_shared<RandomTranslationLayer>(height_factor, width_factor, options));
}
LayerRef RandomRotation(Factor factor, const ImageAugmentOptions& options) {
  return LayerRef(std::make_shared<RandomRotationLayer>(factor, options));
}
LayerRef RandomZoom(Factor height_factor, std::optional<Factor> width_factor,
                    const ImageAugmentOptions& options) {
  return LayerRef(std::make_shared<RandomZoomLayer>(height_factor, width_factor, options));
}
LayerRef RandomContrast(Factor factor, const RandomContrastOptions& options) {
  return LayerRef(std::make_shared<RandomContrastLayer>(factor, options));
}
LayerRef RandomCrop(int height, int width, const NoiseOptions& options) {
  return LayerRef(std::make_shared<RandomCropLayer>(height, width, options));
}

}  // namespace systolic::layers
