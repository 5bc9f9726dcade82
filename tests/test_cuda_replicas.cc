// GPU replicas (label gpu): the NCCL all-reduce on one GPU, and a MirroredStrategy over every GPU against one
// replica. Skipped visibly without a GPU (SYSTOLIC_REQUIRE_GPU), without NCCL, or with fewer than 2 GPUs.
#include <systolic/systolic.h>

#include "distribute/communicator.h"
#include "gpu_test_util.h"
#include "replica_test_model.h"

using namespace systolic;
using namespace systolic::testing;

TEST(CudaReplicas, NcclAllReduceOnOneGpuKeepsTheValues) {
  SYSTOLIC_REQUIRE_GPU();
  if (!distribute::nccl_compiled()) GTEST_SKIP() << "GPU test not run: this CUDA build has no NCCL";
  auto comm = distribute::make_nccl_communicator({0}, 30);
  Tensor host = random_tensor({1000}, 4);
  Tensor t = on_gpu(host);
  comm->all_reduce_sum(t, 0);
  EXPECT_EQ(t.to(Device::cpu()).to_doubles(), host.to_doubles());  // one replica: the sum is the value itself
  std::vector<double> v{1.5, -2.0};
  comm->all_reduce_sum(v, 0);
  EXPECT_EQ(v, (std::vector<double>{1.5, -2.0}));
}

TEST(CudaReplicas, EveryGpuAsReplicasMatchesOneReplica) {
  SYSTOLIC_REQUIRE_GPU();
  if (!distribute::nccl_compiled()) GTEST_SKIP() << "GPU test not run: this CUDA build has no NCCL";
  int gpus = static_cast<int>(gpu_info().size());
  if (gpus < 2) GTEST_SKIP() << "GPU test not run: a replica set needs 2 GPUs, this machine has " << gpus;
  auto d = replica_test_data(96);
  Model cpu = replica_test_model(false);
  Model one = to_accelerator(cpu, distribute::OneDeviceStrategy(Device::cuda(0)));
  Model many = to_accelerator(cpu, distribute::MirroredStrategy());
  std::int64_t batch = 16 * gpus;
  one.fit(d.x, d.y, {.batch_size = batch, .epochs = 2, .verbose = 0});
  many.fit(d.x, d.y, {.batch_size = batch, .epochs = 2, .verbose = 0});
  auto a = all_weights(many), b = all_weights(one);
  // TF32 matrix math on the GPUs: a looser tolerance than the CPU tests.
  EXPECT_LT(relative_l2_error(a, b), 1e-3);
}
