// Keras's weight initializers (keras.initializers, include/systolic/initializers.h), computed on the host in double,
// then stored. A seeded initializer draws from a generator started at its seed.
#include <systolic/layer.h>

#include <algorithm>
#include <cmath>
#include <vector>

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

// Keras 3's Orthogonal: a (max(rows, cols), min(rows, cols)) standard normal matrix, its QR's Q with the signs of
// R's diagonal (Gram-Schmidt gives a positive diagonal), transposed when rows < cols; rows = prod(shape[:-1]).
void orthogonal(double* p, const Shape& s, double gain, Generator& g) {
  std::int64_t cols = s.rank() ? s[-1] : 1, rows = cols ? (s.rank() ? s.numel() / cols : 1) : 0;
  std::int64_t m = std::max(rows, cols), k = std::min(rows, cols);
  std::vector<double> a(m * k);  // row-major (m, k); columns orthonormalised
  for (auto& v : a) v = g.normal();
  for (std::int64_t j = 0; j < k; ++j) {
    for (std::int64_t i = 0; i < j; ++i) {
      double dot = 0;
      for (std::int64_t r = 0; r < m; ++r) dot += a[r * k + i] * a[r * k + j];
      for (std::int64_t r = 0; r < m; ++r) a[r * k + j] -= dot * a[r * k + i];
    }
    double norm = 0;
    for (std::int64_t r = 0; r < m; ++r) norm += a[r * k + j] * a[r * k + j];
    norm = std::sqrt(norm);
    for (std::int64_t r = 0; r < m; ++r) a[r * k + j] /= norm;
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      p[r * cols + c] = gain * (rows >= cols ? a[r * k + c] : a[c * k + r]);
}
}  // namespace

void initialize(Tensor& t, const Initializer& init, Generator& global) {
  Generator seeded(init.seed.value_or(0));
  Generator& g = init.seed ? seeded : global;
  const std::string& name = init.name;
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
  } else if (name == "constant") {
    host.fill(init.value);
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
    for (std::int64_t i = 0; i < n; ++i) p[i] = init.minval + (init.maxval - init.minval) * g.uniform();
  } else if (name == "random_normal") {
    for (std::int64_t i = 0; i < n; ++i) p[i] = init.mean + g.normal() * init.stddev;
  } else if (name == "truncated_normal") {
    for (std::int64_t i = 0; i < n; ++i) p[i] = init.mean + truncated_normal(g, init.stddev);
  } else if (name == "variance_scaling") {
    double fan = init.mode == "fan_in" ? fan_in : init.mode == "fan_out" ? fan_out : (fan_in + fan_out) / 2.0;
    double var = init.scale / std::max(1.0, fan);
    if (init.distribution == "uniform")
      uniform(std::sqrt(3.0 * var));
    else if (init.distribution == "untruncated_normal")
      for (std::int64_t i = 0; i < n; ++i) p[i] = g.normal() * std::sqrt(var);
    else
      normal(std::sqrt(var));
  } else if (name == "orthogonal") {
    SYSTOLIC_CHECK(t.rank() >= 2, "the orthogonal initializer needs a weight of rank >= 2, got shape {}",
                   t.shape().str());
    orthogonal(p, t.shape(), init.gain, g);
  } else if (name == "identity") {
    SYSTOLIC_CHECK(t.rank() == 2, "the identity initializer needs a weight of rank 2, got shape {}",
                   t.shape().str());
    host.fill(0.0);
    for (std::int64_t i = 0; i < std::min(t.dim(0), t.dim(1)); ++i) p[i * t.dim(1) + i] = init.gain;
  } else {
    fail(
        "unknown initializer '{}' (known: zeros, ones, constant, glorot_uniform, glorot_normal, he_uniform, "
        "he_normal, lecun_uniform, lecun_normal, random_uniform, random_normal, truncated_normal, "
        "variance_scaling, orthogonal, identity)",
        name);
  }
  t.copy_from(host.to(t.dtype()).to(t.device()));
}

}  // namespace systolic
