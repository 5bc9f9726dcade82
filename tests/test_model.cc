// Models: graph building and layer order, summary() tables, fit/evaluate/predict behaviour (History,
// validation, shuffling, repeatability), optimizer update formulas, console output format, and errors for bad
// input.
#include <systolic/systolic.h>

#include <regex>

#include "model/progbar.h"
#include "test_util.h"

using namespace systolic;

namespace {

// A small learnable problem: class = which quadrant of the 4x4 image holds the bright blob.
std::pair<Tensor, Tensor> quadrants(std::int64_t n, std::uint64_t seed) {
  Generator g(seed);
  Tensor x({n, 4, 4, 1}, DType::uint8), y({n}, DType::uint8);
  for (std::int64_t i = 0; i < n; ++i) {
    int q = int(g.next_u32() % 4);
    y.data<std::uint8_t>()[i] = std::uint8_t(q);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) {
        bool in = (r / 2) * 2 + (c / 2) == q;
        x.data<std::uint8_t>()[(i * 4 + r) * 4 + c] =
            std::uint8_t(in ? 150 + g.next_u32() % 100 : g.next_u32() % 100);
      }
  }
  return {x, y};
}

Model small_model() {
  auto in = layers::Input({4, 4, 1});
  auto h = layers::Rescaling(1.0 / 255)(in);
  h = layers::Conv2D(4, {2, 2}, {.activation = "relu"})(h);
  h = layers::Flatten()(h);
  auto out = layers::Dense(4, {.activation = "softmax"})(h);
  Model m(in, out);
  m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
  return m;
}

}  // namespace

TEST(Summary, SeedCnnMatchesKeras) {
  clear_session();
  auto model = models::seed_cnn();
  EXPECT_EQ(model.count_params(), 1676982);
  std::string s = model.summary_string();
  EXPECT_NE(s.find("Model: \"model\""), std::string::npos);
  EXPECT_NE(s.find("Input (InputLayer)           [(None, 32, 32, 3)]       0"), std::string::npos) << s;
  EXPECT_NE(s.find("batch_normalization (BatchNo (None, 32, 32, 3)         12"), std::string::npos) << s;
  EXPECT_NE(s.find("conv2d_3 (Conv2D)            (None, 14, 14, 64)        36928"), std::string::npos) << s;
  EXPECT_NE(s.find("dense (Dense)                (None, 512)               1606144"), std::string::npos) << s;
  EXPECT_NE(s.find("Total params: 1,676,982\nTrainable params: 1,676,912\nNon-trainable params: 70\n"),
            std::string::npos)
      << s;
  // Every table line is 65 columns wide.
  std::istringstream lines(s);
  std::string line;
  std::getline(lines, line);  // Model: "model"
  while (std::getline(lines, line)) {
    bool totals =
        line.rfind("Total", 0) == 0 || line.rfind("Trainable", 0) == 0 || line.rfind("Non-trainable", 0) == 0;
    if (!totals) {
      EXPECT_EQ(line.size(), 65u) << line;
    }
  }
  clear_session();
}

TEST(Summary, BranchingGraphShowsConnections) {
  clear_session();
  auto in = layers::Input({8, 8, 3});
  auto a = layers::Conv2D(4, {3, 3}, {.padding = "same"})(in);
  auto b = layers::Conv2D(4, {1, 1})(in);
  auto out = layers::Add()({a, b});
  Model m(in, out);
  std::string s = m.summary_string();
  EXPECT_NE(s.find("Connected to"), std::string::npos);
  EXPECT_NE(s.find("input_1[0][0]"), std::string::npos) << s;
  EXPECT_NE(s.find("conv2d_1[0][0]"), std::string::npos) << s;
  EXPECT_NE(s.find(std::string(98, '=')), std::string::npos);
  clear_session();
}

TEST(Sequential, LayersExcludeInputAndTrain) {
  clear_session();
  Sequential m({layers::Input({4, 4, 1}), layers::Rescaling(1.0 / 255), layers::Flatten(),
                layers::Dense(8, {.activation = "relu"})});
  m.add(layers::Dense(4, {.activation = "softmax"}));
  EXPECT_EQ(m.name(), "sequential");
  ASSERT_EQ(m.layers().size(), 4u);
  EXPECT_EQ(m.layers()[0]->name(), "rescaling");
  EXPECT_EQ(m.count_params(), 16 * 8 + 8 + 8 * 4 + 4);
  EXPECT_EQ(m.summary_string().find("InputLayer"), std::string::npos);
  m.compile("adam", "sparse_categorical_crossentropy", {"accuracy"});
  auto [x, y] = quadrants(512, 1);
  auto h = m.fit(x, y, {.batch_size = 32, .epochs = 15, .verbose = 0});
  EXPECT_GT(h["accuracy"].back(), 0.9);
  EXPECT_THROW(Sequential({layers::Dense(2)}), Error);  // no Input first
  clear_session();
}

TEST(Fit, HistoryValidationSplitAndLearning) {
  set_random_seed(3);
  auto [x, y] = quadrants(600, 2);
  Model m = small_model();
  auto h = m.fit(x, y, {.batch_size = 50, .epochs = 8, .verbose = 0, .validation_split = 0.25});
  EXPECT_EQ(h.keys, (std::vector<std::string>{"loss", "accuracy", "val_loss", "val_accuracy"}));
  EXPECT_EQ(h.epoch, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_LT(h["loss"].back(), h["loss"].front());
  EXPECT_GT(h["val_accuracy"].back(), 0.9);
  // Keras's validation set is the last 25%, untouched by training: evaluate on it gives the same numbers.
  auto ev = m.evaluate(x.slice(450, 600), y.slice(450, 600), {.batch_size = 50, .verbose = 0});
  EXPECT_NEAR(ev[0], h["val_loss"].back(), 1e-6);
  EXPECT_NEAR(ev[1], h["val_accuracy"].back(), 1e-9);
  // validation_data and initial_epoch
  auto h2 = m.fit(x, y,
                  {.epochs = 3,
                   .verbose = 0,
                   .validation_data = ValidationData{x.slice(0, 100), y.slice(0, 100)},
                   .initial_epoch = 1});
  EXPECT_EQ(h2.epoch, (std::vector<int>{1, 2}));
  EXPECT_EQ(h2["val_loss"].size(), 2u);
}

TEST(Fit, EpochLossIsTheSampleWeightedMeanOfBatches) {
  // With lr 0 the weights stay, so the epoch loss must equal evaluate's loss in training mode... which for
  // this model (no BN, no dropout) is evaluate's loss. 10 samples, batch 4: batches of 4, 4, 2.
  auto [x, y] = quadrants(10, 4);
  Model m = small_model();
  m.compile(optimizers::SGD(0.0), "sparse_categorical_crossentropy", {"accuracy"});
  auto h = m.fit(x, y, {.batch_size = 4, .epochs = 1, .verbose = 0});
  auto ev = m.evaluate(x, y, {.batch_size = 10, .verbose = 0});
  EXPECT_NEAR(h["loss"][0], ev[0], 1e-6);
  EXPECT_NEAR(h["accuracy"][0], ev[1], 1e-12);
}

TEST(Fit, RepeatableForASeed) {
  auto [x, y] = quadrants(200, 5);
  auto train = [&]() {
    clear_session();
    set_random_seed(11);
    Model m = small_model();
    m.fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0});
    return m.trainable_parameters().to_doubles();
  };
  EXPECT_EQ(train(), train());
}

TEST(Predict, ShapesAndAgreementWithEvaluate) {
  auto [x, y] = quadrants(37, 6);
  Model m = small_model();
  Tensor p = m.predict(x, {.batch_size = 8});
  EXPECT_EQ(p.shape(), Shape({37, 4}));
  auto pv = p.to_doubles();
  double loss = 0, correct = 0;
  for (int i = 0; i < 37; ++i) {
    double rowsum = 0;
    int best = 0;
    for (int c = 0; c < 4; ++c) {
      rowsum += pv[i * 4 + c];
      if (pv[i * 4 + c] > pv[i * 4 + best]) best = c;
    }
    EXPECT_NEAR(rowsum, 1.0, 1e-5);
    int label = y.data<std::uint8_t>()[i];
    loss -= std::log(pv[i * 4 + label]);
    correct += best == label;
  }
  auto ev = m.evaluate(x, y, {.batch_size = 5, .verbose = 0});
  EXPECT_NEAR(ev[0], loss / 37, 1e-5);
  EXPECT_NEAR(ev[1], correct / 37, 1e-12);
}

TEST(Losses, CategoricalAndMseTrain) {
  auto [x, y] = quadrants(400, 7);
  Tensor onehot = Tensor::zeros({400, 4});
  for (int i = 0; i < 400; ++i) onehot.data<float>()[i * 4 + y.data<std::uint8_t>()[i]] = 1;
  for (const char* loss : {"categorical_crossentropy", "mse"}) {
    Model m = small_model();
    m.compile(optimizers::Adam(0.01), loss, {"categorical_accuracy"});
    auto h = m.fit(x, onehot, {.batch_size = 20, .epochs = 10, .verbose = 0});
    EXPECT_GT(h["categorical_accuracy"].back(), 0.85) << loss;
  }
  // Probabilities path (no softmax at the end): logits through a from_logits loss.
  auto in = layers::Input({4, 4, 1});
  auto out = layers::Dense(4)(layers::Flatten()(layers::Rescaling(1.0 / 255)(in)));
  Model m(in, out);
  m.compile(optimizers::Adam(0.01), losses::SparseCategoricalCrossentropy({.from_logits = true}),
            {"accuracy"});
  EXPECT_GT(m.fit(x, y, {.batch_size = 20, .epochs = 10, .verbose = 0})["accuracy"].back(), 0.85);
}

TEST(Optimizers, UpdateFormulas) {
  // One weight w = 1 with gradient g = 0.5 (model-free: the optimizer on flat buffers).
  Tensor w = Tensor::full({1}, 1.0), g = Tensor::full({1}, 0.5);
  optimizers::Adam adam(0.1);
  adam.apply(w, g);  // t=1: a = 0.1*sqrt(1-0.999)/(1-0.9); m = 0.05; v = 0.00025; w -= a*m/(sqrt(v)+1e-7)
  double a = 0.1 * std::sqrt(1 - 0.999) / (1 - 0.9), m = 0.05, v = 0.00025;
  EXPECT_NEAR(w.item(), 1 - a * m / (std::sqrt(v) + 1e-7), 1e-6);
  EXPECT_EQ(adam.iterations(), 1);

  Tensor w2 = Tensor::full({1}, 1.0);
  optimizers::SGD sgd(0.1, 0.9);
  sgd.apply(w2, g);  // v = -0.05; w = 0.95
  sgd.apply(w2, g);  // v = 0.9*-0.05 - 0.05 = -0.095; w = 0.855
  EXPECT_NEAR(w2.item(), 0.855, 1e-6);
  Tensor w3 = Tensor::full({1}, 1.0);
  optimizers::SGD nesterov(0.1, 0.9, true);
  nesterov.apply(w3, g);  // v = -0.05; w += 0.9*-0.05 - 0.05 = -0.095
  EXPECT_NEAR(w3.item(), 0.905, 1e-6);

  Tensor w4 = Tensor::full({1}, 1.0);
  optimizers::RMSprop rms(0.01);
  rms.apply(w4, g);  // ms = 0.1*0.25 = 0.025; w -= 0.01*0.5/sqrt(0.025+1e-7)
  EXPECT_NEAR(w4.item(), 1 - 0.01 * 0.5 / std::sqrt(0.025 + 1e-7), 1e-6);
  EXPECT_THROW(optimizers::get("yogi"), Error);  // TensorFlow Addons', not Keras's
}

TEST(Optimizers, OneStepCounterOwnsTheHostCountAndItsDeviceCopy) {
  optimizers::StepCounter c;
  Tensor t = c.on(Device::cpu());  // made on first use, with the count
  EXPECT_EQ(t.item(), 0);
  c.advance();
  c.set(41);
  c.advance();
  EXPECT_EQ(c.value(), 42);
  EXPECT_EQ(t.item(), 42);  // written in place: a recorded step reads its address
  EXPECT_TRUE(c.on(Device::cpu()).shares_storage_with(t));
  optimizers::StepCounter copy = c;  // a cloned optimizer's: the count, not the device tensor
  EXPECT_EQ(copy.value(), 42);
  EXPECT_FALSE(copy.on(Device::cpu()).shares_storage_with(t));
  copy.advance();
  EXPECT_EQ(t.item(), 42);

  // The optimizer's iterations are that counter; apply() counts, apply_update() leaves it to the caller.
  optimizers::Adam adam(0.1);
  adam.set_iterations(5);
  EXPECT_EQ(adam.iterations_counter().on(Device::cpu()).item(), 5);
  Tensor w = Tensor::full({1}, 1.0), g = Tensor::full({1}, 0.5);
  adam.apply(w, g);
  EXPECT_EQ(adam.iterations(), 6);
  EXPECT_EQ(adam.iterations_counter().on(Device::cpu()).item(), 6);
  adam.apply_update(w, g);
  EXPECT_EQ(adam.iterations(), 6);

  // A model's fit advances it once per step, whichever way the batches come.
  for (auto batches : {FitOptions::Batches::host_pipeline, FitOptions::Batches::on_device}) {
    Model m = small_model();
    auto [x, y] = quadrants(50, 3);
    FitOptions o{.batch_size = 16, .epochs = 2, .verbose = 0};
    o.batches = batches;
    m.fit(x, y, o);
    EXPECT_EQ(m.optimizer().iterations(), 8);
    EXPECT_EQ(m.optimizer().iterations_counter().on(Device::cpu()).item(), 8);
    m.train_on_batch(x.slice(0, 4), y.slice(0, 4));
    EXPECT_EQ(m.optimizer().iterations(), 9);
  }
}

TEST(Optimizers, TheLearningRateLivesOnTheDevice) {
  // What a recorded step reads is the loaded rate on the device, never the host's rate: a rate set (or a
  // schedule's next value) reaches the update only through load_learning_rate, written in place between steps.
  optimizers::SGD sgd(0.5);
  Tensor rate = sgd.learning_rate_on(Device::cpu());  // made on first use, with the rate
  EXPECT_EQ(rate.item(), 0.5);
  Tensor w = Tensor::full({1}, 1.0), g = Tensor::full({1}, 1.0);
  sgd.set_learning_rate(0.25);
  sgd.apply_update(w, g);  // the recorded part: reads the loaded 0.5
  EXPECT_DOUBLE_EQ(w.item(), 0.5);
  sgd.load_learning_rate();  // what the train function does before every step
  EXPECT_EQ(rate.item(), 0.25);
  EXPECT_TRUE(sgd.learning_rate_on(Device::cpu()).shares_storage_with(rate));  // in place
  sgd.apply_update(w, g);
  EXPECT_DOUBLE_EQ(w.item(), 0.25);
  // A schedule: the rate of the step about to run (at iterations()), loaded step by step by apply().
  auto schedule = optimizers::schedules::ExponentialDecay(0.5, 1, 0.5);
  sgd.set_learning_rate_schedule(schedule);
  sgd.set_iterations(2);
  Tensor w2 = Tensor::full({1}, 1.0);
  sgd.apply(w2, g);  // rate 0.125 at step 2
  sgd.apply(w2, g);  // 0.0625 at step 3
  EXPECT_DOUBLE_EQ(w2.item(), 1.0 - 0.125 - 0.0625);
  EXPECT_EQ(rate.item(), 0.0625);
  // A rate that is not a number is refused before it reaches the device.
  optimizers::SGD bad(0.1);
  bad.set_learning_rate(NAN);
  std::string e = systolic::testing::error_of([&] { bad.load_learning_rate(); });
  EXPECT_NE(e.find("the learning rate is nan"), std::string::npos) << e;
  // A cloned optimizer (a replica's) has the rate, not the device tensor.
  auto copy = sgd.clone();
  EXPECT_FALSE(copy->learning_rate_on(Device::cpu()).shares_storage_with(rate));
  optimizers::DeviceScalar a(3.0);
  Tensor at = a.on(Device::cpu());
  optimizers::DeviceScalar b = a;
  b.set(4.0);
  EXPECT_EQ(at.item(), 3.0);
  EXPECT_EQ(b.value(), 4.0);
}

TEST(Errors, BadInputIsAClearError) {
  Model m = small_model();
  auto [x, y] = quadrants(10, 8);
  auto expect_error = [](auto&& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error([&] { m.fit(Tensor::zeros({10, 4, 4}), y); }, "shape");
  expect_error([&] { m.fit(x, y.slice(0, 9)); }, "labels");
  Tensor bad = y.clone();
  bad.data<std::uint8_t>()[3] = 9;
  expect_error([&] { m.fit(x, bad, {.verbose = 0}); }, "out of range");
  expect_error([&] { m.fit(x, y, {.batch_size = 0}); }, "batch_size");
  expect_error([&] { m.fit(x, y, {.validation_split = 1.5}); }, "validation_split");
  expect_error([&] { m.compile("adam", "dice"); }, "dice");
  expect_error([&] { m.compile("adam", "sparse_categorical_crossentropy", {"auc"}); }, "auc");
  expect_error([&] { m.compile("adam", "sparse_categorical_crossentropy", {"categorical_accuracy"}); },
               "labels");
  auto in = layers::Input({3});
  Model uncompiled(in, layers::Dense(2)(in));
  expect_error([&] { uncompiled.fit(Tensor::zeros({2, 3}), Tensor::zeros({2})); }, "compile");
  auto other = layers::Input({3});
  expect_error([&] { Model(in, layers::Dense(2)(other)); }, "disconnected");
}

TEST(Progbar, KerasFormats) {
  EXPECT_EQ(format_log_value(0.45123), "0.4512");
  EXPECT_EQ(format_log_value(0.0005), "5.0000e-04");
  Progbar two(469, 2);
  EXPECT_EQ(two.final_line({{"loss", 0.4512}, {"accuracy", 0.8377}}, 81.2),
            "469/469 - 81s - loss: 0.4512 - accuracy: 0.8377");
  Progbar one(469, 1);
  EXPECT_EQ(one.final_line({{"loss", 0.4512}}, 6.0),
            "469/469 [==============================] - 6s 13ms/step - loss: 0.4512");
}
