// keras.optimizers.schedules (include/systolic/schedules.h): each schedule's formula, config and reader.
#include <systolic/error.h>
#include <systolic/schedules.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

namespace systolic::optimizers::schedules {

namespace {

using ojson = nlohmann::ordered_json;

// A step count as Keras writes it (an int when it is one).
ojson steps_json(double v) {
  return v == std::floor(v) && std::abs(v) < 9e15 ? ojson(static_cast<std::int64_t>(v)) : ojson(v);
}

class Exponential final : public LearningRateSchedule {
 public:
  Exponential(double lr, double steps, double rate, bool staircase, bool inverse_time)
      : lr_(lr), steps_(steps), rate_(rate), staircase_(staircase), inverse_(inverse_time) {}
  std::string class_name() const override { return inverse_ ? "InverseTimeDecay" : "ExponentialDecay"; }
  double operator()(std::int64_t step) const override {
    double p = double(step) / steps_;
    if (staircase_) p = std::floor(p);
    return inverse_ ? lr_ / (1 + rate_ * p) : lr_ * std::pow(rate_, p);
  }
  ojson get_config() const override {
    return {{"initial_learning_rate", lr_},
            {"decay_steps", steps_json(steps_)},
            {"decay_rate", rate_},
            {"staircase", staircase_},
            {"name", class_name()}};
  }

 private:
  double lr_, steps_, rate_;
  bool staircase_, inverse_;
};

class Piecewise final : public LearningRateSchedule {
 public:
  Piecewise(std::vector<double> b, std::vector<double> v) : b_(std::move(b)), v_(std::move(v)) {}
  std::string class_name() const override { return "PiecewiseConstantDecay"; }
  double operator()(std::int64_t step) const override {
    for (std::size_t i = 0; i < b_.size(); ++i)
      if (double(step) <= b_[i]) return v_[i];
    return v_.back();
  }
  ojson get_config() const override {
    ojson b = ojson::array();
    for (double x : b_) b.push_back(steps_json(x));
    return {{"boundaries", b}, {"values", v_}, {"name", "PiecewiseConstant"}};
  }

 private:
  std::vector<double> b_, v_;
};

class Polynomial final : public LearningRateSchedule {
 public:
  Polynomial(double lr, double steps, double end, double power, bool cycle)
      : lr_(lr), steps_(steps), end_(end), power_(power), cycle_(cycle) {}
  std::string class_name() const override { return "PolynomialDecay"; }
  double operator()(std::int64_t step) const override {
    double s = double(step), d = steps_;
    if (cycle_) {
      double m = s == 0 ? 1.0 : std::ceil(s / d);
      d *= m;
    } else {
      s = std::min(s, d);
    }
    return (lr_ - end_) * std::pow(1 - s / d, power_) + end_;
  }
  ojson get_config() const override {
    return {{"initial_learning_rate", lr_},
            {"decay_steps", steps_json(steps_)},
            {"end_learning_rate", end_},
            {"power", power_},
            {"cycle", cycle_},
            {"name", class_name()}};
  }

 private:
  double lr_, steps_, end_, power_;
  bool cycle_;
};

double cosine(double fraction, double alpha) {
  return (1 - alpha) * 0.5 * (1 + std::cos(std::numbers::pi * fraction)) + alpha;
}

class Cosine final : public LearningRateSchedule {
 public:
  Cosine(double lr, double steps, double alpha, std::optional<double> target, double warmup)
      : lr_(lr), steps_(steps), alpha_(alpha), target_(target), warmup_(warmup) {}
  std::string class_name() const override { return "CosineDecay"; }
  double operator()(std::int64_t step) const override {
    double s = double(step);
    if (!target_) return lr_ * cosine(std::min(s, steps_) / steps_, alpha_);
    s = std::min(s, steps_ + warmup_);
    if (s < warmup_) return (*target_ - lr_) * (s / warmup_) + lr_;
    return *target_ * cosine((s - warmup_) / steps_, alpha_);
  }
  ojson get_config() const override {
    return {{"initial_learning_rate", lr_},
            {"decay_steps", steps_json(steps_)},
            {"alpha", alpha_},
            {"name", class_name()},
            {"warmup_target", target_ ? ojson(*target_) : ojson(nullptr)},
            {"warmup_steps", steps_json(warmup_)}};
  }

 private:
  double lr_, steps_, alpha_;
  std::optional<double> target_;
  double warmup_;
};

class CosineRestarts final : public LearningRateSchedule {
 public:
  CosineRestarts(double lr, double steps, double t_mul, double m_mul, double alpha)
      : lr_(lr), steps_(steps), t_mul_(t_mul), m_mul_(m_mul), alpha_(alpha) {}
  std::string class_name() const override { return "CosineDecayRestarts"; }
  double operator()(std::int64_t step) const override {
    double f = double(step) / steps_, i;
    if (t_mul_ == 1.0) {
      i = std::floor(f);
      f -= i;
    } else {
      i = std::floor(std::log(1.0 - f * (1.0 - t_mul_)) / std::log(t_mul_));
      double sum = (1.0 - std::pow(t_mul_, i)) / (1.0 - t_mul_);
      f = (f - sum) / std::pow(t_mul_, i);
    }
    double decayed = 0.5 * std::pow(m_mul_, i) * (1.0 + std::cos(std::numbers::pi * f));
    return lr_ * ((1 - alpha_) * decayed + alpha_);
  }
  ojson get_config() const override {
    return {{"initial_learning_rate", lr_},
            {"first_decay_steps", steps_json(steps_)},
            {"t_mul", t_mul_},
            {"m_mul", m_mul_},
            {"alpha", alpha_},
            {"name", "SGDRDecay"}};
  }

 private:
  double lr_, steps_, t_mul_, m_mul_, alpha_;
};

void positive(const char* cls, const char* key, double v) {
  SYSTOLIC_CHECK(std::isfinite(v) && v > 0, "{}: {} must be a positive number, got {}", cls, key, v);
}
void finite(const char* cls, const char* key, double v) {
  SYSTOLIC_CHECK(std::isfinite(v), "{}: {} must be a finite number, got {}", cls, key, v);
}

}  // namespace

Schedule ExponentialDecay(double lr, double decay_steps, double decay_rate, bool staircase) {
  finite("ExponentialDecay", "initial_learning_rate", lr);
  positive("ExponentialDecay", "decay_steps", decay_steps);
  finite("ExponentialDecay", "decay_rate", decay_rate);
  return std::make_shared<Exponential>(lr, decay_steps, decay_rate, staircase, false);
}
Schedule InverseTimeDecay(double lr, double decay_steps, double decay_rate, bool staircase) {
  finite("InverseTimeDecay", "initial_learning_rate", lr);
  positive("InverseTimeDecay", "decay_steps", decay_steps);
  finite("InverseTimeDecay", "decay_rate", decay_rate);
  return std::make_shared<Exponential>(lr, decay_steps, decay_rate, staircase, true);
}
Schedule PiecewiseConstantDecay(std::vector<double> boundaries, std::vector<double> values) {
  SYSTOLIC_CHECK(values.size() == boundaries.size() + 1,
                 "PiecewiseConstantDecay: values must have one more entry than boundaries ({} and {})",
                 values.size(), boundaries.size());
  for (double v : values) finite("PiecewiseConstantDecay", "values", v);
  for (std::size_t i = 0; i < boundaries.size(); ++i) {
    finite("PiecewiseConstantDecay", "boundaries", boundaries[i]);
    SYSTOLIC_CHECK(i == 0 || boundaries[i] > boundaries[i - 1],
                   "PiecewiseConstantDecay: boundaries must increase, got {} after {}", boundaries[i],
                   boundaries[i - 1]);
  }
  return std::make_shared<Piecewise>(std::move(boundaries), std::move(values));
}
Schedule PolynomialDecay(double lr, double decay_steps, double end, double power, bool cycle) {
  finite("PolynomialDecay", "initial_learning_rate", lr);
  positive("PolynomialDecay", "decay_steps", decay_steps);
  finite("PolynomialDecay", "end_learning_rate", end);
  finite("PolynomialDecay", "power", power);
  return std::make_shared<Polynomial>(lr, decay_steps, end, power, cycle);
}
Schedule CosineDecay(double lr, double decay_steps, double alpha, std::optional<double> warmup_target,
                     double warmup_steps) {
  finite("CosineDecay", "initial_learning_rate", lr);
  positive("CosineDecay", "decay_steps", decay_steps);
  finite("CosineDecay", "alpha", alpha);
  if (warmup_target) finite("CosineDecay", "warmup_target", *warmup_target);
  SYSTOLIC_CHECK(std::isfinite(warmup_steps) && warmup_steps >= 0,
                 "CosineDecay: warmup_steps must be >= 0, got {}", warmup_steps);
  SYSTOLIC_CHECK(!warmup_target || warmup_steps > 0, "CosineDecay: a warmup_target needs warmup_steps > 0");
  return std::make_shared<Cosine>(lr, decay_steps, alpha, warmup_target, warmup_steps);
}
Schedule CosineDecayRestarts(double lr, double first_decay_steps, double t_mul, double m_mul, double alpha) {
  finite("CosineDecayRestarts", "initial_learning_rate", lr);
  positive("CosineDecayRestarts", "first_decay_steps", first_decay_steps);
  positive("CosineDecayRestarts", "t_mul", t_mul);
  finite("CosineDecayRestarts", "m_mul", m_mul);
  finite("CosineDecayRestarts", "alpha", alpha);
  return std::make_shared<CosineRestarts>(lr, first_decay_steps, t_mul, m_mul, alpha);
}

Schedule from_config(const nlohmann::json& s, const std::string& source) {
  SYSTOLIC_CHECK(s.is_object() && s.contains("class_name") && s["class_name"].is_string() &&
                     s.contains("config") && s["config"].is_object(),
                 "{}: a learning-rate schedule must be {{\"class_name\": ..., \"config\": {{...}}}}, got {}",
                 source, s.dump().substr(0, 200));
  for (auto& [k, v] : s.items())
    SYSTOLIC_CHECK(k == "class_name" || k == "config" || k == "module" || k == "registered_name",
                   "{}: learning-rate schedule: unexpected key '{}'", source, k);
  const std::string cls = s["class_name"].get<std::string>();
  const nlohmann::json& c = s["config"];
  std::set<std::string> used{"name"};
  auto num = [&](const char* key, std::optional<double> fallback) -> double {
    used.insert(key);
    if (!c.contains(key)) {
      SYSTOLIC_CHECK(fallback.has_value(), "{}: {}: option '{}' is missing", source, cls, key);
      return *fallback;
    }
    SYSTOLIC_CHECK(c[key].is_number(), "{}: {}: '{}' must be a number, got {}", source, cls, key,
                   c[key].dump());
    return c[key].get<double>();
  };
  auto flag = [&](const char* key) {
    used.insert(key);
    if (!c.contains(key)) return false;
    SYSTOLIC_CHECK(c[key].is_boolean(), "{}: {}: '{}' must be true or false, got {}", source, cls, key,
                   c[key].dump());
    return c[key].get<bool>();
  };
  auto list = [&](const char* key) {
    used.insert(key);
    SYSTOLIC_CHECK(c.contains(key) && c[key].is_array(), "{}: {}: '{}' must be a list of numbers", source,
                   cls, key);
    std::vector<double> out;
    for (auto& v : c[key]) {
      SYSTOLIC_CHECK(v.is_number(), "{}: {}: '{}' must be a list of numbers, got {}", source, cls, key,
                     v.dump());
      out.push_back(v.get<double>());
    }
    return out;
  };
  Schedule out;
  try {
    if (cls == "ExponentialDecay" || cls == "InverseTimeDecay") {
      double lr = num("initial_learning_rate", std::nullopt), steps = num("decay_steps", std::nullopt),
             rate = num("decay_rate", std::nullopt);
      bool stair = flag("staircase");
      out = cls == "ExponentialDecay" ? ExponentialDecay(lr, steps, rate, stair)
                                      : InverseTimeDecay(lr, steps, rate, stair);
    } else if (cls == "PiecewiseConstantDecay") {
      auto b = list("boundaries");
      out = PiecewiseConstantDecay(b, list("values"));
    } else if (cls == "PolynomialDecay") {
      double lr = num("initial_learning_rate", std::nullopt), steps = num("decay_steps", std::nullopt);
      double end = num("end_learning_rate", 0.0001), power = num("power", 1.0);
      out = PolynomialDecay(lr, steps, end, power, flag("cycle"));
    } else if (cls == "CosineDecay") {
      double lr = num("initial_learning_rate", std::nullopt), steps = num("decay_steps", std::nullopt);
      double alpha = num("alpha", 0.0);
      std::optional<double> target;
      used.insert("warmup_target");
      if (c.contains("warmup_target") && !c["warmup_target"].is_null())
        target = num("warmup_target", std::nullopt);
      out = CosineDecay(lr, steps, alpha, target, num("warmup_steps", 0.0));
    } else if (cls == "CosineDecayRestarts") {
      double lr = num("initial_learning_rate", std::nullopt), steps = num("first_decay_steps", std::nullopt);
      double t = num("t_mul", 2.0), m = num("m_mul", 1.0);
      out = CosineDecayRestarts(lr, steps, t, m, num("alpha", 0.0));
    } else {
      fail(
          "learning-rate schedule '{}' is not supported (ExponentialDecay, PiecewiseConstantDecay, "
          "PolynomialDecay, "
          "InverseTimeDecay, CosineDecay, CosineDecayRestarts)",
          cls);
    }
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
  for (auto& [k, v] : c.items())
    SYSTOLIC_CHECK(used.count(k), "{}: {}: unsupported option '{}' (value {})", source, cls, k, v.dump());
  return out;
}

nlohmann::ordered_json serialize(const LearningRateSchedule& schedule) {
  return {{"module", "keras.optimizers.schedules"},
          {"class_name", schedule.class_name()},
          {"config", schedule.get_config()},
          {"registered_name", nullptr}};
}

}  // namespace systolic::optimizers::schedules
