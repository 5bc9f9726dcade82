// Muon (Keras 3): the matrices step by the Newton-Schulz orthogonalisation of their momentum (ops::muon_update, its
// formulas in ops/optimizer_math.h), every other variable by AdamW (ops::adam_update) at the rate times
// adam_lr_ratio; which is which by Keras's _should_use_adamw (the rank, the path).
#include <systolic/ops.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

Muon::Muon(double learning_rate, Options options, std::optional<double> weight_decay)
    : Optimizer(learning_rate), options_(std::move(options)) {
  set_weight_decay(weight_decay);
  SYSTOLIC_CHECK(options_.ns_steps >= 0, "Muon: ns_steps {} must be >= 0", options_.ns_steps);
  for (auto& pattern : options_.exclude_layers) {
    try {
      std::regex check(pattern);
    } catch (const std::regex_error& e) {
      fail("Muon: exclude_layers: '{}' is not a regular expression ({})", pattern, e.what());
    }
  }
}

nlohmann::ordered_json Muon::get_config() const {
  const Options& o = options_;
  auto or_null = [](std::optional<double> v) { return v ? nlohmann::ordered_json(*v) : nullptr; };
  return {{"adam_beta_1", o.adam_beta_1},
          {"adam_beta_2", o.adam_beta_2},
          {"epsilon", o.epsilon},
          {"exclude_layers", o.exclude_layers},
          {"muon_a", o.muon_a},
          {"muon_b", o.muon_b},
          {"muon_c", o.muon_c},
          {"adam_lr_ratio", o.adam_lr_ratio},
          {"momentum", o.momentum},
          {"ns_steps", o.ns_steps},
          {"nesterov", o.nesterov},
          {"exclude_embeddings", o.exclude_embeddings},
          {"adam_weight_decay", or_null(o.adam_weight_decay)},
          {"rms_rate", or_null(o.rms_rate)}};
}

// Keras 3 makes both in one loop over the variables: momentum, then velocity for an AdamW variable.
std::vector<Slot> Muon::slot_specs() const {
  return {{.name = "momentum", .tf_keras = "momentum", .keras3 = "momentum"},
          {.name = "velocity", .tf_keras = "velocity", .keras3 = "velocity"}};
}

bool Muon::uses_adamw(const TrainableVariable& variable) const {
  if (variable.shape.rank() != 2) return true;
  std::string lower = variable.path;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (options_.exclude_embeddings && lower.find("embedding") != std::string::npos) return true;
  for (auto& pattern : options_.exclude_layers)  // Python's re.search
    if (std::regex_search(variable.path, std::regex(pattern))) return true;
  return false;
}

std::optional<Shape> Muon::slot_shape(const Slot& slot, const TrainableVariable& variable) const {
  if (slot.name == "velocity" && !uses_adamw(variable)) return std::nullopt;
  return variable.shape;
}

std::vector<double> Muon::step_values(double lr) {
  return {lr * options_.adam_lr_ratio};
}

// An AdamW variable is one with a velocity slot (slot_shape chose, once, when the slots were made).
void Muon::decay_weights(Tensor& params, const Tensor& lr) {
  for (std::size_t i = 0; i < variables().size(); ++i) {
    const std::optional<double> decay =
        slot_view(1, i).defined() ? options_.adam_weight_decay : weight_decay();
    if (!decay || *decay == 0) continue;
    Tensor w = variable_view(params, i);
    ops::decay_weights(w, lr, *decay);
  }
}

void Muon::update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) {
  const Options& o = options_;
  const ops::MuonStep step{.a = o.muon_a,
                           .b = o.muon_b,
                           .c = o.muon_c,
                           .steps = o.ns_steps,
                           .momentum = o.momentum,
                           .nesterov = o.nesterov,
                           .scaled = o.rms_rate.has_value(),
                           .rms_rate = o.rms_rate.value_or(0.0)};
  const ops::AdamStep adam{o.adam_beta_1, o.adam_beta_2, o.epsilon};
  const Tensor& adam_lr = step_values_on(params.device());  // lr adam_lr_ratio
  for (std::size_t i = 0; i < variables().size(); ++i) {
    Tensor w = variable_view(params, i), g = variable_view(grads, i), m = slot_view(0, i),
           v = slot_view(1, i);
    if (v.defined())
      ops::adam_update(w, g, m, v, adam, adam_lr, iterations);
    else
      ops::muon_update(w, g, m, step, lr);
  }
}

namespace {

std::optional<double> optional_number(keras_object::StrictConfig& c, const std::string& key,
                                      std::optional<double> fallback) {
  if (!c.present(key)) return fallback;
  const auto& v = c.raw(key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) c.fail(key + " " + v.dump() + " is not supported (a number or null)");
  return v.get<double>();
}

}  // namespace

const Entry& muon_entry() {
  static const Entry e{
      "Muon", {"muon"}, "muon", [](keras_object::StrictConfig& c, std::optional<double> lr) {
        Muon::Options o;
        o.adam_beta_1 = c.number("adam_beta_1", 0.9);
        o.adam_beta_2 = c.number("adam_beta_2", 0.999);
        o.adam_weight_decay = optional_number(c, "adam_weight_decay", 0.004);
        o.epsilon = c.number("epsilon", 1e-7);
        if (c.present("exclude_layers")) {
          const auto& v = c.raw("exclude_layers");
          if (!v.is_null()) {
            if (!v.is_array()) c.fail("exclude_layers " + v.dump() + " is not supported (a list of strings)");
            for (auto& p : v) {
              if (!p.is_string()) c.fail("exclude_layers: " + p.dump() + " is not a string");
              o.exclude_layers.push_back(p.get<std::string>());
            }
          }
        }
        o.exclude_embeddings = c.boolean("exclude_embeddings", true);
        o.muon_a = c.number("muon_a", 3.4445);
        o.muon_b = c.number("muon_b", -4.7750);
        o.muon_c = c.number("muon_c", 2.0315);
        o.adam_lr_ratio = c.number("adam_lr_ratio", 1.0);
        o.momentum = c.number("momentum", 0.95);
        o.ns_steps = static_cast<int>(c.integer("ns_steps", 5, 0));
        o.nesterov = c.boolean("nesterov", true);
        o.rms_rate = optional_number(c, "rms_rate", 0.2);
        // The base class's weight_decay (0.004 by default, as AdamW's) is read by the registry after this.
        return c.checked([&] {
          return std::unique_ptr<Optimizer>(std::make_unique<Muon>(lr.value_or(0.001), std::move(o)));
        });
      }};
  return e;
}

}  // namespace systolic::optimizers
