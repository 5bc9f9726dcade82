// The noise and image-augmentation layers (augment branch): GaussianNoise, GaussianDropout, RandomFlip,
// RandomTranslation, RandomRotation, RandomZoom, RandomContrast, RandomCrop.
//
// Known values come from real Keras 3 (tests/reference/augment_layers.py writes tests/fixtures/augment_layers/):
// systolic's random draws cannot equal TensorFlow's, so the fixture holds each layer's transform and output for
// FIXED draws, which the tests feed to the same functions the ops use (ops/image_transform_math.h). The random
// draws themselves are tested for their ranges and statistics, reproducibility for a (seed, step) and change across
// steps; the noise layers' gradients by finite differences in double precision.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "json_fixture.h"
#include "layers/config.h"
#include "ops/augment.h"
#include "ops/image_transform_math.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::ordered_json;
using systolic::testing::random_tensor;

namespace {

const json& fixture() {
  return systolic::testing::json_fixture<json>("augment_layers/augment_layers.json");
}

Tensor from_json(const json& values, Shape shape, DType dtype = DType::float64) {
  auto v = values.get<std::vector<double>>();
  Tensor t(shape, dtype);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::float64)
      t.data<double>()[i] = v[i];
    else
      t.data<float>()[i] = static_cast<float>(v[i]);
  }
  return t;
}

Shape shape_of(const json& j) {
  std::vector<std::int64_t> d = j.get<std::vector<std::int64_t>>();
  return Shape(d);
}

Tensor fixture_images(DType dtype = DType::float64) {
  return from_json(fixture()["images"]["values"], shape_of(fixture()["images"]["shape"]), dtype);
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol) && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
}

ops::FillMode fill_of(const std::string& s) {
  if (s == "reflect") return ops::FillMode::reflect;
  if (s == "wrap") return ops::FillMode::wrap;
  if (s == "constant") return ops::FillMode::constant;
  return ops::FillMode::nearest;
}

// Runs one layer call (training with the given step, or inference) on x.
Tensor run(LayerRef layer, const Tensor& x, bool training, double step = 0, int replica = 0) {
  SymbolicTensor out = layer(layers::Input(x.shape().without_batch(), {.dtype = x.dtype()}));
  LayerCall c;
  c.inputs = {x};
  c.output = Tensor(out.shape().with_batch(x.dim(0)), x.dtype());
  TrainingStep t{.counter = Tensor::full({1}, step, DType::float64), .replica = replica};
  c.training = training ? &t : nullptr;
  layer->call_forward(c);
  return c.output;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

}  // namespace

// ---------------------------------------------------------------- Keras's sampling (affine_transform)

TEST(AugmentKeras, AffineTransformMatchesKerasForEveryFillModeAndInterpolation) {
  Tensor x = fixture_images();
  const json& a = fixture()["affine"];
  Tensor m = from_json(a["transforms"], {x.dim(0), 8}, DType::float32);
  for (const json& k : a["cases"]) {
    Tensor y(x.shape(), DType::float64);
    ops::affine_transform_images(
        x, m, y,
        {.fill_mode = fill_of(k["fill_mode"]),
         .interpolation =
             k["interpolation"] == "nearest" ? ops::Interpolation::nearest : ops::Interpolation::bilinear,
         .fill_value = k["fill_value"].get<double>()});
    // TensorFlow samples in float32 (values up to 255).
    expect_near_all(y.to_doubles(), k["output"].get<std::vector<double>>(), 2e-3,
                    std::string("affine ") + k["fill_mode"].get<std::string>() + " " +
                        k["interpolation"].get<std::string>());
  }
}

TEST(AugmentKeras, LayerTransformsAndOutputsMatchKerasForFixedDraws) {
  Tensor x = fixture_images();
  const std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2);
  for (const json& k : fixture()["geometric"]) {
    const std::string layer = k["layer"];
    ops::image::TransformConfig config;
    std::vector<ops::image::TransformDraw> draws(N);
    ops::AffineTransformParams sample;
    if (layer == "RandomFlip") {
      const std::string mode = k["mode"];
      config.kind = ops::image::kFlip;
      config.horizontal = mode != "vertical";
      config.vertical = mode != "horizontal";
      for (std::int64_t n = 0; n < N; ++n) draws[n].flip = k["flip"][n].get<bool>();
      sample.interpolation = ops::Interpolation::nearest;
    } else {
      sample = {.fill_mode = fill_of(k["fill_mode"]),
                .interpolation = k["interpolation"] == "nearest" ? ops::Interpolation::nearest
                                                                 : ops::Interpolation::bilinear,
                .fill_value = k["fill_value"].get<double>()};
      for (std::int64_t n = 0; n < N; ++n) {
        if (layer == "RandomTranslation") {
          config.kind = ops::image::kTranslation;
          draws[n].dx = k["dx"][n].get<double>();
          draws[n].dy = k["dy"][n].get<double>();
        } else if (layer == "RandomRotation") {
          config.kind = ops::image::kRotation;
          draws[n].angle = k["angle"][n].get<double>();
        } else {
          config.kind = ops::image::kZoom;
          draws[n].zx = k["zx"][n].get<double>();
          draws[n].zy = k["zy"][n].get<double>();
        }
      }
    }
    Tensor m({N, 8}, DType::float32);
    for (std::int64_t n = 0; n < N; ++n) {
      double t[8];
      ops::image::transform_matrix(config, draws[n], H, W, t);
      for (int i = 0; i < 8; ++i) m.data<float>()[n * 8 + i] = static_cast<float>(t[i]);
    }
    std::string what =
        layer + " " + k.value("mode", "") + k.value("fill_mode", "") + " " + k.value("interpolation", "");
    if (k.contains("matrix"))
      expect_near_all(m.to_doubles(), k["matrix"].get<std::vector<double>>(), 1e-5, what + " matrix");
    Tensor y(x.shape(), DType::float64);
    ops::affine_transform_images(x, m, y, sample);
    expect_near_all(y.to_doubles(), k["output"].get<std::vector<double>>(), 2e-3, what);
  }
}

TEST(AugmentKeras, ContrastMatchesKerasForFixedFactors) {
  Tensor x = fixture_images();
  for (const json& k : fixture()["contrast"]) {
    // The op draws the factor; check the formula with a range of one value per image.
    std::vector<double> want = k["output"].get<std::vector<double>>(), got;
    const std::int64_t N = x.dim(0), per = x.numel() / N;
    for (std::int64_t n = 0; n < N; ++n) {
      double f = k["factor"][n].get<double>();
      Tensor xn = x.slice(n, n + 1).clone(), yn(xn.shape(), DType::float64);
      ops::random_contrast(
          xn, yn, {f, f, k["value_range"][0].get<double>(), k["value_range"][1].get<double>()}, 1, Tensor());
      auto v = yn.to_doubles();
      got.insert(got.end(), v.begin(), v.end());
      (void)per;
    }
    expect_near_all(got, want, 2e-3, "contrast");
  }
}

TEST(AugmentKeras, RandomCropMatchesKeras) {
  Tensor x = fixture_images();
  const std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3);
  for (const json& k : fixture()["crop"]) {
    const std::int64_t h = k["height"], w = k["width"];
    ops::image::TransformConfig config{.kind = ops::image::kCrop, .out_h = h, .out_w = w};
    ops::image::TransformDraw d;
    d.dy = k["h_start"].get<double>();
    d.dx = k["w_start"].get<double>();
    Tensor m({N, 8}, DType::float32);
    for (std::int64_t n = 0; n < N; ++n) {
      double t[8];
      ops::image::transform_matrix(config, d, H, W, t);
      for (int i = 0; i < 8; ++i) m.data<float>()[n * 8 + i] = static_cast<float>(t[i]);
    }
    Tensor y({N, h, w, C}, DType::float64);
    ops::affine_transform_images(x, m, y, {.fill_mode = ops::FillMode::nearest});
    expect_near_all(y.to_doubles(), k["output"].get<std::vector<double>>(), 2e-3,
                    "crop " + std::to_string(h) + "x" + std::to_string(w));
  }
}

// ---------------------------------------------------------------- the random draws

TEST(AugmentDraws, RangesAndStatisticsOfEveryKind) {
  using K = ops::ImageTransformKind;
  const std::int64_t N = 4000, H = 20, W = 30;
  Tensor step = Tensor::full({1}, 3.0, DType::float64);
  auto draw = [&](const ops::ImageTransformParams& p) {
    Tensor m({N, 8}, DType::float32);
    ops::random_image_transforms(m, p, H, W, 42, step);
    return m.to_doubles();
  };
  // Translation: shifts uniform in [lower*H, upper*H) and [lower*W, upper*W).
  auto t = draw({.kind = K::translation, .lower0 = -0.2, .upper0 = 0.4, .lower1 = 0.1, .upper1 = 0.3});
  std::vector<double> dy, dx;
  for (std::int64_t n = 0; n < N; ++n) dy.push_back(-t[n * 8 + 5]), dx.push_back(-t[n * 8 + 2]);
  EXPECT_GE(*std::min_element(dy.begin(), dy.end()), -0.2 * H);
  EXPECT_LT(*std::max_element(dy.begin(), dy.end()), 0.4 * H);
  EXPECT_NEAR(mean(dy), 0.1 * H, 0.1);
  EXPECT_GE(*std::min_element(dx.begin(), dx.end()), 0.1 * W);
  EXPECT_LT(*std::max_element(dx.begin(), dx.end()), 0.3 * W);
  EXPECT_NEAR(mean(dx), 0.2 * W, 0.1);
  // Rotation: angles in [lower*360, upper*360) degrees, mean in the middle.
  auto r = draw({.kind = K::rotation, .lower0 = -0.1, .upper0 = 0.2});
  std::vector<double> ang;
  for (std::int64_t n = 0; n < N; ++n) ang.push_back(std::atan2(r[n * 8 + 3], r[n * 8 + 0]) * 180 / M_PI);
  EXPECT_GE(*std::min_element(ang.begin(), ang.end()), -36.001);
  EXPECT_LT(*std::max_element(ang.begin(), ang.end()), 72.001);
  EXPECT_NEAR(mean(ang), 18, 1.5);
  // Zoom: 1 + factor; without width_factor both axes zoom alike.
  auto z = draw({.kind = K::zoom, .lower0 = -0.3, .upper0 = 0.2, .same_zoom = true});
  std::vector<double> zy;
  for (std::int64_t n = 0; n < N; ++n) {
    EXPECT_EQ(z[n * 8 + 0], z[n * 8 + 4]);
    zy.push_back(z[n * 8 + 4]);
  }
  EXPECT_GE(*std::min_element(zy.begin(), zy.end()), 0.7 - 1e-6);
  EXPECT_LT(*std::max_element(zy.begin(), zy.end()), 1.2 + 1e-6);
  EXPECT_NEAR(mean(zy), 0.95, 0.01);
  // Flip: half the images.
  auto f = draw({.kind = K::flip, .horizontal = true});
  int flipped = 0;
  for (std::int64_t n = 0; n < N; ++n) flipped += f[n * 8] < 0;
  EXPECT_NEAR(double(flipped) / N, 0.5, 0.03);
  // Crop: one window for the batch, its corner within [0, H - h] x [0, W - w], every corner reachable.
  std::set<std::pair<int, int>> corners;
  for (int s = 0; s < 400; ++s) {
    Tensor m({3, 8}, DType::float32);
    ops::random_image_transforms(m, {.kind = K::crop, .crop_h = 18, .crop_w = 27}, H, W, 42,
                                 Tensor::full({1}, double(s), DType::float64));
    auto v = m.to_doubles();
    EXPECT_EQ(v[2], v[10]);
    EXPECT_EQ(v[5], v[13]);
    corners.insert({int(v[5]), int(v[2])});
    EXPECT_TRUE(v[5] >= 0 && v[5] <= 2 && v[2] >= 0 && v[2] <= 3);
  }
  EXPECT_EQ(corners.size(), 12u);
}

TEST(AugmentDraws, NoiseIsStandardNormalReproducibleAndFreshEachStep) {
  const std::int64_t n = 200001;
  Tensor x = Tensor::zeros({n}, DType::float64), y(x.shape(), DType::float64), y2(x.shape(), DType::float64);
  Tensor step = Tensor::full({1}, 4.0, DType::float64);
  ops::gaussian_noise_forward(x, y, {.stddev = 1.0}, 9, step);
  auto v = y.to_doubles();
  double m = mean(v), var = 0, m4 = 0, above2 = 0;
  for (double z : v) var += (z - m) * (z - m), m4 += z * z * z * z, above2 += std::abs(z) > 2;
  var /= n;
  EXPECT_NEAR(m, 0, 0.01);
  EXPECT_NEAR(var, 1, 0.01);
  EXPECT_NEAR(m4 / n, 3, 0.1);  // kurtosis of a normal
  EXPECT_NEAR(above2 / n, 0.0455, 0.003);
  ops::gaussian_noise_forward(x, y2, {.stddev = 1.0}, 9, step);
  EXPECT_EQ(v, y2.to_doubles());
  ops::gaussian_noise_forward(x, y2, {.stddev = 1.0}, 9, Tensor::full({1}, 5.0, DType::float64));
  EXPECT_NE(v, y2.to_doubles());
}

TEST(AugmentDraws, ContrastFactorsCoverTheirRange) {
  // One-pixel images: the mean is the pixel, so y = x; two pixels (0, 2): y = 1 + (x - 1) f.
  Tensor x({2000, 1, 2, 1}, DType::float64);
  for (std::int64_t n = 0; n < 2000; ++n) x.data<double>()[2 * n] = 0, x.data<double>()[2 * n + 1] = 2;
  Tensor y(x.shape(), DType::float64);
  ops::random_contrast(x, y, {0.5, 1.5, -100, 100}, 3, Tensor::full({1}, 1.0, DType::float64));
  std::vector<double> f;
  for (std::int64_t n = 0; n < 2000; ++n) f.push_back(y.data<double>()[2 * n + 1] - 1);
  EXPECT_GE(*std::min_element(f.begin(), f.end()), 0.5);
  EXPECT_LT(*std::max_element(f.begin(), f.end()), 1.5);
  EXPECT_NEAR(mean(f), 1.0, 0.02);
}

// ---------------------------------------------------------------- the layers

TEST(AugmentLayers, IdentityAtInference) {
  Tensor x = random_tensor({2, 6, 5, 3}, 1, DType::float32, 0, 255);
  std::vector<LayerRef> all = {layers::GaussianNoise(0.5),  layers::GaussianDropout(0.3),
                               layers::RandomFlip(),        layers::RandomTranslation(0.3, 0.3),
                               layers::RandomRotation(0.2), layers::RandomZoom(0.3),
                               layers::RandomContrast(0.5), layers::RandomCrop(6, 5)};
  for (auto& l : all) EXPECT_EQ(run(l, x, false).to_doubles(), x.to_doubles()) << l->class_name();
}

TEST(AugmentLayers, TrainingDrawsPerStepAndReplica) {
  Tensor x = random_tensor({4, 8, 8, 2}, 2, DType::float32, 0, 255);
  std::vector<LayerRef> all = {layers::GaussianNoise(0.5, {.seed = 1}),
                               layers::GaussianDropout(0.3, {.seed = 2}),
                               layers::RandomTranslation(0.3, 0.3, {.seed = 3}),
                               layers::RandomRotation(0.2, {.seed = 4}),
                               layers::RandomZoom(0.3, std::nullopt, {.seed = 5}),
                               layers::RandomContrast(0.5, {.seed = 6}),
                               layers::RandomCrop(5, 6, {.seed = 7})};
  for (auto& l : all) {
    auto a = run(l, x, true, 3).to_doubles();
    EXPECT_EQ(a, run(l, x, true, 3).to_doubles()) << l->class_name() << ": a function of (seed, step)";
    std::vector<double> b;
    for (int s = 4; s < 8 && (b.empty() || b == a); ++s) b = run(l, x, true, s).to_doubles();
    EXPECT_NE(a, b) << l->class_name() << ": fresh draws at other steps";
    EXPECT_NE(a, run(l, x, true, 3, 1).to_doubles()) << l->class_name() << ": each replica its own";
  }
  // RandomFlip: each image flipped horizontally or not.
  auto flip = layers::RandomFlip("horizontal", {.seed = 8});
  Tensor y = run(flip, x, true, 1);
  auto xv = x.to_doubles(), yv = y.to_doubles();
  for (std::int64_t n = 0; n < 4; ++n) {
    bool same = true, mirrored = true;
    for (std::int64_t h = 0; h < 8; ++h)
      for (std::int64_t w = 0; w < 8; ++w)
        for (std::int64_t c = 0; c < 2; ++c) {
          double got = yv[((n * 8 + h) * 8 + w) * 2 + c];
          same = same && got == xv[((n * 8 + h) * 8 + w) * 2 + c];
          mirrored = mirrored && got == xv[((n * 8 + h) * 8 + 7 - w) * 2 + c];
        }
    EXPECT_TRUE(same || mirrored) << "image " << n;
  }
}

TEST(AugmentLayers, NoiseLayersFiniteDifferenceGradients) {
  // L = sum(r * layer(x)) at a fixed step; the noise is recomputed by backward.
  set_floatx(DType::float64);
  for (bool multiplicative : {false, true}) {
    LayerRef l =
        multiplicative ? layers::GaussianDropout(0.4, {.seed = 5}) : layers::GaussianNoise(0.3, {.seed = 5});
    SymbolicTensor out = l(layers::Input({3, 4, 2}, {.dtype = DType::float64}));
    Tensor x = random_tensor({2, 3, 4, 2}, 1, DType::float64),
           r = random_tensor({2, 3, 4, 2}, 2, DType::float64);
    TrainingStep t{.counter = Tensor::full({1}, 6.0, DType::float64)};
    auto loss = [&] {
      LayerCall c;
      c.inputs = {x};
      c.output = Tensor(out.shape().with_batch(2), DType::float64);
      c.training = &t;
      l->call_forward(c);
      auto y = c.output.to_doubles(), rv = r.to_doubles();
      double s = 0;
      for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * rv[i];
      return s;
    };
    LayerCall c;
    c.inputs = {x};
    c.output = Tensor(out.shape().with_batch(2), DType::float64);
    c.training = &t;
    l->call_forward(c);
    c.doutput = r.clone();
    c.dinputs = {Tensor::full(x.shape(), 7.0, DType::float64)};
    l->call_backward(c, false);
    auto dx = c.dinputs[0].to_doubles();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      double keep = x.data<double>()[i];
      x.data<double>()[i] = keep + 1e-5;
      double up = loss();
      x.data<double>()[i] = keep - 1e-5;
      double down = loss();
      x.data<double>()[i] = keep;
      double numeric = (up - down) / 2e-5;
      EXPECT_LT(std::abs(dx[i] - numeric) / std::max(1.0, std::abs(numeric)), 1e-6)
          << l->class_name() << " dx[" << i << "]";
    }
  }
  set_floatx(DType::float32);
}

TEST(AugmentLayers, GeometricLayersRefuseAnInputGradient) {
  auto l = layers::RandomRotation(0.1);
  SymbolicTensor out = l(layers::Input({4, 4, 1}));
  LayerCall c;
  c.inputs = {Tensor::zeros({1, 4, 4, 1})};
  c.output = Tensor({1, 4, 4, 1});
  TrainingStep t{.counter = Tensor::full({1}, 0.0, DType::float64)};
  c.training = &t;
  l->call_forward(c);
  c.doutput = Tensor::zeros({1, 4, 4, 1});
  c.dinputs = {Tensor({1, 4, 4, 1})};
  EXPECT_THAT(systolic::testing::error_of([&] { l->call_backward(c, false); }),
              ::testing::HasSubstr("passes no gradient to its input"));
  c.dinputs = {Tensor()};
  EXPECT_NO_THROW(l->call_backward(c, false));
  (void)out;
}

// ---------------------------------------------------------------- configs and Keras files

TEST(AugmentConfig, KerasConfigsRoundTrip) {
  for (const json& e : fixture()["configs"]) {
    const std::string cls = e["class_name"];
    layers::json config = layers::json::parse(e["config"].dump());
    auto layer = layers::layer_from_config(cls, config);
    layers::json back;
    layer->get_config(back);
    for (auto& [key, value] : config.items()) {
      if (key == "dtype") continue;  // Keras 3 writes a DTypePolicy object, systolic the policy's name
      ASSERT_TRUE(back.contains(key)) << cls << " does not write " << key;
      if (value.is_number())
        EXPECT_NEAR(back[key].get<double>(), value.get<double>(), 1e-12) << cls << " " << key;
      else if (value.is_array() && value.size() == 2 && value[0].is_number())
        for (int i = 0; i < 2; ++i)
          EXPECT_NEAR(back[key][i].get<double>(), value[i].get<double>(), 1e-12) << cls << " " << key;
      else
        EXPECT_EQ(back[key].dump(), value.dump()) << cls << " " << key;
    }
    // Keys in Keras's order.
    std::vector<std::string> want, got;
    for (auto& [k, v] : config.items()) want.push_back(k);
    for (auto& [k, v] : back.items()) got.push_back(k);
    EXPECT_EQ(got, want) << cls;
  }
}

TEST(AugmentConfig, StrictReading) {
  auto bad = [](const std::string& cls, const std::string& text) {
    return systolic::testing::error_of([&] { layers::layer_from_config(cls, layers::json::parse(text)); });
  };
  EXPECT_THAT(bad("RandomFlip", R"({"name": "f", "mode": "diagonal"})"), ::testing::HasSubstr("diagonal"));
  EXPECT_THAT(bad("RandomFlip", R"({"name": "f", "data_format": "channels_first"})"),
              ::testing::HasSubstr("data_format"));
  EXPECT_THAT(bad("RandomRotation", R"({"name": "r", "factor": 0.1, "fill_mode": "mirror"})"),
              ::testing::HasSubstr("mirror"));
  EXPECT_THAT(bad("RandomZoom", R"({"name": "z", "height_factor": -1.0})"),
              ::testing::HasSubstr("height_factor"));
  EXPECT_THAT(bad("RandomContrast", R"({"name": "c", "factor": 0.2, "value_range": [0]})"),
              ::testing::HasSubstr("value_range"));
  EXPECT_THAT(bad("GaussianNoise", R"({"name": "g", "stddev": 0.1, "noise_shape": null, "x": 1})"),
              ::testing::HasSubstr("noise_shape"));
  EXPECT_THAT(bad("GaussianDropout", R"({"name": "g"})"), ::testing::HasSubstr("rate"));
  EXPECT_THAT(bad("RandomTranslation", R"({"name": "t", "height_factor": 0.1, "width_factor": 0.1,
                                           "bounding_box_format": "xyxy"})"),
              ::testing::HasSubstr("bounding_box_format"));
}

TEST(AugmentConfig, KerasModelFileLoadsAndPredictsWithTheLayersAsIdentity) {
  const json& m = fixture()["model"];
  Model model = load_model(systolic::testing::source_dir() + "/tests/fixtures/augment_layers/" +
                           m["file"].get<std::string>());
  Tensor x = from_json(m["inputs"], shape_of(fixture()["images"]["shape"]), DType::float32);
  Tensor y = model.predict(x);
  expect_near_all(y.to_doubles(), m["predictions"].get<std::vector<double>>(), 1e-3, "predictions");
}

TEST(AugmentKeras, RandomCropAtInferenceIsSmartResize) {
  Tensor x = fixture_images(DType::float32);
  for (const json& k : fixture()["smart_resize"]) {
    int h = k["height"], w = k["width"];
    Tensor y = run(layers::RandomCrop(h, w), x, false);
    expect_near_all(y.to_doubles(), k["output"].get<std::vector<double>>(), 2e-3,
                    "smart_resize " + std::to_string(h) + "x" + std::to_string(w));
  }
}

TEST(AugmentLayers, ModelTrainsWithTheLayersOnItsInputsAndRefusesThemBehindTrainableLayers) {
  set_random_seed(3);
  clear_session();
  auto in = layers::Input({12, 10, 3});
  auto t = layers::RandomFlip("horizontal")(in);
  t = layers::RandomTranslation(0.1, 0.1)(t);
  t = layers::RandomRotation(0.05)(t);
  t = layers::RandomZoom(0.1)(t);
  t = layers::RandomContrast(0.2, {.value_range = {0, 1}})(t);
  t = layers::RandomCrop(10, 8)(t);
  t = layers::GaussianNoise(0.05)(t);
  t = layers::Conv2D(4, {3, 3}, {.activation = "relu"})(t);
  t = layers::GaussianDropout(0.2)(t);  // behind a trainable layer: passes its gradient
  t = layers::GlobalAveragePooling2D()(t);
  Model model(in, layers::Dense(3)(t));
  model.compile("adam", "sparse_categorical_crossentropy", {"accuracy"});
  Tensor x = random_tensor({64, 12, 10, 3}, 5, DType::float32, 0, 1);
  Tensor y({64}, DType::float32);
  for (int i = 0; i < 64; ++i) y.data<float>()[i] = float(i % 3);
  auto history = model.fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0});
  EXPECT_TRUE(std::isfinite(history["loss"][1]));
  EXPECT_EQ(model.predict(x).shape(), Shape({64, 3}));

  // A geometric layer behind a trainable one would need the gradient it does not pass.
  clear_session();
  auto in2 = layers::Input({8, 8, 1});
  auto u = layers::Conv2D(2, {1, 1})(in2);
  u = layers::RandomRotation(0.1)(u);
  u = layers::GlobalAveragePooling2D()(u);
  Model bad(in2, layers::Dense(2)(u));
  bad.compile("adam", "sparse_categorical_crossentropy");
  Tensor x2 = random_tensor({8, 8, 8, 1}, 6), y2 = Tensor::zeros({8});
  EXPECT_THAT(
      systolic::testing::error_of([&] { bad.fit(x2, y2, {.batch_size = 8, .epochs = 1, .verbose = 0}); }),
      ::testing::HasSubstr("passes no gradient to its input"));
}
