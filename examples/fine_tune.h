// Keras's transfer-learning guide (keras.io/guides/transfer_learning) with data that ships offline, shared by
// examples/fine_tune.cc and tests/test_fine_tune.cc:
//   1. a CNN learns task A (Fashion-MNIST's classes 0-4: T-shirt/top, Trouser, Pullover, Dress, Coat, 30,000
//      images) and its base (everything but the classifier) is saved as a .keras file, as a user's pretrained
//      model would be;
//   2. the base is loaded, frozen, and a new head learns task B (classes 5-9: Sandal, Shirt, Sneaker, Bag,
//      Ankle boot) from a few labelled images (3 of each class by default);
//   3. the top block of the base is unfrozen and the model fine-tuned at a low learning rate;
// and, for comparison, the same architecture is trained from scratch on the same few images until more epochs
// no longer change it. What transfers is capacity without data: the base's 60,000 parameters learned from 30,000
// images; from scratch, the same network has only the 15.
// Repeatable: run() seeds systolic's generator (set_random_seed) and draws the samples with the seed; the figures
// also depend on the number of threads (the order of float sums).
#pragma once

#include <systolic/systolic.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace fine_tune {

namespace sy = systolic;

// Images uint8 (N, 28, 28, 1) and labels int32 (N,) in 0..classes-1.
struct Task {
  sy::Tensor x, y;
};

// The samples of `split` whose label is one of `classes`, labelled by their place in that list. per_class > 0:
// that many of each class, drawn without replacement by a permutation seeded with `seed`, in the permutation's
// order; otherwise all, in order.
inline Task select_classes(const sy::datasets::Split& split, const std::vector<int>& classes,
                           std::int64_t per_class = 0, std::uint64_t seed = 0) {
  const std::uint8_t* labels = split.y.data<std::uint8_t>();
  std::vector<std::int64_t> rows;
  for (std::int64_t i = 0; i < split.y.numel(); ++i)
    if (std::find(classes.begin(), classes.end(), labels[i]) != classes.end()) rows.push_back(i);
  if (per_class > 0) {
    auto order = sy::Generator(seed).permutation(static_cast<std::int64_t>(rows.size()));
    std::vector<std::int64_t> picked, taken(classes.size(), 0);
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(rows.size()); ++k) {
      std::int64_t r = rows[static_cast<std::size_t>(order[k])];
      auto c =
          static_cast<std::size_t>(std::find(classes.begin(), classes.end(), labels[r]) - classes.begin());
      if (taken[c] < per_class) ++taken[c], picked.push_back(r);
    }
    rows = picked;
  }
  auto n = static_cast<std::int64_t>(rows.size());
  std::int64_t pixels = split.x.numel() / split.x.dim(0);
  Task t{sy::Tensor({n, split.x.dim(1), split.x.dim(2), 1}, sy::DType::uint8),
         sy::Tensor({n}, sy::DType::int32)};
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t r = rows[static_cast<std::size_t>(k)];
    std::copy_n(split.x.data<std::uint8_t>() + r * pixels, pixels, t.x.data<std::uint8_t>() + k * pixels);
    t.y.data<std::int32_t>()[k] =
        static_cast<std::int32_t>(std::find(classes.begin(), classes.end(), labels[r]) - classes.begin());
  }
  return t;
}

// The base: raw 0-255 pixels -> Rescaling(1/255) -> Conv2D(16) -> MaxPooling2D -> Conv2D(32) -> MaxPooling2D ->
// two of Conv2D(64, no bias) -> BatchNormalization -> ReLU (the top block), (28, 28, 1) -> (7, 7, 64); every
// convolution 3x3, padding "same". No classifier on top, as keras.applications' include_top=False.
inline sy::Model make_base() {
  namespace L = sy::layers;
  auto inputs = L::Input({28, 28, 1}, {.name = "image"});
  auto x = L::Rescaling(1.0 / 255, {.name = "rescale"})(inputs);
  x = L::Conv2D(16, {3, 3}, {.padding = "same", .activation = "relu", .name = "conv1"})(x);
  x = L::MaxPooling2D({2, 2}, {.name = "pool1"})(x);
  x = L::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu", .name = "conv2"})(x);
  x = L::MaxPooling2D({2, 2}, {.name = "pool2"})(x);
  for (const char* n : {"3", "4"}) {
    x = L::Conv2D(64, {3, 3}, {.padding = "same", .use_bias = false, .name = std::string("conv") + n})(x);
    x = L::BatchNormalization({.name = std::string("bn") + n})(x);
    x = L::Activation("relu", {.name = std::string("relu") + n})(x);
  }
  return sy::Model(inputs, x, "base");
}

// A classifier on a base: base -> Flatten -> Dropout(0.2) -> Dense(classes) logits. With
// base_in_inference_mode the base is called with training=false, as the guide does with a pretrained base: its
// BatchNormalization uses its moving statistics and leaves them alone, also once unfrozen. Otherwise (pretraining,
// and the model trained from scratch) every layer trains as usual.
inline sy::Model classifier_on(const sy::Model& base, int classes, bool base_in_inference_mode,
                               const std::string& name) {
  namespace L = sy::layers;
  auto inputs = L::Input({28, 28, 1}, {.name = "image"});
  auto x = base_in_inference_mode ? base(inputs, false) : base(inputs);
  x = L::Flatten({.name = "flatten"})(x);
  x = L::Dropout(0.2, {.name = "dropout"})(x);
  auto logits = L::Dense(classes, {.name = "classifier"})(x);
  return sy::Model(inputs, logits, name);
}

inline void compile(sy::Model& model, double learning_rate) {
  model.compile(sy::optimizers::Adam(learning_rate),
                sy::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                {"sparse_categorical_accuracy"});
}

// Unfreezes the last `count` layers of the base (the rest stay frozen), as the guide's fine-tuning step does for
// the top of a large base. The caller compiles again.
inline void unfreeze_top(sy::Model& base, int count) {
  base.set_trainable(true);
  auto layers = base.layers();
  int n = static_cast<int>(layers.size());
  for (int i = 0; i < n - count; ++i) layers[static_cast<std::size_t>(i)]->set_trainable(false);
}

struct Settings {
  std::string base_path = "fine_tune_base.keras";  // where step 1 saves the pretrained base
  std::uint64_t seed = 1337;                       // set_random_seed, and the draw of task B's samples
  std::vector<int> task_a = {0, 1, 2, 3, 4}, task_b = {5, 6, 7, 8, 9};  // Fashion-MNIST class indices
  double learning_rate = 1e-3;  // pretraining, step 2 and the model from scratch
  int pretrain_epochs = 2;      // on all 30000 images of task A, batch 64
  std::int64_t per_class = 3;   // task B's training images of each class, drawn at random from its 6000
  int head_epochs = 200;        // step 2 (batch 32: one step an epoch for 15 images)
  int fine_tune_epochs = 200;   // step 3
  double fine_tune_learning_rate = 1e-4;
  int unfrozen_layers = 6;  // step 3 unfreezes the base's top block: conv3, bn3, relu3, conv4, bn4, relu4
  // From scratch: trained as many epochs as steps 2 and 3 together, evaluated, then to scratch_epochs in all.
  int scratch_epochs = 1000;
  std::FILE* log = nullptr;  // where each step prints what it did (nullptr: silent)
};

// Accuracies on test splits (task B's: 5000 images).
struct Figures {
  double pretrained = 0;          // task A, the pretrained model (base + its classifier)
  double untrained_head = 0;      // task B, the loaded, frozen base with a new, untrained head
  double frozen_base = 0;         // task B, after training the head (step 2)
  double fine_tuned = 0;          // task B, after fine-tuning the top of the base (step 3)
  double from_scratch = 0;        // task B, the same architecture trained from scratch on the same samples
  double from_scratch_early = 0;  // the same, after as many epochs as steps 2 and 3 together
  double fine_tuned_train = 0, from_scratch_train = 0;  // task B, on its training samples
};

// What run() gives back: the figures, and the models it made: the pretrained model (with `base` nested), the base
// loaded back from the file (whose top was then fine-tuned), the model of steps 2-3 and the one trained from scratch.
struct Result {
  Figures figures;
  sy::Model pretrained, base, loaded, transferred, scratch;
};

inline Result run(const sy::datasets::Dataset& data, const Settings& s) {
  auto accuracy = [](sy::Model& m, const Task& t) {
    return m.evaluate(t.x, t.y, {.batch_size = 250, .verbose = 0})[1];
  };
  auto say = [&](const char* format, auto... values) {
    if (s.log) std::fprintf(s.log, format, values...);
  };
  auto figure = [&](const std::string& what, double test, double train = -1) {
    say("   %-36s test accuracy %.4f", what.c_str(), test);
    if (train >= 0) say(" (training images %.4f)", train);
    say("%s", "\n");
  };
  auto lr = [](double rate) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", rate);
    return std::string(text);
  };
  auto names = [&](const std::vector<int>& classes) {
    std::string out;
    for (int c : classes) out += (out.empty() ? "" : ", ") + data.class_names[static_cast<std::size_t>(c)];
    return out;
  };
  sy::set_random_seed(s.seed);
  Task a_train = select_classes(data.train, s.task_a);
  Task a_test = select_classes(data.test, s.task_a);
  Task b_train = select_classes(data.train, s.task_b, s.per_class, s.seed + 1);
  Task b_test = select_classes(data.test, s.task_b);
  auto n = [](const Task& t) { return static_cast<long long>(t.y.numel()); };
  int a_classes = static_cast<int>(s.task_a.size()), b_classes = static_cast<int>(s.task_b.size());
  Figures f;
  say("Task A: %s. Task B: %s.\n", names(s.task_a).c_str(), names(s.task_b).c_str());

  // 1. Pretraining on task A; the base alone (no classifier) is saved, as a user's pretrained model would be.
  auto base = make_base();
  auto pretrained = classifier_on(base, a_classes, false, "task_a");
  compile(pretrained, s.learning_rate);
  pretrained.fit(a_train.x, a_train.y, {.batch_size = 64, .epochs = s.pretrain_epochs, .verbose = 0});
  f.pretrained = accuracy(pretrained, a_test);
  base.save(s.base_path);
  say("1. Pretrained a CNN on task A (%lld images, %d epochs): test accuracy %.4f (%lld images)\n"
      "   saved its base, without the classifier, to %s\n",
      n(a_train), s.pretrain_epochs, f.pretrained, n(a_test), s.base_path.c_str());

  // 2. Load the base, freeze it, put a new head on it for task B, train the head.
  auto loaded = sy::load_model(s.base_path, {.compile = false});
  loaded.set_trainable(false);
  auto model = classifier_on(loaded, b_classes, true, "task_b");
  compile(model, s.learning_rate);
  say("2. Loaded the base, froze it, put a new head on it for task B (%lld training images, %lld test "
      "images)\n",
      n(b_train), n(b_test));
  f.untrained_head = accuracy(model, b_test);
  figure("untrained head:", f.untrained_head);
  model.fit(b_train.x, b_train.y, {.batch_size = 32, .epochs = s.head_epochs, .verbose = 0});
  f.frozen_base = accuracy(model, b_test);
  figure("head trained " + std::to_string(s.head_epochs) + " epochs (lr " + lr(s.learning_rate) + "):",
         f.frozen_base);

  // 3. Fine-tuning: unfreeze the top of the base, compile again with a low learning rate, train again.
  unfreeze_top(loaded, s.unfrozen_layers);
  compile(model, s.fine_tune_learning_rate);
  std::string top;
  auto layers = loaded.layers();
  for (std::size_t i = layers.size() - static_cast<std::size_t>(s.unfrozen_layers); i < layers.size(); ++i)
    top += (top.empty() ? "" : ", ") + layers[i]->name();
  say("3. Unfroze the top of the base (%s): %lld of %lld parameters trainable\n", top.c_str(),
      static_cast<long long>(model.trainable_parameters().numel()),
      static_cast<long long>(model.count_params()));
  model.fit(b_train.x, b_train.y, {.batch_size = 32, .epochs = s.fine_tune_epochs, .verbose = 0});
  f.fine_tuned = accuracy(model, b_test);
  f.fine_tuned_train = accuracy(model, b_train);
  figure("fine-tuned " + std::to_string(s.fine_tune_epochs) + " epochs (lr " + lr(s.fine_tune_learning_rate) +
             "):",
         f.fine_tuned, f.fine_tuned_train);

  // For comparison: the same architecture, every layer trainable from random weights, on the same images, at
  // the head's learning rate: as many epochs as steps 2 and 3 together, then on to scratch_epochs, to show that
  // it is not short of training.
  auto scratch = classifier_on(make_base(), b_classes, false, "scratch");
  compile(scratch, s.learning_rate);
  say("For comparison, the same model from scratch, every layer trainable, on the same %lld images:\n",
      n(b_train));
  int early = s.head_epochs + s.fine_tune_epochs;
  scratch.fit(b_train.x, b_train.y, {.batch_size = 32, .epochs = early, .verbose = 0});
  f.from_scratch_early = accuracy(scratch, b_test);
  figure("trained " + std::to_string(early) + " epochs (lr " + lr(s.learning_rate) + "):",
         f.from_scratch_early, accuracy(scratch, b_train));
  scratch.fit(b_train.x, b_train.y,
              {.batch_size = 32, .epochs = s.scratch_epochs, .verbose = 0, .initial_epoch = early});
  f.from_scratch = accuracy(scratch, b_test);
  f.from_scratch_train = accuracy(scratch, b_train);
  figure("trained " + std::to_string(s.scratch_epochs) + " epochs (lr " + lr(s.learning_rate) + "):",
         f.from_scratch, f.from_scratch_train);
  return {f, pretrained, base, loaded, model, scratch};
}

}  // namespace fine_tune
