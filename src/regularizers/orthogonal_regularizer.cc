// Keras's OrthogonalRegularizer: factor times the mean absolute cosine between distinct rows (or columns) of a
// rank-2 weight (ops::orthogonal_regularize).
#include <systolic/ops.h>

#include <cmath>

#include "regularizers/registry.h"

namespace systolic::regularizers {

namespace {

class Orthogonal final : public RegularizerBase {
 public:
  Orthogonal(double factor, std::string mode) : factor_(factor), mode_(std::move(mode)) {}
  std::string class_name() const override { return "OrthogonalRegularizer"; }
  nlohmann::ordered_json get_config() const override { return {{"factor", factor_}, {"mode", mode_}}; }
  void apply(const Tensor& x, Tensor& total, Tensor& dx, double total_scale,
             double grad_scale) const override {
    ops::orthogonal_regularize(x, total, dx, factor_, mode_ == "columns", total_scale, grad_scale);
  }

 private:
  double factor_;
  std::string mode_;
};

}  // namespace

Regularizer OrthogonalRegularizer(double factor, const std::string& mode) {
  SYSTOLIC_CHECK(factor >= 0 && std::isfinite(factor),
                 "OrthogonalRegularizer: factor must be a non-negative float, got {}", factor);
  SYSTOLIC_CHECK(mode == "rows" || mode == "columns",
                 "OrthogonalRegularizer: mode must be \"rows\" or \"columns\", got \"{}\"", mode);
  return Regularizer(std::make_shared<Orthogonal>(factor, mode));
}

const Entry& orthogonal_regularizer_entry() {
  static const Entry e{
      "OrthogonalRegularizer", {"orthogonal_regularizer"}, [](keras_object::StrictConfig& c) {
        return OrthogonalRegularizer(c.number("factor", 0.01), c.string("mode", "rows"));
      }};
  return e;
}

}  // namespace systolic::regularizers
