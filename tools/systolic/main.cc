// The `systolic` command (docs/cli.md is the reference): summary, train, evaluate, predict, show, datasets,
// info, benchmark. Progress and logs go to stderr, results to stdout. Errors: one line
// "systolic: error: ...", exit 1 (2: usage).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <systolic/systolic.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

namespace sy = systolic;

namespace {

struct Common {
  std::string model = "seed-cnn";
  std::string input_shape;
  int classes = 0;
  std::string device = "auto";
  std::string policy = "float32";
  std::uint64_t seed = 0;
  bool seed_given = false;
  int replicas = 1;              // --replicas: CPU replicas or GPUs of this process
  bool sync_batch_norm = false;  // --sync-batch-norm
};

// Whether this process prints results and writes files: false on MPI workers other than 0.
bool g_chief = true;

// "a, b, c": the names a registry knows, for a flag's help.
std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

sy::Shape parse_shape(const std::string& text) {
  std::vector<std::int64_t> dims;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (...) {
      used = 0;
    }
    SYSTOLIC_CHECK(used == part.size() && !part.empty() && v > 0,
                   "--input-shape '{}': expected H,W,C with positive integers", text);
    dims.push_back(v);
  }
  SYSTOLIC_CHECK(dims.size() == 3, "--input-shape '{}': expected three numbers H,W,C", text);
  return sy::Shape(dims);
}

sy::Device resolve_device(const std::string& text) {
  sy::Device d = text == "auto" ? sy::default_device() : sy::Device::parse(text);
  if (d.is_xla()) {
    auto plugin = sy::xla_plugin_info(d.xla_platform());
    SYSTOLIC_CHECK(plugin.available, "--device {}: not available: {}", text, plugin.why);
    SYSTOLIC_CHECK(sy::device_available(d), "--device {}: not available (the plugin has {} devices)", text,
                   plugin.devices.size());
  }
  SYSTOLIC_CHECK(sy::device_available(d), "--device {}: not available ({}; use cpu)", text,
                 sy::build_info().cuda ? "no such GPU found" : "this build of systolic has no CUDA support");
  return d;
}

// On a GPU, the model the command built becomes the accelerator model (the seed's keras_to_tpu_model), which
// logs what it found; on the CPU it stays as it is. With --replicas N, or when started by an MPI launcher
// (mpirun), it becomes a model of data-parallel replicas (distribute.h).
sy::Model place(const sy::Model& model, sy::Device device, const Common& c) {
  namespace dist = sy::distribute;
  dist::StrategyOptions options{.sync_batch_norm = c.sync_batch_norm};
  if (dist::launched_by_mpi()) {
    SYSTOLIC_CHECK(c.replicas == 1,
                   "--replicas {}: under an MPI launcher every process drives one replica; set the "
                   "number of replicas with mpirun -np N",
                   c.replicas);
    SYSTOLIC_CHECK(device.is_cpu(),
                   "--device {}: replicas across MPI processes run on the CPU (GPU replicas across "
                   "processes are not supported yet); use --device cpu",
                   device.str());
    dist::MultiWorkerMirroredStrategy strategy(options);
    g_chief = strategy.is_chief();
    if (!g_chief) sy::set_log_stream(std::fopen("/dev/null", "w"));
    return sy::to_accelerator(model, strategy);
  }
  if (c.replicas > 1) {
    std::vector<sy::Device> devices;
    for (int i = 0; i < c.replicas; ++i)
      devices.push_back(device.is_cpu() ? sy::Device::cpu() : device.with_index(i));
    for (auto& d : devices)
      SYSTOLIC_CHECK(
          sy::device_available(d), "--replicas {}: {} is not available ({})", c.replicas, d.str(),
          d.is_xla() ? fmt::format("the {} plugin has {} devices", sy::Device::xla(d.xla_platform()).str(),
                                   sy::xla_plugin_info(d.xla_platform()).devices.size())
                     : fmt::format("{} GPUs found", sy::gpu_info().size()));
    return sy::to_accelerator(model, dist::MirroredStrategy(devices, options));
  }
  SYSTOLIC_CHECK(!c.sync_batch_norm, "--sync-batch-norm needs replicas (--replicas N, or mpirun)");
  if (device.is_cpu()) return model;
  return sy::to_accelerator(model, dist::OneDeviceStrategy(device));
}

bool is_builtin(const std::string& model) {
  auto names = sy::models::builtin_names();
  return std::find(names.begin(), names.end(), model) != names.end();
}

// A full-model file (.keras, or legacy .h5: architecture, weights, training config) rather than a built-in name
// or a JSON file.
bool is_full_model_file(const std::string& model) {
  return !is_builtin(model) && (model.ends_with(".keras") || model.ends_with(".h5") ||
                                model.ends_with(".hdf5") || sy::is_keras_zip(model));
}

// --model: a built-in name (shaped by the data set or --input-shape), a Keras model JSON file, or a Keras
// full model (.keras or .h5, loaded with its weights, compiled with its optimizer state).
sy::Model make_model(const Common& c, sy::Shape default_shape, int default_classes) {
  if (is_builtin(c.model)) {
    sy::Shape shape = c.input_shape.empty() ? default_shape : parse_shape(c.input_shape);
    int classes = c.classes > 0 ? c.classes : default_classes;
    return sy::models::builtin(c.model, shape, classes);
  }
  if (!std::filesystem::exists(c.model))
    sy::fail(
        "--model {}: neither a built-in model (seed-cnn) nor an existing file (Keras JSON, .keras or "
        "full-model .h5)",
        c.model);
  if (!c.input_shape.empty() || c.classes > 0)
    sy::fail(
        "--model {}: --input-shape and --classes-count apply to built-in models only; a model file fixes "
        "them",
        c.model);
  if (is_full_model_file(c.model)) return sy::load_model(c.model);
  return sy::model_from_json_file(c.model);
}

// The model's input (H, W, C) and class count, to check data against.
void check_model_fits(const sy::Model& model, const sy::Shape& data_shape, int classes,
                      const std::string& what) {
  const auto& in = model.inputs()[0].shape();
  if (in != data_shape)
    sy::fail("--model: the model takes inputs {} but {} has {}", in.keras_str(), what,
             data_shape.keras_str());
  auto out = model.outputs()[0].shape();
  // One output unit is a binary classifier (a sigmoid) of 0/1 labels: no class per unit.
  if (classes > 0 && out[-1] > 1 && out[-1] < classes)
    sy::fail("--model: the model has {} outputs but {} has {} classes", out[-1], what, classes);
}

// A data set as the commands use it: its splits, the input shape of its images and its classes.
struct Data {
  sy::Tensor x_train, y_train, x_test, y_test;
  sy::Shape input_shape;
  int classes = 0;
  std::vector<std::string> class_names;
};

// --dataset NAME (datasets::load), both splits cut to their first `limit` samples (0: all); `shape` (the
// model's input, or --input-shape) sizes image folders. An error about the name names the flag.
Data load_dataset(const std::string& name, std::int64_t limit, const std::optional<sy::Shape>& shape = {}) {
  sy::datasets::Dataset d;
  try {
    d = sy::datasets::load(name, {.limit = limit, .image_shape = shape});
  } catch (const sy::datasets::InvalidName& e) {
    sy::fail("--dataset {}", e.what());
  }
  return {d.train.x,
          d.train.y,
          d.test.x,
          d.test.y,
          d.train.x.shape().without_batch(),
          static_cast<int>(d.class_names.size()),
          d.class_names};
}

// One split by name ("train" or "test") of a data set: what `show` (and `predict --dataset`) need.
struct SplitData {
  sy::Tensor x, y;
  sy::Shape input_shape;
  std::vector<std::string> class_names;
};

SplitData load_split(const std::string& name, const std::string& split, std::int64_t limit,
                     const std::optional<sy::Shape>& shape = {}) {
  SYSTOLIC_CHECK(split == "train" || split == "test", "--split {}: expected train or test", split);
  Data d = load_dataset(name, limit, shape);
  return split == "train" ? SplitData{d.x_train, d.y_train, d.input_shape, d.class_names}
                          : SplitData{d.x_test, d.y_test, d.input_shape, d.class_names};
}

// A model of several inputs or outputs (Keras's functional multi-IO): its data come as arrays by name.
bool several_io(const sy::Model& model) {
  return model.inputs().size() > 1 || model.outputs().size() > 1;
}

std::vector<std::string> input_names(const sy::Model& model) {
  std::vector<std::string> names;
  for (const auto& t : model.inputs()) names.push_back(t.node()->layer->name());
  return names;
}

// --dataset npz:PATH for a model of several inputs or outputs (datasets::load_arrays: x_train_<input>, ...), each
// input's arrays checked against its shape.
sy::datasets::ArrayDataset load_several(const sy::Model& model, const std::string& dataset,
                                        std::int64_t limit) {
  const auto inputs = input_names(model), outputs = model.output_names();
  if (!dataset.starts_with("npz:") || dataset.size() == 4)
    sy::fail(
        "--dataset {}: the model has {} inputs ({}) and {} outputs ({}); give its arrays as --dataset "
        "npz:PATH "
        "(x_train_<input>, y_train_<output>, x_test_<input>, y_test_<output>)",
        dataset, inputs.size(), fmt::join(inputs, ", "), outputs.size(), fmt::join(outputs, ", "));
  auto d = sy::datasets::load_arrays(dataset.substr(4), inputs, outputs, limit);
  for (const auto* split : {&d.train, &d.test})
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const sy::Shape want = model.inputs()[i].shape(), got = split->x[i].shape().without_batch();
      if (want != got)
        sy::fail("--dataset {}: the model's input '{}' takes samples of shape {} but its arrays have {}",
                 dataset, inputs[i], want.str(), got.str());
    }
  return d;
}

void add_common(CLI::App* app, Common& c, bool with_model = true) {
  if (with_model)
    app->add_option("--model", c.model,
                    "built-in model (seed-cnn), Keras model JSON file, or Keras full model (.keras or .h5)")
        ->capture_default_str();
  app->add_option("--input-shape", c.input_shape, "input shape H,W,C for built-in models");
  app->add_option("--classes-count", c.classes, "number of classes for built-in models")
      ->check(CLI::PositiveNumber);
  app->add_option("--device", c.device,
                  "auto, cpu, cuda[:I], xla:cpu|xla:cuda|xla:tpu[:I] or tpu (XLA through PJRT)")
      ->capture_default_str();
  app->add_option("--policy", c.policy, "dtype policy of built-in models: float32, or mixed_bfloat16")
      ->capture_default_str();
  app->add_option_function<std::uint64_t>(
      "--seed", [&c](std::uint64_t s) { c.seed = s, c.seed_given = true; }, "random seed (repeatable runs)");
}

// --replicas and --sync-batch-norm (train, evaluate, benchmark).
void add_replicas(CLI::App* app, Common& c) {
  app->add_option(
         "--replicas", c.replicas,
         "data-parallel replicas: CPU replicas sharing the cores (--device cpu), GPUs cuda:0..N-1, or the "
         "devices 0..N-1 of an XLA plugin (--device xla:cpu, tpu: one SPMD program); under mpirun, one per "
         "process")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_flag("--sync-batch-norm", c.sync_batch_norm,
                "replicas: batch norm with the global batch's statistics (default: each replica's own)");
}

// The seed and the dtype policy, before any model is made.
void apply_seed(const Common& c) {
  if (c.seed_given) sy::set_random_seed(c.seed);
  sy::mixed_precision::set_global_policy(c.policy);
}

int cmd_summary(const Common& c, bool to_json) {
  sy::mixed_precision::set_global_policy(c.policy);
  auto model = make_model(c, {32, 32, 3}, 10);
  if (to_json)
    std::printf("%s\n", model.to_json(2).c_str());
  else
    std::fputs(model.summary_string().c_str(), stdout);
  return 0;
}

struct TrainArgs {
  std::string dataset;
  int epochs = 1;
  std::int64_t batch_size = 32;
  std::string optimizer = "adam";
  std::string loss = "sparse_categorical_crossentropy";
  double lr = -1;
  double validation_split = 0;
  std::string class_weight;  // "CLASS:WEIGHT,..."
  std::int64_t limit = 0;
  int verbose = 1;
  double width_shift_range = 0, height_shift_range = 0;
  bool horizontal_flip = false;
  std::string weights, save_weights, save, save_for = "keras3";
  bool optimizer_given = false, loss_given = false;
  double rescale = 1.0;
  // Keras callbacks (docs/cli.md): --checkpoint, --early-stopping, --reduce-lr-on-plateau, --csv-log,
  // --tensorboard, --backup-dir.
  std::string checkpoint, monitor = "val_loss", csv_log, tensorboard;
  bool save_best_only = false;
  int early_stopping = -1, reduce_lr_on_plateau = -1;
  std::string backup_dir, backup_freq = "epoch";
  // --lr-schedule (keras.optimizers.schedules) and its parameters, by Keras's option names.
  std::string lr_schedule, boundaries, values;
  double decay_steps = 0, decay_rate = 0, alpha = 0, warmup_steps = 0, end_learning_rate = 0.0001, power = 1,
         t_mul = 2, m_mul = 1;
  std::optional<double> warmup_target;
  bool staircase = false;
};

std::vector<double> parse_numbers(const std::string& text, const char* flag) {
  std::vector<double> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      std::size_t used = 0;
      out.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      sy::fail("{}: '{}' is not a number (a comma-separated list: 100,200)", flag, item);
    }
  }
  return out;
}

// --lr-schedule NAME: Keras's schedule from the optimizer's rate; --decay-steps defaults to the whole run's steps.
// --class-weight CLASS:WEIGHT,...: Keras's class_weight dict.
std::map<int, double> class_weights(const std::string& text) {
  std::map<int, double> out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    const auto colon = part.find(':');
    std::size_t used_c = 0, used_w = 0;
    long long cls = -1;
    double weight = 0;
    try {
      cls = std::stoll(part.substr(0, colon), &used_c);
      weight = std::stod(part.substr(colon + 1), &used_w);
    } catch (...) {
      used_c = used_w = 0;
    }
    SYSTOLIC_CHECK(
        colon != std::string::npos && used_c == colon && used_c > 0 && used_w == part.size() - colon - 1 &&
            used_w > 0 && cls >= 0 && cls <= INT32_MAX && std::isfinite(weight),
        "--class-weight '{}': expected CLASS:WEIGHT pairs separated by commas (e.g. 0:1,1:5), with "
        "classes whole numbers >= 0; '{}' is not one",
        text, part);
    SYSTOLIC_CHECK(out.emplace(static_cast<int>(cls), weight).second,
                   "--class-weight '{}': class {} is given twice", text, cls);
  }
  return out;
}

sy::optimizers::Schedule lr_schedule(const TrainArgs& a, double initial, std::int64_t run_steps) {
  namespace sch = sy::optimizers::schedules;
  const double steps = a.decay_steps > 0 ? a.decay_steps : double(std::max<std::int64_t>(run_steps, 1));
  auto need_rate = [&] {
    SYSTOLIC_CHECK(a.decay_rate > 0, "--lr-schedule {} needs --decay-rate", a.lr_schedule);
    return a.decay_rate;
  };
  const std::string& n = a.lr_schedule;
  if (n == "exponential") return sch::ExponentialDecay(initial, steps, need_rate(), a.staircase);
  if (n == "inverse_time") return sch::InverseTimeDecay(initial, steps, need_rate(), a.staircase);
  if (n == "polynomial") return sch::PolynomialDecay(initial, steps, a.end_learning_rate, a.power);
  if (n == "cosine") return sch::CosineDecay(initial, steps, a.alpha, a.warmup_target, a.warmup_steps);
  if (n == "cosine_restarts") return sch::CosineDecayRestarts(initial, steps, a.t_mul, a.m_mul, a.alpha);
  if (n == "piecewise") {
    SYSTOLIC_CHECK(!a.boundaries.empty() && !a.values.empty(),
                   "--lr-schedule piecewise needs --boundaries and --values");
    return sch::PiecewiseConstantDecay(parse_numbers(a.boundaries, "--boundaries"),
                                       parse_numbers(a.values, "--values"));
  }
  sy::fail("--lr-schedule: unknown schedule '{}'", n);
}

// The callbacks the train flags ask for, with Keras's defaults for every option not given. Every worker runs
// them alike (so they all stop at the same epoch); the library's callbacks write files on the chief only.
std::vector<std::shared_ptr<sy::callbacks::Callback>> train_callbacks(const TrainArgs& a) {
  namespace cb = sy::callbacks;
  std::vector<std::shared_ptr<cb::Callback>> out;
  if (!a.checkpoint.empty()) {
    bool weights_only = a.checkpoint.ends_with(".weights.h5");
    out.push_back(std::make_shared<cb::ModelCheckpoint>(
        a.checkpoint, cb::ModelCheckpointOptions{.monitor = a.monitor,
                                                 .verbose = a.verbose > 0 ? 1 : 0,
                                                 .save_best_only = a.save_best_only,
                                                 .save_weights_only = weights_only}));
  }
  if (a.early_stopping >= 0)
    out.push_back(std::make_shared<cb::EarlyStopping>(cb::EarlyStoppingOptions{
        .monitor = a.monitor, .patience = a.early_stopping, .verbose = a.verbose > 0}));
  if (a.reduce_lr_on_plateau >= 0)
    out.push_back(std::make_shared<cb::ReduceLROnPlateau>(cb::ReduceLROnPlateauOptions{
        .monitor = a.monitor, .patience = a.reduce_lr_on_plateau, .verbose = a.verbose > 0}));
  if (!a.csv_log.empty()) out.push_back(std::make_shared<cb::CSVLogger>(a.csv_log));
  if (!a.tensorboard.empty()) out.push_back(std::make_shared<cb::TensorBoard>(a.tensorboard));
  if (!a.backup_dir.empty())
    out.push_back(std::make_shared<cb::BackupAndRestore>(
        a.backup_dir,
        cb::BackupAndRestoreOptions{.save_freq = cb::BackupAndRestore::parse_save_freq(a.backup_freq)}));
  return out;
}

void add_schedule_flags(CLI::App* train, TrainArgs& a) {
  train
      ->add_option(
          "--lr-schedule", a.lr_schedule,
          "learning-rate schedule from the optimizer's rate (keras.optimizers.schedules): exponential, "
          "inverse_time, polynomial, cosine, cosine_restarts, piecewise")
      ->check(CLI::IsMember(
          {"exponential", "inverse_time", "polynomial", "cosine", "cosine_restarts", "piecewise"}));
  train
      ->add_option(
          "--decay-steps", a.decay_steps,
          "schedule: decay_steps (cosine_restarts: first_decay_steps); default: the whole run's steps")
      ->check(CLI::PositiveNumber);
  train->add_option("--decay-rate", a.decay_rate, "exponential, inverse_time: decay_rate")
      ->check(CLI::PositiveNumber);
  train->add_flag("--staircase", a.staircase, "exponential, inverse_time: decay in steps");
  train->add_option("--alpha", a.alpha, "cosine, cosine_restarts: the final fraction of the rate");
  train->add_option("--warmup-steps", a.warmup_steps, "cosine: linear warmup steps (with --warmup-target)")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--warmup-target", a.warmup_target, "cosine: the rate the warmup reaches");
  train->add_option("--end-learning-rate", a.end_learning_rate, "polynomial: end_learning_rate")
      ->capture_default_str();
  train->add_option("--power", a.power, "polynomial: power")->capture_default_str();
  train->add_option("--t-mul", a.t_mul, "cosine_restarts: t_mul")->capture_default_str();
  train->add_option("--m-mul", a.m_mul, "cosine_restarts: m_mul")->capture_default_str();
  train->add_option("--boundaries", a.boundaries, "piecewise: step boundaries, e.g. 1000,2000");
  train->add_option("--values", a.values,
                    "piecewise: rates, one more than the boundaries, e.g. 0.1,0.01,0.001");
}

void add_callback_flags(CLI::App* train, TrainArgs& a) {
  train->add_option("--checkpoint", a.checkpoint,
                    "save the model after each epoch to PATH, a Keras filepath template such as "
                    "ckpt-{epoch:02d}-{val_loss:.2f}.h5 (.weights.h5: weights only)");
  train->add_flag("--save-best-only", a.save_best_only, "--checkpoint saves only when --monitor improves");
  train->add_option("--monitor", a.monitor, "the log value the callbacks watch")->capture_default_str();
  train->add_option("--early-stopping", a.early_stopping, "stop when --monitor has not improved for N epochs")
      ->check(CLI::NonNegativeNumber);
  train
      ->add_option("--reduce-lr-on-plateau", a.reduce_lr_on_plateau,
                   "divide the learning rate by 10 when --monitor has not improved for N epochs")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--csv-log", a.csv_log, "write each epoch's logs to FILE (Keras's CSVLogger format)");
  train->add_option("--tensorboard", a.tensorboard,
                    "write TensorBoard event files (epoch_loss, ...) under DIR/train and DIR/validation");
  auto* backup_dir = train->add_option("--backup-dir", a.backup_dir,
                                       "back up the training state here (Keras's BackupAndRestore); the same "
                                       "command resumes from it exactly; removed when training ends");
  train->add_option("--backup-freq", a.backup_freq, "back up every epoch, or every N batches")
      ->capture_default_str()
      ->needs(backup_dir)
      ->check([](const std::string& v) {
        try {
          sy::callbacks::BackupAndRestore::parse_save_freq(v);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      });
}

// --rescale F of train and evaluate (as predict's): the images as float32 pixel * F; F = 1 keeps them as they
// are (uint8 stays uint8 and becomes float per batch, the raw 0-255 values). Every input's array alike.
sy::Tensor rescaled(const sy::Tensor& x, double rescale) {
  if (rescale == 1.0) return x;
  sy::Tensor out = x.to(sy::DType::float32);
  float* p = out.data<float>();
  const float f = static_cast<float>(rescale);
  for (std::int64_t i = 0; i < out.numel(); ++i) p[i] *= f;
  return out;
}
sy::Arrays rescaled(const sy::Arrays& x, double rescale) {
  sy::Arrays out;
  for (const auto& t : x) out.push_back(rescaled(t, rescale));
  return out;
}

// "Test loss: ..." and a line per metric (accuracies in percent), by the model's metric names.
void print_test_scores(const sy::Model& model, const std::vector<double>& scores) {
  auto names = model.metrics_names();
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : fmt::format("metric {}", i);
    if (name.ends_with("accuracy"))
      std::printf("Test %s: %.2f%%\n", name.c_str(), scores[i] * 100.0);
    else
      std::printf("Test %s: %.4f\n", name.c_str(), scores[i]);
  }
}

// evaluate --json: the scores as Keras's evaluate(return_dict=True) returns them, one JSON object.
void print_scores_json(const sy::Model& model, const std::vector<double>& scores) {
  auto names = model.metrics_names();
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < scores.size() && i < names.size(); ++i) j[names[i]] = scores[i];
  std::printf("%s\n", j.dump().c_str());
}

// A model given as a file is read before the data, so image folders are resized to its input; `shape` is that
// input, or --input-shape for a built-in model (which is built once the data set is known).
std::optional<sy::Model> model_file(const Common& c, std::optional<sy::Shape>& shape) {
  if (!c.input_shape.empty()) shape = parse_shape(c.input_shape);
  if (is_builtin(c.model)) return std::nullopt;
  auto model = make_model(c, {}, 0);
  shape = model.inputs()[0].shape();
  return model;
}

// The optimizer and loss the flags name; the seed's accuracy metric for a model of one output (a model of several
// gets the loss for each output, and no metric: Keras takes its metrics per output).
void compile_for_data(sy::Model& model, const std::string& optimizer_name, double lr,
                      const std::string& loss = "sparse_categorical_crossentropy") {
  auto optimizer = sy::optimizers::get(optimizer_name);
  if (lr > 0) optimizer->set_learning_rate(lr);
  if (model.outputs().size() > 1)
    model.compile(*optimizer, loss);
  else
    model.compile(*optimizer, loss, {"accuracy"});
}

int cmd_train(const Common& c, const TrainArgs& a) {
  // Before any training: what --save cannot write for tf.keras (Model::save says the same).
  if (a.save_for == "tf.keras" &&
      (a.save.ends_with(".keras") || a.save.ends_with(".weights.h5") || a.save.empty()))
    sy::fail("--save-for tf.keras: tf.keras reads a .h5 full model; give --save with a .h5 name");
  apply_seed(c);
  sy::Device device = resolve_device(c.device);
  std::optional<sy::Shape> shape;
  auto from_file = model_file(c, shape);
  // The arrays: a data set for a model of one input and output, npz arrays by name for several.
  sy::Arrays x_train, y_train, x_test, y_test;
  std::optional<sy::Model> made;
  if (from_file && several_io(*from_file)) {
    if (a.width_shift_range > 0 || a.height_shift_range > 0 || a.horizontal_flip)
      sy::fail(
          "--width-shift-range, --height-shift-range and --horizontal-flip augment the images of a model of "
          "one input; --model {} has several inputs or outputs",
          c.model);
    auto d = load_several(*from_file, a.dataset, a.limit);
    x_train = d.train.x, y_train = d.train.y, x_test = d.test.x, y_test = d.test.y;
  } else {
    Data data = load_dataset(a.dataset, a.limit, shape);
    made = from_file ? *from_file : make_model(c, data.input_shape, data.classes);
    check_model_fits(*made, data.input_shape, data.classes, "--dataset " + a.dataset);
    x_train = data.x_train, y_train = data.y_train, x_test = data.x_test, y_test = data.y_test;
  }
  auto model = made ? *made : *from_file;
  if (!a.weights.empty()) model.load_weights(a.weights);
  // A full-model file resumes with its own optimizer and state unless --optimizer, --loss or --lr says
  // otherwise; one saved without a training config (Keras's model.save before compile) is compiled with them.
  if (!is_full_model_file(c.model) || !model.compiled() || a.optimizer_given || a.loss_given || a.lr > 0)
    compile_for_data(model, a.optimizer, a.lr, a.loss);
  if (!a.lr_schedule.empty()) {
    auto& opt = model.optimizer();
    opt.set_learning_rate_schedule(nullptr);
    const auto train_rows = static_cast<std::int64_t>(double(x_train.samples()) * (1.0 - a.validation_split));
    const std::int64_t steps = a.epochs * ((train_rows + a.batch_size - 1) / a.batch_size);
    opt.set_learning_rate_schedule(lr_schedule(a, opt.learning_rate(), steps));
  }
  sy::FitOptions fit{.batch_size = a.batch_size,
                     .epochs = a.epochs,
                     .verbose = a.verbose,
                     .validation_split = a.validation_split};
  fit.augmentation = {.width_shift_range = a.width_shift_range,
                      .height_shift_range = a.height_shift_range,
                      .horizontal_flip = a.horizontal_flip};
  fit.callbacks = train_callbacks(a);
  fit.class_weight = class_weights(a.class_weight);
  model = place(model, device, c);
  model.fit(rescaled(x_train, a.rescale), y_train, fit);
  // Replicas: only the chief writes (save_weights/save do nothing on other workers) and prints.
  if (!a.save_weights.empty()) {
    model.save_weights(a.save_weights);
    if (g_chief) std::fprintf(stderr, "Saved the weights to %s\n", a.save_weights.c_str());
  }
  if (!a.save.empty()) {
    model.save(a.save,
               {.keras = a.save_for == "tf.keras" ? sy::KerasTarget::tf_keras : sy::KerasTarget::keras3});
    if (g_chief) std::fprintf(stderr, "Saved the model to %s\n", a.save.c_str());
  }
  auto scores =
      model.evaluate(rescaled(x_test, a.rescale), y_test, {.batch_size = a.batch_size, .verbose = 0});
  if (g_chief) print_test_scores(model, scores);
  return 0;
}

struct EvaluateArgs {
  std::string weights, dataset, split = "test";
  std::int64_t batch_size = 32, limit = 0;
  double rescale = 1.0;
  bool json = false;
};

int cmd_evaluate(const Common& c, const EvaluateArgs& a) {
  apply_seed(c);
  sy::Device device = resolve_device(c.device);
  std::optional<sy::Shape> shape;
  auto from_file = model_file(c, shape);
  sy::Arrays x, y;
  std::optional<sy::Model> made;
  if (from_file && several_io(*from_file)) {
    SYSTOLIC_CHECK(a.split == "train" || a.split == "test", "--split {}: expected train or test", a.split);
    auto d = load_several(*from_file, a.dataset, a.limit);
    const auto& split = a.split == "train" ? d.train : d.test;
    x = split.x, y = split.y;
  } else {
    SplitData d = load_split(a.dataset, a.split, a.limit, shape);
    made = from_file ? *from_file : make_model(c, d.input_shape, static_cast<int>(d.class_names.size()));
    check_model_fits(*made, d.input_shape, static_cast<int>(d.class_names.size()), "--dataset " + a.dataset);
    x = d.x, y = d.y;
  }
  auto model = made ? *made : *from_file;
  if (!a.weights.empty())
    model.load_weights(a.weights);
  else if (!is_full_model_file(c.model))
    sy::fail("--weights is required: --model {} has no weights of its own", c.model);
  if (!model.compiled()) compile_for_data(model, "adam", -1);
  model = place(model, device, c);
  auto scores = model.evaluate(rescaled(x, a.rescale), y, {.batch_size = a.batch_size, .verbose = 0});
  if (g_chief) a.json ? print_scores_json(model, scores) : print_test_scores(model, scores);
  return 0;
}

struct PredictArgs {
  std::string weights, classes, dataset, split = "test", input, output;
  std::vector<std::string> images;
  double rescale = 1.0;
  int top = 3;
  bool json = false;
  std::int64_t index = -1;
};

std::vector<std::string> class_names_for(const std::string& spec, int outputs) {
  std::vector<std::string> names;
  if (spec.empty()) {
    for (int i = 0; i < outputs; ++i) names.push_back(std::to_string(i));
    return names;
  }
  names = sy::datasets::class_names(spec);
  if (names.empty()) {
    std::ifstream in(spec);
    if (!in)
      sy::fail("--classes {}: not cifar10, fashion_mnist, mnist or a readable file (one name per line)",
               spec);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) names.push_back(line);
    }
  }
  if (static_cast<int>(names.size()) != outputs)
    sy::fail("--classes {}: {} names for a model with {} outputs", spec, names.size(), outputs);
  return names;
}

// A value of an array as nested JSON lists (the sample's shape).
nlohmann::ordered_json nested(const float* p, const sy::Shape& shape, int axis = 0) {
  if (axis == shape.rank()) return *p;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::int64_t step = 1;
  for (int a = axis + 1; a < shape.rank(); ++a) step *= shape[a];
  for (std::int64_t i = 0; i < shape[axis]; ++i) out.push_back(nested(p + i * step, shape, axis + 1));
  return out;
}

// predict --input: the samples of each input, from an .npy array (a model of one input) or an .npz of one array
// per input, by the input's name or its position (arr_0, arr_1, ...: numpy.savez's names for arrays given in order).
sy::Arrays predict_inputs(const sy::Model& model, const std::string& path) {
  const auto names = input_names(model);
  sy::Arrays x;
  if (!path.ends_with(".npz")) {
    if (names.size() > 1)
      sy::fail(
          "--input {}: the model has {} inputs ({}); give an .npz holding an array for each, by name or as "
          "arr_0, arr_1, ...",
          path, names.size(), fmt::join(names, ", "));
    x.push_back(sy::npy::load(path));
  } else {
    auto arrays = sy::npy::load_npz(path);
    std::string held;
    for (auto& [k, v] : arrays) held += (held.empty() ? "" : ", ") + k;
    for (std::size_t i = 0; i < names.size(); ++i) {
      auto it = arrays.find(names[i]);
      if (it == arrays.end()) it = arrays.find("arr_" + std::to_string(i));
      if (it == arrays.end() && names.size() == 1 && arrays.size() == 1) it = arrays.begin();
      if (it == arrays.end())
        sy::fail("--input {}: no array for the model's input '{}': name it {} or arr_{} (this file holds {})",
                 path, names[i], names[i], i, held.empty() ? "none" : held);
      x.push_back(it->second);
    }
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    const sy::Shape in = model.inputs()[i].shape();
    sy::Tensor& t = x[i];
    if (t.shape() == in) t = t.reshape(in.with_batch(1));  // one sample without its batch axis
    if (t.rank() < 1 || t.shape().without_batch() != in)
      sy::fail(
          "--input {}: {}an array of shape {}; the model takes samples of shape {} (give N of them: (N, "
          "...))",
          path, names.size() > 1 ? fmt::format("input '{}': ", names[i]) : "", t.shape().str(), in.str());
    if (t.dim(0) != x[0].dim(0))
      sy::fail("--input {}: input '{}' has {} samples but '{}' has {}", path, names[i], t.dim(0), names[0],
               x[0].dim(0));
    if (t.dtype() != sy::DType::uint8) t = t.to(sy::DType::float32);
  }
  return x;
}

// predict --input X.npy (or X.npz, several inputs): the model's outputs for every sample, to --output Y.npy (one
// output) or Y.npz (an array per output, by name), or as one JSON line per sample: the sample's outputs as nested
// lists, an object of them by output name for a model of several.
int predict_arrays(const Common& c, const PredictArgs& a, sy::Device device) {
  if (!a.dataset.empty() || !a.images.empty())
    sy::fail("predict: give --input, image files or --dataset (one of them)");
  std::optional<sy::Shape> shape;
  auto from_file = model_file(c, shape);
  if (!from_file) sy::fail("predict --input: give the model as a file (--model M.keras or .h5)");
  auto model = *from_file;
  if (!a.weights.empty()) model.load_weights(a.weights);
  if (!device.is_cpu()) model.to(device);
  const auto names = model.output_names();
  if (!a.output.empty() && !a.output.ends_with(".npz") && names.size() > 1)
    sy::fail("--output {}: the model has {} outputs ({}); give an .npz name, which holds an array for each",
             a.output, names.size(), fmt::join(names, ", "));
  const sy::Arrays x = rescaled(predict_inputs(model, a.input), a.rescale);
  std::vector<sy::Tensor> y = model.predict_outputs(x);
  for (auto& t : y) t = t.to(sy::DType::float32);
  if (!a.output.empty()) {
    if (a.output.ends_with(".npz")) {
      std::vector<std::pair<std::string, sy::Tensor>> arrays;
      for (std::size_t k = 0; k < y.size(); ++k) arrays.emplace_back(names[k], y[k]);
      sy::npy::save_npz(a.output, arrays);
    } else {
      sy::npy::save(a.output, y[0]);
    }
    for (std::size_t k = 0; k < y.size(); ++k)
      std::fprintf(stderr, "Wrote the outputs %s%s to %s\n", y.size() > 1 ? (names[k] + " ").c_str() : "",
                   y[k].shape().str().c_str(), a.output.c_str());
    return 0;
  }
  auto sample = [&](std::size_t k, std::int64_t i) {
    const sy::Shape shape = y[k].shape().without_batch();
    return nested(y[k].data<float>() + i * shape.numel(), shape);
  };
  for (std::int64_t i = 0; i < y[0].dim(0); ++i) {
    nlohmann::ordered_json line;
    if (y.size() == 1) {
      line = sample(0, i);
    } else {
      for (std::size_t k = 0; k < y.size(); ++k) line[names[k]] = sample(k, i);
    }
    std::printf("%s\n", line.dump().c_str());
  }
  return 0;
}

int cmd_predict(const Common& c, const PredictArgs& a) {
  apply_seed(c);
  sy::Device device = resolve_device(c.device);
  if (!a.input.empty()) return predict_arrays(c, a, device);
  if (!a.output.empty()) sy::fail("predict: --output goes with --input");
  bool from_dataset = !a.dataset.empty();
  if (from_dataset == !a.images.empty())
    sy::fail("predict: give image files, or --dataset with --index (not both)");
  if (from_dataset && a.index < 0) sy::fail("predict: --dataset needs --index");
  std::optional<sy::Shape> shape;
  auto from_file = model_file(c, shape);
  std::optional<SplitData> d;
  // A named data set is read at its own size and only the image asked for is resized (below); image folders
  // are read at the model's.
  if (from_dataset)
    d = load_split(a.dataset, a.split, 0, a.dataset.starts_with("dir:") ? shape : std::nullopt);
  auto model = from_file ? *from_file
                         : make_model(c, d ? d->input_shape : shape.value_or(sy::Shape{32, 32, 3}),
                                      d ? static_cast<int>(d->class_names.size()) : 10);
  if (!a.weights.empty())
    model.load_weights(a.weights);
  else if (!is_full_model_file(c.model))
    sy::fail("--weights is required: --model {} has no weights of its own", c.model);
  if (!device.is_cpu()) model.to(device);
  const sy::Shape in = model.inputs()[0].shape();
  if (in.rank() != 3 || (in[2] != 1 && in[2] != 3))
    sy::fail("predict: the model's input {} is not an image (H, W, 1 or 3)", in.keras_str());
  int outputs = static_cast<int>(model.outputs()[0].shape()[-1]);
  auto names = from_dataset && a.classes.empty() && static_cast<int>(d->class_names.size()) == outputs
                   ? d->class_names
                   : class_names_for(a.classes, outputs);

  // The inputs, as uint8 (H, W, C) images at the model's size, then float * rescale.
  std::vector<sy::Tensor> images;
  std::vector<std::string> labels;
  if (from_dataset) {
    std::int64_t n = d->x.dim(0);
    SYSTOLIC_CHECK(a.index < n, "--index {}: the {} split of {} has {} images (0 to {})", a.index, a.split,
                   a.dataset, n, n - 1);
    sy::Tensor img = sy::image::resize_batch(d->x.slice(a.index, a.index + 1), in[0], in[1],
                                             static_cast<int>(in[2]), "--dataset " + a.dataset)
                         .reshape(in);
    SYSTOLIC_CHECK(img.shape() == in, "--dataset {}: images are {}, the model takes {}", a.dataset,
                   img.shape().keras_str(), in.keras_str());
    images.push_back(img);
    labels.push_back(fmt::format("{}:{}:{}", a.dataset, a.split, a.index));
  } else {
    for (auto& path : a.images) {
      images.push_back(sy::image::read_resized(path, in[0], in[1], static_cast<int>(in[2])));
      labels.push_back(path);
    }
  }
  sy::Tensor x = sy::image::to_float_batch(images, a.rescale);
  sy::Tensor probs = model.predict(x).to(sy::DType::float32);
  for (std::size_t i = 0; i < images.size(); ++i) {
    const float* p = probs.data<float>() + i * outputs;
    int best = static_cast<int>(std::max_element(p, p + outputs) - p);
    if (a.json) {
      nlohmann::ordered_json j;
      if (from_dataset) {
        int label = static_cast<int>(d->y.slice(a.index, a.index + 1).to_doubles()[0]);
        j = {{"dataset", a.dataset}, {"split", a.split}, {"index", a.index}, {"label", label}};
      } else {
        j = {{"file", labels[i]}};
      }
      j["class"] = names[best];
      j["class_index"] = best;
      j["probabilities"] = std::vector<float>(p, p + outputs);
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s: %s (%d)\n", labels[i].c_str(), names[best].c_str(), best);
      std::vector<int> order(outputs);
      for (int k = 0; k < outputs; ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(), [&](int u, int v) { return p[u] > p[v]; });
      for (int k = 0; k < std::min(a.top, outputs); ++k)
        std::printf("  %d. %-20s %.4f\n", k + 1, names[order[k]].c_str(), p[order[k]]);
    }
  }
  return 0;
}

struct ShowArgs {
  std::string dataset, split = "test", output;
  std::int64_t index = 0;
  int scale = 8;
  std::int64_t limit = 0;
};

int cmd_show(const Common& c, const ShowArgs& a) {
  std::optional<sy::Shape> shape;
  if (!c.input_shape.empty()) shape = parse_shape(c.input_shape);
  SplitData d = load_split(a.dataset, a.split, a.limit, shape);
  std::int64_t n = d.x.dim(0);
  SYSTOLIC_CHECK(a.index >= 0 && a.index < n, "--index {}: the {} split of {} has {} images (0 to {})",
                 a.index, a.split, a.dataset, n, n - 1);
  sy::Tensor img = d.x.slice(a.index, a.index + 1).reshape(d.x.shape().without_batch()).clone();
  int label = static_cast<int>(d.y.slice(a.index, a.index + 1).to_doubles()[0]);
  std::string name =
      label >= 0 && label < static_cast<int>(d.class_names.size()) ? d.class_names[label] : "?";
  sy::image::write_png(a.output, sy::image::upscale_nearest(img, a.scale));
  if (::isatty(::fileno(stdout))) std::fputs(sy::image::terminal_preview(img).c_str(), stdout);
  std::printf("%s %s[%lld]: label %d (%s), %lldx%lldx%lld, written to %s scaled %dx\n", a.dataset.c_str(),
              a.split.c_str(), static_cast<long long>(a.index), label, name.c_str(),
              static_cast<long long>(img.dim(0)), static_cast<long long>(img.dim(1)),
              static_cast<long long>(img.dim(2)), a.output.c_str(), a.scale);
  return 0;
}

int cmd_datasets() {
  std::printf("%-14s %-10s %-50s %s\n", "NAME", "AVAILABLE", "LOCATION", "SOURCE");
  for (auto& d : sy::datasets::known())
    std::printf("%-14s %-10s %-50s %s\n", d.name.c_str(), d.available ? "yes" : "download",
                d.location.c_str(), d.source.c_str());
  std::printf("%-14s %-10s %-50s %s\n", "dir:PATH", "-", "PATH", "image folders: one subfolder per class");
  std::printf("Cache: %s (SYSTOLIC_HOME=%s)\n", sy::datasets::cache_dir().c_str(),
              std::getenv("SYSTOLIC_HOME") ? std::getenv("SYSTOLIC_HOME") : "unset, default ~/.systolic");
  return 0;
}

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.1f} GiB", double(bytes) / (1024.0 * 1024 * 1024));
}

int cmd_info() {
  auto cpu = sy::cpu_info();
  auto build = sy::build_info();
  std::printf("systolic %s\n", build.version.c_str());
  std::printf("CPU: %s, %d cores, ISA %s, %d OpenMP threads, %s memory\n", cpu.model.c_str(), cpu.cores,
              cpu.isa.c_str(), cpu.threads, gib(cpu.memory_bytes).c_str());
  std::printf("CPU bfloat16: %s\n", cpu.native_bfloat16 ? "native kernels (oneDNN)"
                                                        : "widened to float32 (no bfloat16 instructions)");
  auto gpus = sy::gpu_info();
  if (!build.cuda)
    std::printf("GPUs: none (this build has no CUDA support)\n");
  else if (gpus.empty())
    std::printf("GPUs: none found\n");
  else
    std::printf("GPUs: %zu\n", gpus.size());
  for (auto& g : gpus) std::printf("  %s\n", sy::describe_device(sy::Device::cuda(g.index)).c_str());
  // The PJRT plugins of the XLA backend (docs/xla.md), one line each, then their devices.
  for (auto platform : {sy::XlaPlatform::cpu, sy::XlaPlatform::cuda, sy::XlaPlatform::tpu}) {
    const char* name = platform == sy::XlaPlatform::cpu    ? "cpu"
                       : platform == sy::XlaPlatform::cuda ? "cuda"
                                                           : "tpu";
    auto plugin = sy::xla_plugin_info(platform);
    if (!plugin.available) {
      std::printf("XLA %s: none (%s)\n", name, plugin.why.c_str());
      continue;
    }
    std::printf("XLA %s: %s, PJRT API %d.%d, %s, %zu devices\n", name, plugin.path.c_str(), plugin.api_major,
                plugin.api_minor, plugin.platform_version.c_str(), plugin.devices.size());
    for (auto& d : plugin.devices) std::printf("  %s\n", d.c_str());
  }
  std::printf("Build: oneDNN %s, OpenMP, CUDA %s, MPI %s\n", build.onednn_version.c_str(),
              build.cuda ? fmt::format("on (runtime {}, cuDNN {}, cuBLASLt {})", build.cuda_runtime,
                                       build.cudnn_version, build.cublas_version)
                               .c_str()
                         : "off",
              build.mpi ? "on" : "off");
  std::printf("Default device: %s\n", sy::default_device().str().c_str());
  std::printf("Deterministic ops: %s\n",
              sy::op_determinism_enabled() ? "on" : "off (SYSTOLIC_DETERMINISTIC_OPS=1 turns them on)");
  return 0;
}

struct BenchArgs {
  std::int64_t batch_size = 128;
  int steps = 10;
  int warmup = 1;
  std::int64_t samples = 0;  // 0: batch_size * steps
  int epochs = 1;            // timed epochs
};

// Replicas across every process: --replicas, or the MPI job's size.
int replicas_of(const Common& c) {
  return sy::distribute::launched_by_mpi() ? sy::distribute::launched_world_size() : c.replicas;
}

int cmd_benchmark(const Common& c, const BenchArgs& a) {
  apply_seed(c);
  sy::Device device = resolve_device(c.device);
  auto model = make_model(c, {32, 32, 3}, 10);
  sy::Shape shape = model.inputs()[0].shape();
  int classes = static_cast<int>(model.outputs()[0].shape()[-1]);
  // Random uint8 images and labels, `steps` batches of them: the speed of a step does not depend on the
  // values. Training runs as fit runs it (on a GPU: data on the device, the step replayed from a CUDA graph):
  // a first epoch warms up (buffers, algorithm choice, graph capture), the second is timed; fit returns after
  // the device has finished.
  sy::Generator g(7);
  std::int64_t n = a.samples > 0 ? a.samples : a.batch_size * a.steps;
  sy::Tensor x(shape.with_batch(n), sy::DType::uint8), y({n}, sy::DType::uint8);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(g.next_u32());
  for (std::int64_t i = 0; i < n; ++i)
    y.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(g.next_u32() % classes);
  model = place(model, device, c);
  using clock = std::chrono::steady_clock;
  sy::FitOptions fit{.batch_size = a.batch_size, .epochs = 1, .verbose = 0};
  // On an XLA device the warm-up traces and compiles the step: its compile time is reported apart.
  const auto compiled_before = sy::xla_compile_stats();
  auto w0 = clock::now();
  for (int i = 0; i < std::max(1, a.warmup); ++i) model.fit(x, y, fit);
  const double warmup_s = std::chrono::duration<double>(clock::now() - w0).count();
  const auto compiled_warm = sy::xla_compile_stats();
  std::vector<double> epoch_s;
  for (int e = 0; e < a.epochs; ++e) {
    auto t0 = clock::now();
    model.fit(x, y, fit);
    epoch_s.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    // As it goes, on stderr: a run cut short (a time limit) still leaves the epochs it finished.
    if (g_chief)
      std::fprintf(stderr, "benchmark: epoch %d/%d: %.3f s, %.0f images/s\n", e + 1, a.epochs, epoch_s.back(),
                   double(n) / epoch_s.back());
  }
  double train_s = 0;
  for (double t : epoch_s) train_s += t;
  double sec_per_epoch = train_s / double(a.epochs);
  sy::Tensor one = x.slice(0, 1);
  std::vector<double> ms;
  for (int i = 0; i < 55; ++i) {
    auto s = clock::now();
    model.predict(one);
    if (i >= 5) ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - s).count());
  }
  std::sort(ms.begin(), ms.end());
  nlohmann::json j = {{"model", c.model},
                      {"device", device.str()},
                      {"batch_size", a.batch_size},
                      {"train_images_per_sec", double(n) / sec_per_epoch},
                      {"samples", n},
                      {"sec_per_epoch", sec_per_epoch},
                      {"epoch_s", epoch_s},
                      {"predict_ms", (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2},
                      {"steps_per_epoch", (n + a.batch_size - 1) / a.batch_size},
                      {"step_mode", model.step_mode()},
                      {"policy", c.policy},
                      {"deterministic_ops", sy::op_determinism_enabled()},
                      {"input_shape", shape.dims()},
                      {"threads", sy::cpu_info().threads},
                      {"replicas", replicas_of(c)}};
  j["warmup_s"] = warmup_s;
  if (device.is_xla()) {
    const auto compiled_after = sy::xla_compile_stats();
    j["xla_warmup_compile_s"] = compiled_warm.seconds - compiled_before.seconds;
    j["xla_warmup_programs"] = compiled_warm.programs - compiled_before.programs;
    j["xla_programs_after_warmup"] = compiled_after.programs - compiled_warm.programs;
  }
  if (g_chief) std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  sy::set_log_stream(stderr);
  CLI::App app{"systolic: train Keras-style neural networks in C++"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(sy::build_info().version));

  Common common;
  auto* summary = app.add_subcommand("summary", "print Keras's model.summary() table");
  add_common(summary, common);
  bool to_json = false;
  summary->add_flag("--to-json", to_json,
                    "print the model's Keras JSON (model.to_json()) instead of the table");

  TrainArgs train_args;
  auto* train = app.add_subcommand("train", "train a model (Keras fit), then evaluate on the test split");
  add_common(train, common);
  add_replicas(train, common);
  train->add_option("--dataset", train_args.dataset, sy::datasets::names())->required();
  train->add_option("--epochs", train_args.epochs, "epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--batch-size", train_args.batch_size, "batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--optimizer", train_args.optimizer, "Keras's name: " + joined(sy::optimizers::names()))
      ->capture_default_str();
  train
      ->add_option("--loss", train_args.loss,
                   "loss for a model without a training config, or to recompile one (Keras's name: " +
                       joined(sy::losses::names()) + ")")
      ->capture_default_str();
  train->add_option("--lr", train_args.lr, "learning rate (default: the optimizer's Keras default)")
      ->check(CLI::PositiveNumber);
  train
      ->add_option("--validation-split", train_args.validation_split, "fraction of training samples held out")
      ->check(CLI::Range(0.0, 0.999));
  train->add_option(
      "--class-weight", train_args.class_weight,
      "Keras's class_weight as CLASS:WEIGHT,... (e.g. 0:1,1:5): each training sample's loss counts "
      "its class's weight, 1 for a class not named");
  train->add_option("--limit", train_args.limit, "use the first N samples of each split")
      ->check(CLI::PositiveNumber);
  train->add_option("--rescale", train_args.rescale,
                    "multiply pixel values by F (default 1: raw 0-255; 1/255 gives [0, 1])");
  train->add_option("--verbose", train_args.verbose, "0, 1 or 2 as in Keras")
      ->capture_default_str()
      ->check(CLI::Range(0, 2));

  train
      ->add_option("--width-shift-range", train_args.width_shift_range,
                   "augmentation: random horizontal shifts (< 1: fraction of the width, else pixels)")
      ->check(CLI::NonNegativeNumber);
  train
      ->add_option("--height-shift-range", train_args.height_shift_range,
                   "augmentation: random vertical shifts (< 1: fraction of the height, else pixels)")
      ->check(CLI::NonNegativeNumber);
  train->add_flag("--horizontal-flip", train_args.horizontal_flip, "augmentation: random horizontal flips");
  train->add_option("--weights", train_args.weights, "initial weights (Keras .h5 or .weights.h5)");
  train->add_option("--save-weights", train_args.save_weights,
                    "write the trained weights (.h5: tf.keras layout; .weights.h5: Keras 3)");
  train->add_option(
      "--save", train_args.save,
      "write the trained model: .keras (Keras 3), .h5 (legacy full model) or .weights.h5 (weights only)");
  train
      ->add_option(
          "--save-for", train_args.save_for,
          "the Keras that reads the .h5 --save writes: keras3 (default) or tf.keras (they number a nested "
          "model's calls differently; a model without nested models is read by both either way)")
      ->check(CLI::IsMember({"keras3", "tf.keras"}));
  add_callback_flags(train, train_args);
  add_schedule_flags(train, train_args);

  EvaluateArgs eval_args;
  auto* evaluate = app.add_subcommand(
      "evaluate", "evaluate a model on a data set split; prints the test loss and metrics");
  add_common(evaluate, common);
  add_replicas(evaluate, common);
  evaluate->add_option("--weights", eval_args.weights,
                       "Keras weights file (not needed for a full model: .keras or .h5)");
  evaluate->add_option("--dataset", eval_args.dataset, sy::datasets::names())->required();
  evaluate->add_option("--split", eval_args.split, "train or test")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "test"}));
  evaluate->add_option("--batch-size", eval_args.batch_size, "batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  evaluate->add_option("--limit", eval_args.limit, "use the first N samples")->check(CLI::PositiveNumber);
  evaluate->add_option("--rescale", eval_args.rescale,
                       "multiply pixel values by F (default 1: raw 0-255; 1/255 gives [0, 1])");
  evaluate->add_flag("--json", eval_args.json,
                     "print the loss and metrics as one JSON object (Keras's evaluate(return_dict=True))");

  PredictArgs predict_args;
  auto* predict = app.add_subcommand(
      "predict",
      "class probabilities for image files or one data set sample; any model's outputs for an array");
  add_common(predict, common);
  predict->add_option("--weights", predict_args.weights,
                      "Keras weights file (not needed for a full model: .keras or .h5)");
  predict->add_option("--rescale", predict_args.rescale, "multiply pixel values by F (default 1: raw 0-255)")
      ->capture_default_str();
  predict->add_option("--classes", predict_args.classes,
                      "class names: cifar10, fashion_mnist, mnist or a FILE (one per line)");
  predict->add_option("--top", predict_args.top, "classes listed per input (table output)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  predict->add_flag("--json", predict_args.json, "one JSON line per input");
  predict->add_option("--dataset", predict_args.dataset, sy::datasets::names());
  predict->add_option("--split", predict_args.split, "train or test")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "test"}));
  predict->add_option("--index", predict_args.index, "sample index in the split")
      ->check(CLI::NonNegativeNumber);
  predict->add_option("images", predict_args.images,
                      "image files (PNG, JPEG, BMP), resized to the model's input");
  predict->add_option(
      "--input", predict_args.input,
      "an .npy array of samples (N, ...) for a model of any input, or an .npz of one array per "
      "input (by input name, or arr_0, arr_1, ...): its outputs for each");
  predict->add_option("--output", predict_args.output,
                      "with --input: write the outputs as an .npy array, or an .npz of one array per output "
                      "(default: one JSON line per sample)");

  ShowArgs show_args;
  auto* show =
      app.add_subcommand("show", "write one image of a data set as PNG (scaled up) and print its label");
  show->add_option("--dataset", show_args.dataset, sy::datasets::names())->required();
  show->add_option("--split", show_args.split, "train or test")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "test"}));
  show->add_option("--index", show_args.index, "sample index in the split")
      ->required()
      ->check(CLI::NonNegativeNumber);
  show->add_option("-o,--output", show_args.output, "PNG file to write")->required();
  show->add_option("--scale", show_args.scale, "nearest-neighbour scale factor")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  show->add_option("--input-shape", common.input_shape, "H,W,C to resize image folders (dir:PATH) to");
  show->add_option("--limit", show_args.limit, "use the first N samples of each split")
      ->check(CLI::PositiveNumber);

  // plot LOG.csv -o OUT.png: training curves of a --csv-log file (systolic/plot.h).
  std::string plot_csv, plot_out;
  int plot_width = 0, plot_height = 0;
  auto* plot =
      app.add_subcommand("plot", "draw the loss and metric curves of a CSV log (--csv-log) as a PNG");
  plot->add_option("log", plot_csv, "CSV log (Keras's CSVLogger format)")->required();
  plot->add_option("-o,--output", plot_out, "PNG file to write")->required();
  plot->add_option("--width", plot_width, "image width (default: 520 per panel column)")
      ->check(CLI::Range(300, 10000));
  plot->add_option("--height", plot_height, "image height (default: 380 per panel row)")
      ->check(CLI::Range(300, 10000));

  auto* datasets = app.add_subcommand(
      "datasets", "the known data sets, where they are cached, whether they are available");

  auto* info = app.add_subcommand("info", "devices found and build features");

  BenchArgs bench_args;
  auto* bench =
      app.add_subcommand("benchmark", "training images/s and single-image predict latency, one JSON line");
  add_common(bench, common);
  add_replicas(bench, common);
  bench->add_option("--batch-size", bench_args.batch_size, "batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bench->add_option("--steps", bench_args.steps, "batches per epoch when --samples is not given")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bench->add_option("--samples", bench_args.samples, "images per epoch (default: batch size x steps)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--epochs", bench_args.epochs, "timed epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bench->add_option("--warmup", bench_args.warmup, "untimed epochs of N steps first")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
    train_args.optimizer_given = train->count("--optimizer") > 0;
    train_args.loss_given = train->count("--loss") > 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "systolic: error: %s\n", e.what());
    std::fprintf(stderr, "Run with --help for usage.\n");
    return 2;
  }
  try {
    if (summary->parsed()) return cmd_summary(common, to_json);
    if (train->parsed()) return cmd_train(common, train_args);
    if (evaluate->parsed()) return cmd_evaluate(common, eval_args);
    if (predict->parsed()) return cmd_predict(common, predict_args);
    if (info->parsed()) return cmd_info();
    if (show->parsed()) return cmd_show(common, show_args);
    if (datasets->parsed()) return cmd_datasets();
    if (plot->parsed()) {
      auto log = sy::plot::read_csv_log(plot_csv);
      std::size_t panels = 0;
      for (auto& [k, v] : log.columns) panels += !k.starts_with("val_");
      int cols = int(std::ceil(std::sqrt(double(std::max<std::size_t>(panels, 1)))));
      int rows = int((std::max<std::size_t>(panels, 1) + cols - 1) / cols);
      sy::plot::plot_training_log(log, std::filesystem::path(plot_csv).filename().string(), plot_out,
                                  plot_width ? plot_width : std::max(300, 520 * cols),
                                  plot_height ? plot_height : std::max(300, 36 + 380 * rows));
      std::fprintf(stderr, "Wrote %s\n", plot_out.c_str());
      return 0;
    }
    if (bench->parsed()) return cmd_benchmark(common, bench_args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "systolic: error: %s\n", e.what());
    std::fflush(stderr);
    // Under MPI, the other workers may be waiting for this one in a collective: end the job now.
    sy::distribute::abort_workers(1);
    return 1;
  }
  return 0;
}
