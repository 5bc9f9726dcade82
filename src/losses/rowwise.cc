// Keras's row losses (RowwiseLoss in include/systolic/losses.h): CosineSimilarity, CategoricalHinge and
// CategoricalFocalCrossentropy, each an ops::row_loss kind with its arguments.
#include <systolic/ops.h>

#include "losses/registry.h"

namespace systolic::losses {

bool RowwiseLoss::compute_weighted(LossArgs& a) const {
  ops::row_loss(a.output, a.labels, a.weights, a.total, a.doutput, params_, a.grad_scale);
  return false;
}

nlohmann::ordered_json RowwiseLoss::get_config() const {
  const ops::RowLossParams& p = params_;
  if (p.kind != ops::RowLoss::categorical_focal_crossentropy) return nlohmann::ordered_json::object();
  return {{"from_logits", p.from_logits},
          {"label_smoothing", p.label_smoothing},
          {"axis", -1},
          {"alpha", p.alpha},
          {"gamma", p.gamma}};
}

const Entry& cosine_similarity_entry() {
  static const Entry e{"CosineSimilarity", {"cosine_similarity"}, [](keras_object::StrictConfig& c) {
                         c.off("axis", -1);
                         return std::unique_ptr<Loss>(std::make_unique<CosineSimilarity>());
                       }};
  return e;
}

const Entry& categorical_hinge_entry() {
  static const Entry e{"CategoricalHinge", {"categorical_hinge"}, [](keras_object::StrictConfig&) {
                         return std::unique_ptr<Loss>(std::make_unique<CategoricalHinge>());
                       }};
  return e;
}

const Entry& categorical_focal_crossentropy_entry() {
  static const Entry e{
      "CategoricalFocalCrossentropy", {"categorical_focal_crossentropy"}, [](keras_object::StrictConfig& c) {
        CategoricalFocalCrossentropyOptions o;
        o.alpha = c.number("alpha", 0.25);
        o.gamma = c.number("gamma", 2.0);
        if (!(o.gamma >= 0)) c.fail(fmt::format("gamma {} is negative", o.gamma));
        o.from_logits = c.boolean("from_logits", false);
        o.label_smoothing = c.number("label_smoothing", 0.0);
        if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1))
          c.fail(fmt::format("label_smoothing {} is outside [0, 1]", o.label_smoothing));
        c.off("axis", -1);
        return std::unique_ptr<Loss>(std::make_unique<CategoricalFocalCrossentropy>(o));
      }};
  return e;
}

}  // namespace systolic::losses
