// Keras's weight initializers (keras.initializers), computed on the host in double, then stored.
#include <systolic/layer.h>

#include <cmath>

namespace systolic {

namespace {
std::pair<double, double> fans(const Shape& s) {
  if (s.rank() == 0) return {1, 1};
  if (s.rank() == 1) return {double(s[0]), double(s[0])};
  if (s.rank() == 2) return {double(s[0]), double(s[1])};
  double rf = 1;
  for (int i = 0; i < s.rank() - 2; ++i) rf *= double(s[i]);
  return {double(s[-2]) * rf, double(s[-1]) * rf};
}

// Keras's truncated normal: redraw values beyond 2 stddev; the stddev is divided by 0.8796... so the truncated
// distribution has the requested variance (VarianceScaling).
double truncated_normal(Generator& g, double stddev) {
  for (;;) {
    double v = g.normal();
    if (std::abs(v) <= 2.0) return v * stddev;
  }
}
}  // namespace

void initialize(Tensor& t, const std::string& name, Generator& g) {
  auto [fan_in, fan_out] = fans(t.shape());
  Tensor host(t.shape(), DType::float64);
  double* p = host.data<double>();
  std::int64_t n = t.numel();
  auto uniform = [&](double limit) {
    for (std::int64_t i = 0; i < n; ++i) p[i] = (2.0 * g.uniform() - 1.0) * limit;
  };
  auto normal = [&](double stddev) {
    for (std::int64_t i = 0; i < n; ++i) p[i] = truncated_normal(g, stddev / 0.87962566103423978);
  };
  if (name == "zeros") {
    host.fill(0.0);
  } else if (name == "ones") {
    host.fill(1.0);
  } else if (name == "glorot_uniform") {
    uniform(std::sqrt(6.0 / (fan_in + fan_out)));
  } else if (name == "glorot_normal") {
    normal(std::sqrt(2.0 / (fan_in + fan_out)));
  } else if (name == "he_uniform") {
    uniform(std::sqrt(6.0 / fan_in));
  } else if (name == "he_normal") {
    normal(std::sqrt(2.0 / fan_in));
  } else if (name == "lecun_uniform") {
    uniform(std::sqrt(3.0 / fan_in));
  } else if (name == "lecun_normal") {
    normal(std::sqrt(1.0 / fan_in));
  } else if (name == "random_uniform") {
    uniform(0.05);
  } else if (name == "random_normal") {
    for (std::int64_t i = 0; i < n; ++i) p[i] = g.normal() * 0.05;
  } else {
    fail(
        "unknown initializer '{}' (known: zeros, ones, glorot_uniform, glorot_normal, he_uniform, he_normal, "
        "lecun_uniform, lecun_normal, random_uniform, random_normal)",
        name);
  }
  t.copy_from(host.to(t.dtype()).to(t.device()));
}

}  // namespace systolic
