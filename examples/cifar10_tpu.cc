// The seed, in C++: the Keras notebook that trains a CNN on CIFAR-10 on a TPU, step for step, on the best
// device present. Each step is headed by the notebook's line it stands for (in Python, as a comment).
//
//   cifar10_tpu [--dataset cifar10|fashion_mnist] [--epochs N] [--device auto|cpu|cuda[:I]|xla:cpu|tpu] [--replicas N]
//               [--limit N] [--output DIR] [--seed S] [--policy float32|mixed_bfloat16]
//
// When CIFAR-10 is neither cached nor downloadable (no network), it says so in one line and runs the same
// workflow on Fashion-MNIST (28x28x1; the same CNN with that input shape), naming the data set it uses in
// every heading and file name. Output files go to --output: <dataset>_model.h5 (the notebook's
// cifar10_model.h5) and <dataset>_test_111.png (the predicted test image, scaled up 8x).
#include <systolic/systolic.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sy = systolic;

// def create_model(): the notebook's CNN, spelled out with the functional API as the notebook does
// (models::seed_cnn builds the same, layer for layer; tests/test_cifar10_tpu.cc checks that the two agree).
// The input shape is a parameter only so that the Fashion-MNIST fallback can reuse it; the notebook's is
// (32, 32, 3).
sy::Model create_model(const sy::Shape& input_shape = {32, 32, 3}) {
  auto input = sy::layers::Input(input_shape, {.name = "Input"});
  auto x = sy::layers::BatchNormalization()(input);
  x = sy::layers::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = sy::layers::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = sy::layers::MaxPooling2D({2, 2})(x);
  x = sy::layers::Dropout(0.25)(x);
  x = sy::layers::BatchNormalization()(x);
  x = sy::layers::Conv2D(64, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = sy::layers::Conv2D(64, {3, 3}, {.activation = "relu"})(x);
  x = sy::layers::MaxPooling2D({2, 2})(x);
  x = sy::layers::Dropout(0.25)(x);
  x = sy::layers::Flatten()(x);
  x = sy::layers::Dense(512, {.activation = "relu"})(x);
  x = sy::layers::Dropout(0.5)(x);
  auto output = sy::layers::Dense(10, {.activation = "softmax"})(x);
  sy::Model model(input, output);
  // model.compile(optimizer=Adam(0.001), loss=sparse_categorical_crossentropy,
  //               metrics=['sparse_categorical_accuracy'])
  // (The notebook's tf.train.AdamOptimizer uses epsilon 1e-8; Keras's Adam, and this one, 1e-7.)
  model.compile(sy::optimizers::Adam(0.001), "sparse_categorical_crossentropy",
                {"sparse_categorical_accuracy"});
  return model;
}

namespace {

struct Options {
  std::string dataset = "cifar10";
  int epochs = 50;
  std::string device = "auto";
  int replicas = 1;
  std::int64_t limit = 0;  // 0: every training sample
  std::string output = ".";
  std::optional<std::uint64_t> seed;
  std::string policy = "float32";
};

// The data set this run uses, and the names its output gives it.
struct Data {
  std::string id;     // "cifar10" or "fashion_mnist": file names
  std::string title;  // "CIFAR-10" or "Fashion-MNIST": headings
  sy::Tensor x_train, y_train, x_test, y_test;
  std::vector<std::string> class_names;
};

// Keras's Fashion-MNIST comes as (N, 28, 28); the CNN takes images with a channel axis, (N, 28, 28, 1).
sy::Tensor with_channel(const sy::Tensor& x) {
  return x.reshape({x.dim(0), x.dim(1), x.dim(2), 1});
}

Data from(const std::string& id, const std::string& title, const sy::datasets::Dataset& d) {
  bool grey = d.train.x.rank() == 3;
  return {id,
          title,
          grey ? with_channel(d.train.x) : d.train.x,
          d.train.y,
          grey ? with_channel(d.test.x) : d.test.x,
          d.test.y,
          d.class_names};
}

// (x_train, y_train), (x_test, y_test) = tf.keras.datasets.cifar10.load_data()
// Only "not cached and cannot be downloaded" (datasets::Unavailable) falls back to Fashion-MNIST; a corrupt
// copy or a checksum mismatch stops the program, since another data set would hide a problem someone must
// fix.
Data load_data(const std::string& name) {
  auto fashion_mnist = [] {
    return from("fashion_mnist", "Fashion-MNIST", sy::datasets::fashion_mnist::load_data());
  };
  if (name == "fashion_mnist") return fashion_mnist();
  try {
    return from("cifar10", "CIFAR-10", sy::datasets::cifar10::load_data());
  } catch (const sy::datasets::Unavailable& e) {
    std::printf("CIFAR-10 unavailable, running the same workflow on Fashion-MNIST instead: %s\n", e.what());
    std::fflush(stdout);
    return fashion_mnist();
  }
}

// Every heading names the data set, so a fallback run cannot be mistaken for a CIFAR-10 run.
void heading(const Data& data, const std::string& what) {
  std::printf("\n== %s: %s ==\n", data.title.c_str(), what.c_str());
  std::fflush(stdout);  // the library's logs go to the same stream; keep the order
}

// strategy = tf.contrib.distribute.TPUStrategy(...): the one place that turns --device and --replicas into a
// strategy. One replica is OneDeviceStrategy on the chosen device; more replicas need MirroredStrategy, which
// this version of systolic does not have yet, so they are refused here with a clear message rather than run
// as one.
sy::distribute::Strategy make_strategy(sy::Device device, int replicas) {
  SYSTOLIC_CHECK(replicas >= 1, "--replicas {}: must be at least 1", replicas);
  if (replicas == 1) return sy::distribute::OneDeviceStrategy(device);
  // The seed's 8 TPU cores: N replicas, each on 1/N of every batch. On the CPU they split the cores; on GPUs
  // they are cuda:0 .. cuda:N-1.
  if (device.is_cpu()) return sy::distribute::MirroredStrategy::cpu(replicas);
  if (device.is_xla()) {  // the plugin's devices xla:<platform>:0 .. N-1
    std::vector<sy::Device> devices;
    for (int i = 0; i < replicas; ++i) devices.push_back(device.with_index(i));
    return sy::distribute::MirroredStrategy(devices);
  }
  std::vector<sy::Device> gpus;
  for (int i = 0; i < replicas; ++i) {
    SYSTOLIC_CHECK(sy::device_available(sy::Device::cuda(i)), "--replicas {}: GPU cuda:{} is not available",
                   replicas, i);
    gpus.push_back(sy::Device::cuda(i));
  }
  return sy::distribute::MirroredStrategy(gpus);
}

// --device: auto is the best device present (default_device(): a GPU when there is one).
sy::Device parse_device(const std::string& text) {
  if (text == "auto") return sy::default_device();
  sy::Device device;
  try {
    device = sy::Device::parse(text);
  } catch (const sy::Error& e) {
    sy::fail("--device {}: {}", text, e.what());
  }
  SYSTOLIC_CHECK(sy::device_available(device), "--device {}: not available ({})", text,
                 sy::build_info().cuda ? "no such GPU found" : "this build of systolic has no CUDA support");
  return device;
}

std::string shape_and_dtype(const sy::Tensor& t) {
  return t.shape().str() + " " + std::string(sy::dtype_name(t.dtype()));
}

int run(const Options& o) {
  if (o.seed) sy::set_random_seed(*o.seed);
  // The model is made under the policy (TPUs compute in bfloat16; on a GPU, mixed_bfloat16 does the same).
  sy::mixed_precision::set_global_policy(o.policy);
  std::filesystem::create_directories(o.output);
  // The device and the strategy are settled before the data set is loaded, so that a bad --device or
  // --replicas fails at once rather than after a 170 MB download; the model moves at the notebook's step
  // below.
  sy::Device device = parse_device(o.device);
  sy::distribute::Strategy strategy = make_strategy(device, o.replicas);
  // fit would refuse it too, but only after the data set is loaded.
  SYSTOLIC_CHECK(
      o.policy == "float32" || !device.is_cpu(),
      "--policy {} computes in bfloat16, which needs a GPU; the run is on {} (use --policy float32)",
      o.policy, device.str());

  Data data = load_data(o.dataset);
  sy::Tensor x_train = data.x_train, y_train = data.y_train;
  if (o.limit > 0 && o.limit < x_train.dim(0))
    x_train = x_train.slice(0, o.limit), y_train = y_train.slice(0, o.limit);
  heading(data, "data");
  std::string limited;
  if (x_train.dim(0) < data.x_train.dim(0))
    limited = " (the first " + std::to_string(x_train.dim(0)) + " of " + std::to_string(data.x_train.dim(0)) +
              ", --limit)";
  std::printf("x_train %s, y_train %s%s\nx_test %s, y_test %s\n", shape_and_dtype(x_train).c_str(),
              shape_and_dtype(y_train).c_str(), limited.c_str(), shape_and_dtype(data.x_test).c_str(),
              shape_and_dtype(data.y_test).c_str());
  const sy::Shape input_shape = x_train.shape().without_batch();

  // model = create_model()
  heading(data, "model = create_model()");
  sy::Model model = create_model(input_shape);
  model.summary();

  // strategy = tf.contrib.distribute.TPUStrategy(...)
  // tpu_model = tf.contrib.tpu.keras_to_tpu_model(model, strategy=strategy)
  heading(data, "tpu_model = to_accelerator(model, strategy)");
  sy::Model tpu_model = sy::to_accelerator(model, strategy);  // logs the hardware found

  // tpu_model.fit(x_train, y_train, batch_size=128 * 8, epochs=50, verbose=2)
  // 128 per replica; the notebook's 8 is the TPU v2-8's eight cores.
  const std::int64_t batch_size = 128 * strategy.num_replicas_in_sync();
  heading(data, "tpu_model.fit(batch_size=" + std::to_string(batch_size) +
                    ", epochs=" + std::to_string(o.epochs) + ") on " + device.str());
  tpu_model.fit(x_train, y_train, {.batch_size = batch_size, .epochs = o.epochs, .verbose = 2});

  // scores = tpu_model.evaluate(x_test, y_test)
  // print('Test accuracy: %.2f%%' % (scores[1] * 100))
  heading(data, "tpu_model.evaluate(x_test, y_test)");
  auto scores = tpu_model.evaluate(data.x_test, data.y_test, {.batch_size = batch_size, .verbose = 0});
  std::printf("Test loss: %.4f\nTest accuracy: %.2f%%\n", scores[0], scores[1] * 100.0);

  // tpu_model.save_weights("cifar10_model.h5")  (fashion_mnist_model.h5 in a Fashion-MNIST run)
  const std::string weights = (std::filesystem::path(o.output) / (data.id + "_model.h5")).string();
  heading(data, "tpu_model.save_weights(\"" + weights + "\")");
  tpu_model.save_weights(weights);
  std::printf("Saved the weights to %s\n", weights.c_str());

  // cpu_model = create_model()
  // cpu_model.load_weights("cifar10_model.h5")
  // The CPU computes in float32: the fresh model is made under that policy whatever --policy said (weights
  // files hold float32 weights either way).
  heading(data,
          "cpu_model = create_model(); cpu_model.load_weights(...); cpu_model.predict(x_test[111:112])");
  sy::mixed_precision::set_global_policy("float32");
  sy::Model cpu_model = create_model(input_shape);
  cpu_model.load_weights(weights);

  // prediction = cpu_model.predict(x_test[111:112]); print(prediction); print(the class name of its argmax)
  const std::int64_t index = 111;
  std::vector<double> p = cpu_model.predict(data.x_test.slice(index, index + 1)).to_doubles();
  std::size_t best = static_cast<std::size_t>(std::max_element(p.begin(), p.end()) - p.begin());
  std::printf("[");
  for (std::size_t i = 0; i < p.size(); ++i) std::printf("%s%.4f", i ? " " : "", p[i]);
  std::printf("]\n");
  int label = static_cast<int>(data.y_test.slice(index, index + 1).to_doubles()[0]);
  std::printf("Test image %lld: predicted %s (p=%.4f), label %s\n", static_cast<long long>(index),
              data.class_names[best].c_str(), p[best],
              data.class_names[static_cast<std::size_t>(label)].c_str());

  // Showing the image (the notebook draws it): written to a PNG (8x, nearest neighbour) and, on a terminal,
  // previewed there.
  sy::Tensor image = data.x_test.slice(index, index + 1).reshape(input_shape).clone();
  const std::string png = (std::filesystem::path(o.output) / (data.id + "_test_111.png")).string();
  sy::image::write_png(png, sy::image::upscale_nearest(image, 8));
  std::FILE* terminal = ::isatty(::fileno(stdout)) ? stdout : ::isatty(::fileno(stderr)) ? stderr : nullptr;
  if (terminal) std::fputs(sy::image::terminal_preview(image).c_str(), terminal);
  std::printf("Wrote test image %lld (%s) scaled 8x to %s\n", static_cast<long long>(index),
              data.class_names[static_cast<std::size_t>(label)].c_str(), png.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "The seed notebook (CIFAR-10 on a TPU with Keras) in C++: load, create_model, to_accelerator, fit, "
      "evaluate, save_weights, then a fresh CPU model loads the weights and predicts test image 111."};
  app.add_option("--dataset", o.dataset, "cifar10, or fashion_mnist (also used when CIFAR-10 cannot be had)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cifar10", "fashion_mnist"}));
  app.add_option("--epochs", o.epochs, "epochs to train (the notebook's 50)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--device", o.device, "auto (a GPU when one is present, else the CPU), cpu, cuda or cuda:I")
      ->capture_default_str();
  app.add_option("--replicas", o.replicas, "data-parallel replicas (batch 128 per replica)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--limit", o.limit, "train on the first N training samples (default: all)")
      ->check(CLI::PositiveNumber);
  app.add_option("--output", o.output, "folder for <dataset>_model.h5 and <dataset>_test_111.png")
      ->capture_default_str();
  app.add_option_function<std::uint64_t>(
      "--seed", [&o](std::uint64_t s) { o.seed = s; }, "random seed (repeatable runs)");
  app.add_option("--policy", o.policy, "float32, or mixed_bfloat16 (GPU only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "mixed_bfloat16"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "cifar10_tpu: error: %s\nRun with --help for usage.\n", e.what());
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "cifar10_tpu: error: %s\n", e.what());
    return 1;
  }
}
