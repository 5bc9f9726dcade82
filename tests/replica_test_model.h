// The small model and data set the replica tests train, shared by the in-process tests (test_replicas.cc,
// test_mpi_replicas.cc) and the program they start under mpirun (mpi_replica_program.cc), so both sides build
// the same model from the same seed.
#pragma once

#include <systolic/systolic.h>

#include <memory>
#include <string>
#include <vector>

namespace systolic::testing {

// Conv -> [BatchNorm] -> ReLU -> MaxPool -> Dense softmax on 8x8x1 images, 5 classes; no dropout (its masks
// would differ between one replica and several). SGD with momentum: its update is linear in the gradient, so
// the float rounding of summing shards in another order stays at the rounding level.
inline Model replica_test_model(bool batch_norm, std::uint64_t seed = 5) {
  set_random_seed(seed);
  clear_session();
  auto in = layers::Input({8, 8, 1});
  auto x = layers::Rescaling(1.0 / 255)(in);
  x = layers::Conv2D(4, {3, 3}, {.padding = "same"})(x);
  if (batch_norm) x = layers::BatchNormalization()(x);
  x = layers::Activation("relu")(x);
  x = layers::MaxPooling2D({2, 2})(x);
  x = layers::Flatten()(x);
  auto out = layers::Dense(5, {.activation = "softmax"})(x);
  Model m(in, out);
  m.compile(optimizers::SGD(0.05, 0.9), "sparse_categorical_crossentropy", {"accuracy"});
  return m;
}

struct ReplicaTestData {
  Tensor x, y;
};

inline ReplicaTestData replica_test_data(std::int64_t n, std::uint64_t seed = 3) {
  Generator g(seed);
  ReplicaTestData d{Tensor({n, 8, 8, 1}, DType::uint8), Tensor({n}, DType::uint8)};
  for (std::int64_t i = 0; i < d.x.numel(); ++i)
    d.x.data<std::uint8_t>()[i] = std::uint8_t(g.next_u32() & 255);
  for (std::int64_t i = 0; i < n; ++i) d.y.data<std::uint8_t>()[i] = std::uint8_t(g.next_u32() % 5);
  return d;
}

// Every weight of the model (trainable and not), in layer order.
inline std::vector<double> all_weights(Model& m) {
  std::vector<double> out;
  for (auto& l : m.layers())
    for (auto& w : l->weights()) {
      auto v = w.value.to_doubles();
      out.insert(out.end(), v.begin(), v.end());
    }
  return out;
}

// What the processes of a fit with callbacks decided and computed (fit_with_callbacks).
struct CallbackRun {
  std::vector<std::string> decisions;  // per epoch the learning rate used, whether training stops, the saves
  std::vector<double> values;          // the epochs' logs, then every weight after training
};

// Trains `m` (replica_test_model, on replica_test_data(96), 20% validation) for up to 5 epochs with every kind
// of callback, writing under `dir`: the deciding ones (EarlyStopping on a loss that never improves by 10,
// restoring the first epoch's weights when it stops after the second; ReduceLROnPlateau halving the rate after
// every epoch after the first; ModelCheckpoint saving the best val_loss, and every 2 batches) and the writing
// ones (CSVLogger, TensorBoard, BackupAndRestore keeping its backup). Under replicas and MPI every process makes
// the same calls; tests/test_mpi_replicas.cc and tests/test_callbacks.cc compare what they decided.
inline CallbackRun fit_with_callbacks(Model& m, const std::string& dir) {
  namespace cb = callbacks;
  auto d = replica_test_data(96);
  auto early = std::make_shared<cb::EarlyStopping>(cb::EarlyStoppingOptions{
      .monitor = "loss", .min_delta = 10.0, .patience = 2, .restore_best_weights = true});
  auto reduce = std::make_shared<cb::ReduceLROnPlateau>(
      cb::ReduceLROnPlateauOptions{.monitor = "val_loss", .factor = 0.5, .patience = 0, .min_delta = 10.0});
  auto best = std::make_shared<cb::ModelCheckpoint>(
      dir + "/best-{epoch:02d}.weights.h5",
      cb::ModelCheckpointOptions{.save_best_only = true, .save_weights_only = true});
  auto every = std::make_shared<cb::ModelCheckpoint>(dir + "/ckpt/{epoch:02d}-{batch:02d}.keras",
                                                     cb::ModelCheckpointOptions{.save_freq = 2});
  CallbackRun run;
  auto record = std::make_shared<cb::LambdaCallback>();
  record->on_epoch_end_fn = [&](int epoch, cb::Logs& logs) {
    // After the deciding callbacks: the rate this epoch used (logged by ReduceLROnPlateau) and the stop flag.
    run.decisions.push_back("epoch " + std::to_string(epoch) + " learning_rate " +
                            std::to_string(logs["learning_rate"]) + " stop " +
                            std::to_string(m.stop_training()));
    for (auto& [k, v] : logs.items()) run.values.push_back(v);
  };
  std::vector<std::shared_ptr<cb::Callback>> callbacks{
      early,
      reduce,
      best,
      every,
      std::make_shared<cb::CSVLogger>(dir + "/log.csv"),
      std::make_shared<cb::TensorBoard>(dir + "/tb"),
      std::make_shared<cb::BackupAndRestore>(dir + "/backup",
                                             cb::BackupAndRestoreOptions{.delete_checkpoint = false}),
      record};
  m.fit(d.x, d.y,
        {.batch_size = 32, .epochs = 5, .verbose = 0, .validation_split = 0.2, .callbacks = callbacks});
  run.decisions.push_back("stopped_epoch " + std::to_string(early->stopped_epoch()) + " best_epoch " +
                          std::to_string(early->best_epoch()));
  for (auto& p : best->saved()) run.decisions.push_back("best " + p.substr(dir.size()));
  for (auto& p : every->saved()) run.decisions.push_back("every " + p.substr(dir.size()));
  auto weights = all_weights(m);
  run.values.insert(run.values.end(), weights.begin(), weights.end());
  return run;
}

}  // namespace systolic::testing
