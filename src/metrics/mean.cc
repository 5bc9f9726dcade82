// Keras's Mean and Sum (include/systolic/metrics.h), on the host: Keras 3.15's reduce_to_samplewise_values
// (keras/src/metrics/reduction_metrics.py) and squeeze_or_expand_to_same_rank (keras/src/losses/loss.py).
#include <systolic/metrics.h>

#include <cstdint>
#include <vector>

namespace systolic::metrics {

namespace {

using Dims = std::vector<std::int64_t>;

std::int64_t count_of(const Dims& d, std::size_t from = 0) {
  std::int64_t n = 1;
  for (std::size_t i = from; i < d.size(); ++i) n *= d[i];
  return n;
}

// Each group of `inner` consecutive values summed (or averaged).
std::vector<double> reduce_inner(const std::vector<double>& v, std::int64_t inner, bool mean) {
  std::vector<double> out;
  if (inner <= 0) return out;
  for (std::size_t i = 0; i + std::size_t(inner) <= v.size(); i += std::size_t(inner)) {
    double s = 0;
    for (std::int64_t k = 0; k < inner; ++k) s += v[i + std::size_t(k)];
    out.push_back(mean ? s / double(inner) : s);
  }
  return out;
}

struct Samplewise {
  std::vector<double> values, weights;  // per sample (or one value for a scalar); weights when given
  bool weighted = false;
  std::size_t rank = 0;  // of the reduced values
};

Samplewise samplewise(const char* metric, const Tensor& values, const Tensor& sample_weight, bool mean) {
  Dims vd = values.shape().dims();
  std::vector<double> v = values.to_doubles();
  Samplewise out;
  if (sample_weight.defined()) {
    out.weighted = true;
    Dims wd = sample_weight.shape().dims();
    std::vector<double> w = sample_weight.to_doubles();
    if (vd.size() == wd.size() + 1 && vd.back() == 1) {  // squeeze_or_expand_to_same_rank
      if (wd.size() == 1)
        wd.push_back(1);
      else
        vd.pop_back();
    } else if (wd.size() == vd.size() + 1 && wd.back() == 1) {
      if (vd.size() == 1)
        vd.push_back(1);
      else
        wd.pop_back();
    }
    if (vd.size() > wd.size()) {  // the values reduced to the weights' rank
      v = reduce_inner(v, count_of(vd, wd.size()), mean);
      vd.resize(wd.size());
    }
    SYSTOLIC_CHECK(wd.size() == vd.size(),
                   "{}: sample_weight of shape {} does not broadcast to values of shape {}", metric,
                   sample_weight.shape().str(), values.shape().str());
    for (std::size_t i = 0; i < vd.size(); ++i)
      SYSTOLIC_CHECK(wd[i] == vd[i] || wd[i] == 1,
                     "{}: sample_weight of shape {} does not broadcast to values of shape {}", metric,
                     sample_weight.shape().str(), values.shape().str());
    // The weights broadcast to the values, and the values times them.
    std::vector<double> wb(v.size());
    for (std::size_t flat = 0; flat < v.size(); ++flat) {
      std::int64_t rest = std::int64_t(flat), at = 0, stride = 1;
      for (std::size_t i = vd.size(); i-- > 0;) {
        const std::int64_t index = rest % vd[i];
        rest /= vd[i];
        if (wd[i] != 1) at += index * stride;
        stride *= wd[i];
      }
      wb[flat] = w[std::size_t(at)];
      v[flat] *= wb[flat];
    }
    out.weights = vd.size() > 1 ? reduce_inner(wb, count_of(vd, 1), mean) : wb;
  }
  out.values = vd.size() > 1 ? reduce_inner(v, count_of(vd, 1), mean) : v;
  out.rank = vd.empty() ? 0 : 1;
  return out;
}

}  // namespace

void Mean::update_state(const Tensor& values, const Tensor& sample_weight) {
  Samplewise s = samplewise("Mean", values, sample_weight, /*mean=*/true);
  for (double x : s.values) total_ += x;
  if (s.weighted) {
    for (double w : s.weights) count_ += w;
  } else {
    count_ += s.rank >= 1 ? double(s.values.size()) : 1.0;
  }
}

void Sum::update_state(const Tensor& values, const Tensor& sample_weight) {
  for (double x : samplewise("Sum", values, sample_weight, /*mean=*/false).values) total_ += x;
}

}  // namespace systolic::metrics
