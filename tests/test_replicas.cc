// Data-parallel CPU replicas in one process (MirroredStrategy::cpu): N replicas with a global batch B train
// to the weights one replica reaches with B (batch norm absent or synchronised), per-replica batch norm
// differs only in what it should, evaluation counts every sample once, and the errors and the timeout say
// what is wrong.
#include <systolic/systolic.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "distribute/communicator.h"
#include "layers/config.h"
#include "replica_test_model.h"
#include "test_util.h"

using namespace systolic;
using namespace systolic::testing;

namespace {

struct TrainingResult {
  std::vector<double> weights, losses, scores;
};

// k epochs of the test model on `n` samples with global batch `batch`, on one replica or `replicas` CPU
// replicas. distinct_halves: unshuffled, with the first half of the samples 4 times darker, so that two
// replicas' shards of a batch have clearly different statistics.
TrainingResult train(int replicas, bool batch_norm, bool sync_batch_norm, std::int64_t n = 96,
                     std::int64_t batch = 32, int epochs = 2, bool distinct_halves = false) {
  Model cpu = replica_test_model(batch_norm);
  auto d = replica_test_data(n);
  if (distinct_halves)
    for (std::int64_t i = 0; i < d.x.numel() / 2; ++i) d.x.data<std::uint8_t>()[i] /= 4;
  Model m = replicas == 1 ? cpu
                          : to_accelerator(cpu, distribute::MirroredStrategy::cpu(
                                                    replicas, {.sync_batch_norm = sync_batch_norm}));
  // Shuffled: fit draws the same order from the same seed on one replica or several.
  History h =
      m.fit(d.x, d.y, {.batch_size = batch, .epochs = epochs, .verbose = 0, .shuffle = !distinct_halves});
  TrainingResult r;
  r.weights = all_weights(m);
  r.losses = h["loss"];
  r.scores = m.evaluate(d.x, d.y, {.batch_size = batch, .verbose = 0});
  return r;
}

}  // namespace

TEST(Replicas, TwoCpuReplicasMatchOneReplicaWithoutBatchNorm) {
  TrainingResult one = train(1, false, false), two = train(2, false, false);
  ASSERT_EQ(one.weights.size(), two.weights.size());
  // 2 epochs of 3 steps: only the order of float sums differs (two shard gradients summed vs one batch).
  EXPECT_LT(normalised_max_error(Tensor::from_vector(two.weights, {std::int64_t(two.weights.size())}),
                                 Tensor::from_vector(one.weights, {std::int64_t(one.weights.size())})),
            1e-5);
  Model initial = replica_test_model(false);
  EXPECT_NE(one.weights, all_weights(initial));  // it trained
  for (std::size_t e = 0; e < one.losses.size(); ++e) EXPECT_NEAR(two.losses[e], one.losses[e], 1e-5);
  EXPECT_NEAR(two.scores[0], one.scores[0], 1e-5);
  EXPECT_DOUBLE_EQ(two.scores[1], one.scores[1]);
}

TEST(Replicas, PartialLastBatchIsSplitToo) {
  // 100 samples in batches of 32: a last batch of 4, 2 per replica.
  TrainingResult one = train(1, false, false, 100), two = train(2, false, false, 100);
  EXPECT_LT(relative_l2_error(two.weights, one.weights), 1e-5);
}

TEST(Replicas, SynchronisedBatchNormMatchesOneReplica) {
  TrainingResult one = train(1, true, false), two = train(2, true, true);
  // Every weight, the moving statistics included: the replicas normalised with the global batch's statistics.
  EXPECT_LT(normalised_max_error(Tensor::from_vector(two.weights, {std::int64_t(two.weights.size())}),
                                 Tensor::from_vector(one.weights, {std::int64_t(one.weights.size())})),
            1e-5);
  for (std::size_t e = 0; e < one.losses.size(); ++e) EXPECT_NEAR(two.losses[e], one.losses[e], 1e-5);
}

TEST(Replicas, PerReplicaBatchNormDiffersOnlyWhereItShould) {
  // One step of 32 (16 per replica). Each replica normalises its shard with the shard's statistics, so the
  // gradients, and the weights, differ from one replica's. The moving means are averaged over replicas at the
  // end of the epoch: the mean of the shard means is the batch mean, so after one step they equal one
  // replica's. The moving variances do not (the mean of shard variances misses the spread of the shard
  // means).
  // Shards of distinct statistics: a shuffle could make them alike by chance (then the moving variances
  // differ by less than their float32 rounding).
  TrainingResult one = train(1, true, false, 32, 32, 1, true), two = train(2, true, false, 32, 32, 1, true);
  Model shape = replica_test_model(true);
  std::size_t at = 0, mean_at = 0, var_at = 0, trainable_differ = 0, n_mean = 0;
  for (auto& l : shape.layers())
    for (auto& w : l->weights()) {
      if (w.name.find("moving_mean") != std::string::npos)
        mean_at = at, n_mean = std::size_t(w.value.numel());
      if (w.name.find("moving_variance") != std::string::npos) var_at = at;
      if (w.trainable)
        for (std::int64_t i = 0; i < w.value.numel(); ++i)
          trainable_differ += std::abs(two.weights[at + i] - one.weights[at + i]) > 1e-6;
      at += std::size_t(w.value.numel());
    }
  ASSERT_GT(n_mean, 0u);
  EXPECT_GT(trainable_differ, 0u);
  bool variance_differs = false;
  for (std::size_t i = 0; i < n_mean; ++i) {
    EXPECT_NEAR(two.weights[mean_at + i], one.weights[mean_at + i], 1e-6) << "moving_mean[" << i << "]";
    variance_differs = variance_differs || std::abs(two.weights[var_at + i] - one.weights[var_at + i]) > 1e-7;
    EXPECT_LE(two.weights[var_at + i], one.weights[var_at + i] + 1e-6) << "moving_variance[" << i << "]";
  }
  EXPECT_TRUE(variance_differs);
  for (double l : two.losses) EXPECT_TRUE(std::isfinite(l));
}

TEST(Replicas, BatchThatReplicasDoNotDivideIsAnError) {
  Model m = to_accelerator(replica_test_model(false), distribute::MirroredStrategy::cpu(2));
  auto d = replica_test_data(40);
  std::string e = error_of([&] { m.fit(d.x, d.y, {.batch_size = 33, .verbose = 0}); });
  EXPECT_NE(e.find("batch_size 33"), std::string::npos) << e;
  EXPECT_NE(e.find("2 replicas"), std::string::npos) << e;
}

// Keras's BatchNormalization(synchronized=True), read from a config and written back: under replicas it needs the
// strategy's synchronised batch norm (which it then trains with); without that, fit refuses naming the layer.
TEST(Replicas, SynchronizedBatchNormLayerNeedsSynchronisedReplicas) {
  auto make = [] {
    set_random_seed(5);
    clear_session();
    auto in = layers::Input({8, 8, 1});
    auto x = layers::Rescaling(1.0 / 255)(in);
    x = layers::Conv2D(4, {3, 3}, {.padding = "same"})(x);
    x = LayerRef(layers::layer_from_config("BatchNormalization", {{"name", "bn"}, {"synchronized", true}}))(
        x);
    x = layers::Flatten()(x);
    Model m(in, layers::Dense(5, {.activation = "softmax"})(x));
    m.compile(optimizers::SGD(0.05, 0.9), "sparse_categorical_crossentropy");
    return m;
  };
  auto d = replica_test_data(32);
  auto config = nlohmann::json::parse(make().to_json());
  EXPECT_EQ(config["config"]["layers"][3]["config"]["synchronized"], true);
  make().fit(d.x, d.y, {.batch_size = 16, .verbose = 0});  // one device: plain batch norm, as in Keras
  Model plain = to_accelerator(make(), distribute::MirroredStrategy::cpu(2));
  std::string e = error_of([&] { plain.fit(d.x, d.y, {.batch_size = 16, .verbose = 0}); });
  EXPECT_NE(e.find("layer 'bn' has synchronized=True"), std::string::npos) << e;
  Model synced = to_accelerator(make(), distribute::MirroredStrategy::cpu(2, {.sync_batch_norm = true}));
  EXPECT_NO_THROW(synced.fit(d.x, d.y, {.batch_size = 16, .verbose = 0}));
}

TEST(Replicas, EvaluateAndPredictCountEverySampleOnce) {
  // 37 samples: replicas take 18 and 19, in batches of 4 (8 / 2), the last ones partial.
  Model cpu = replica_test_model(false);
  auto d = replica_test_data(37, 9);
  Model two = to_accelerator(cpu, distribute::MirroredStrategy::cpu(2));
  auto s1 = cpu.evaluate(d.x, d.y, {.batch_size = 8, .verbose = 0});
  auto s2 = two.evaluate(d.x, d.y, {.batch_size = 8, .verbose = 0});
  EXPECT_NEAR(s2[0], s1[0], 1e-6);
  EXPECT_DOUBLE_EQ(s2[1], s1[1]);
  // The accuracy is a count over 37: a sample dropped or counted twice would move it off a multiple of 1/37.
  double count = s2[1] * 37;
  EXPECT_NEAR(count, std::round(count), 1e-9);
  Tensor p1 = cpu.predict(d.x, {.batch_size = 8}), p2 = two.predict(d.x, {.batch_size = 8});
  EXPECT_EQ(p2.shape(), p1.shape());
  EXPECT_LT(normalised_max_error(p2, p1), 1e-6);
  // 3 replicas, more replicas than some batches have rows.
  Model three = to_accelerator(cpu, distribute::MirroredStrategy::cpu(3));
  auto s3 = three.evaluate(d.x, d.y, {.batch_size = 3, .verbose = 0});
  EXPECT_NEAR(s3[0], s1[0], 1e-6);
  EXPECT_DOUBLE_EQ(s3[1], s1[1]);
}

TEST(Replicas, LogsTheReplicasAndWorkers) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  std::FILE* before = log_stream();
  set_log_stream(f);
  Model m = to_accelerator(replica_test_model(false), distribute::MirroredStrategy::cpu(2));
  set_log_stream(before);
  std::rewind(f);
  std::string text;
  for (int c; (c = std::fgetc(f)) != EOF;) text += char(c);
  std::fclose(f);
  EXPECT_NE(text.find("Found 2 replicas: cpu, cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("Num workers: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("OpenMP threads per replica"), std::string::npos) << text;
}

TEST(Replicas, ModelWithReplicasRefusesToMoveOrRecompile) {
  Model m = to_accelerator(replica_test_model(false), distribute::MirroredStrategy::cpu(2));
  EXPECT_NE(
      error_of([&] { m.compile("adam", "sparse_categorical_crossentropy"); }).find("compile the CPU model"),
      std::string::npos);
  EXPECT_NE(error_of([&] { m.to(Device::cuda(0)); }).find("replicas"), std::string::npos);
}

TEST(Replicas, SavedWeightsAreTheTrainedOnes) {
  TempDir dir;
  Model cpu = replica_test_model(false);
  auto d = replica_test_data(64);
  Model two = to_accelerator(cpu, distribute::MirroredStrategy::cpu(2));
  two.fit(d.x, d.y, {.batch_size = 32, .verbose = 0});
  two.save_weights(dir.file("w.weights.h5"));
  Model back = replica_test_model(false, 99);
  back.load_weights(dir.file("w.weights.h5"));
  EXPECT_EQ(all_weights(back), all_weights(two));
  // load_weights on the replicated model reaches every replica: predictions (which use all of them) match.
  Model fresh = to_accelerator(replica_test_model(false, 42), distribute::MirroredStrategy::cpu(2));
  fresh.load_weights(dir.file("w.weights.h5"));
  // Within float rounding, not bit for bit: a replica predicts its half of the batch on its own threads,
  // and oneDNN's blocking (AVX2 more than AVX-512) depends on the batch and the thread count. A replica
  // that missed the weights would be off by far more.
  EXPECT_LT(normalised_max_error(fresh.predict(d.x), back.predict(d.x)), 1e-6);
}

TEST(ReplicaTimeout, AReplicaThatNeverArrivesEndsTheAllReduceWithAnError) {
  auto comm = distribute::make_thread_communicator(2, 0.5);
  std::vector<double> v{1.0, 2.0};
  auto t0 = std::chrono::steady_clock::now();
  // Replica 1 never calls: replica 0 must not wait for ever.
  std::string e = error_of([&] { comm->all_reduce_sum(v, 0); });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("did not answer within 0.5 s"), std::string::npos) << e;
  EXPECT_NE(e.find("SYSTOLIC_REPLICA_TIMEOUT"), std::string::npos) << e;
  EXPECT_GE(waited, 0.45);
  EXPECT_LT(waited, 5.0);
  // Later collectives fail at once: the group is broken.
  EXPECT_FALSE(error_of([&] { comm->all_reduce_sum(v, 1); }).empty());
}

TEST(ReplicaTimeout, AFailedReplicaReleasesTheOthers) {
  auto comm = distribute::make_thread_communicator(2, 30);
  std::vector<double> v{1.0};
  std::thread failing([&] { comm->abort("replica 1 failed: out of memory"); });
  auto t0 = std::chrono::steady_clock::now();
  std::string e = error_of([&] { comm->all_reduce_sum(v, 0); });
  failing.join();
  EXPECT_NE(e.find("replica 1 failed: out of memory"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(ReplicaTimeout, TheEnvironmentVariableIsChecked) {
  ::setenv("SYSTOLIC_REPLICA_TIMEOUT", "soon", 1);
  std::string e = error_of([] { distribute::replica_timeout_seconds(); });
  ::setenv("SYSTOLIC_REPLICA_TIMEOUT", "2.5", 1);
  double t = distribute::replica_timeout_seconds();
  ::unsetenv("SYSTOLIC_REPLICA_TIMEOUT");
  EXPECT_NE(e.find("SYSTOLIC_REPLICA_TIMEOUT=soon"), std::string::npos) << e;
  EXPECT_EQ(t, 2.5);
  EXPECT_EQ(distribute::replica_timeout_seconds(), 60.0);
}

TEST(MpiLaunch, TheJobSizeComesFromTheLaunchersEnvironment) {
  const char* vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
  std::vector<std::optional<std::string>> saved;
  for (const char* v : vars) {
    const char* value = std::getenv(v);
    saved.push_back(value ? std::optional<std::string>(value) : std::nullopt);
    ::unsetenv(v);
  }
  EXPECT_FALSE(distribute::launched_by_mpi());
  EXPECT_EQ(distribute::launched_world_size(), 1);
  ::setenv("PMI_SIZE", "3", 1);  // MPICH/Hydra, Slurm
  EXPECT_TRUE(distribute::launched_by_mpi());
  EXPECT_EQ(distribute::launched_world_size(), 3);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);  // Open MPI's mpirun is asked first
  EXPECT_EQ(distribute::launched_world_size(), 4);
  ::setenv("OMPI_COMM_WORLD_SIZE", "many", 1);  // not a number: the next one that says
  EXPECT_EQ(distribute::launched_world_size(), 3);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("PMI_SIZE");
  ::setenv("PMIX_RANK", "0", 1);  // PMIx alone does not say
  EXPECT_TRUE(distribute::launched_by_mpi());
  EXPECT_EQ(distribute::launched_world_size(), 1);
  for (std::size_t i = 0; i < saved.size(); ++i) {
    if (saved[i])
      ::setenv(vars[i], saved[i]->c_str(), 1);
    else
      ::unsetenv(vars[i]);
  }
}

TEST(ReplicaAllReduce, SumsAreIdenticalOnEveryReplica) {
  auto comm = distribute::make_thread_communicator(3, 10);
  std::vector<Tensor> t;
  for (int r = 0; r < 3; ++r) t.push_back(random_tensor({1001}, 100 + r));
  std::vector<double> want(1001, 0.0);
  for (int r = 0; r < 3; ++r) {
    auto v = t[r].to_doubles();
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += v[i];
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) threads.emplace_back([&, r] { comm->all_reduce_sum(t[r], r); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(t[1].to_doubles(), t[0].to_doubles());
  EXPECT_EQ(t[2].to_doubles(), t[0].to_doubles());
  auto got = t[0].to_doubles();
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}
