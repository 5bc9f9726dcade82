// What the CUDA ops do beyond computing what the CPU computes (that is tests/test_ops.cc's): bad data that a
// kernel meets (a label or row index out of range) is reported by the next synchronize, never a fault; ops that
// have run once on their shapes allocate no device memory again (a training step is captured as a CUDA graph
// after one warm-up step). Skipped without a GPU (label gpu).
#include <gmock/gmock.h>
#include <systolic/ops.h>
#include <systolic/system.h>

#include "gpu_test_util.h"

#if SYSTOLIC_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

namespace systolic {
namespace {

using testing::error_of;
using testing::gpu;
using ::testing::HasSubstr;
using testing::on_gpu;
using testing::poisoned_gpu;
using testing::random_tensor;

Tensor host(const Tensor& t) {
  return t.to(Device::cpu());
}

TEST(CudaOpsRuntime, GatherRowsOutOfRangeDeviceIndexIsReportedBySynchronize) {
  SYSTOLIC_REQUIRE_GPU();
  synchronize(gpu());
  Tensor images = on_gpu(random_tensor({10, 3}, 140, DType::uint8, 0, 255));
  Tensor idx = on_gpu(Tensor::from_vector(std::vector<std::int32_t>{1, 10, -1, 2}, {4}));
  Tensor got = poisoned_gpu({4, 3});
  ops::gather_rows(images, idx, got);  // must not fault
  EXPECT_THAT(error_of([&] { synchronize(gpu()); }), HasSubstr("row index"));
  auto v = host(got).to_doubles();
  for (int j = 3; j < 9; ++j) EXPECT_EQ(v[j], 0.0) << "the rows of bad indices are zeros";
  synchronize(gpu());  // the flag was cleared
}

TEST(CudaOpsRuntime, OutOfRangeLabelIsReportedBySynchronize) {
  SYSTOLIC_REQUIRE_GPU();
  synchronize(gpu());
  Tensor logits = on_gpu(random_tensor({4, 10}, 170));
  Tensor labels = on_gpu(Tensor::from_vector(std::vector<std::int32_t>{1, 10, 3, -1}, {4}));
  Tensor total = Tensor::zeros({1}, DType::float64, gpu()), grad = poisoned_gpu({4, 10});
  ops::softmax_cross_entropy(logits, labels, Tensor(), total, grad, 1.0);
  EXPECT_THAT(error_of([&] { synchronize(gpu()); }), HasSubstr("label"));
  // The bad rows add nothing and get no gradient.
  Tensor want = Tensor::zeros({1}, DType::float64), none, hl = host(logits);
  ops::softmax_cross_entropy(hl.view(0, {1, 10}), Tensor::from_vector(std::vector<std::int32_t>{1}, {1}),
                             none, want, none, 1.0);
  ops::softmax_cross_entropy(hl.view(20, {1, 10}), Tensor::from_vector(std::vector<std::int32_t>{3}, {1}),
                             none, want, none, 1.0);
  EXPECT_NEAR(total.item(), want.item(), 1e-4 * std::abs(want.item()));
  auto g = host(grad).to_doubles();
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(g[10 + c], 0.0);
    EXPECT_EQ(g[30 + c], 0.0);
  }
  synchronize(gpu());  // cleared
  // The accuracy counts a label out of range as a miss, as Keras does (the CPU's count), and reports nothing.
  Tensor count = Tensor::zeros({1}, DType::float64, gpu()), want_count = Tensor::zeros({1}, DType::float64);
  ops::accuracy_count(logits, labels, Tensor(), count, 1);
  synchronize(gpu());
  ops::accuracy_count(hl, host(labels), Tensor(), want_count, 1);
  EXPECT_EQ(host(count).item(), want_count.item());
}

// A training step is captured as a CUDA graph after a warm-up step, so once the ops have run on their shapes
// (algorithms chosen, the workspace grown) later calls must not allocate device memory.
TEST(CudaOpsRuntime, SteadyStateCallsAllocateNothing) {
  SYSTOLIC_REQUIRE_GPU();
#if SYSTOLIC_HAS_CUDA
  auto r = [](Shape s, std::uint64_t seed) { return on_gpu(random_tensor(std::move(s), seed)); };
  ops::Conv2DParams same;
  same.pad_top = same.pad_bottom = same.pad_left = same.pad_right = 1;
  ops::Conv2DParams stride2;
  stride2.stride_h = stride2.stride_w = 2;
  stride2.pad_bottom = stride2.pad_right = 1;  // Keras 'same', stride 2, even input: padding after
  struct Conv {
    ops::Conv2DParams p;
    Tensor x, w, b, y, dy, dx, dw, db;
  };
  std::vector<Conv> convs = {
      {same, r({8, 32, 32, 3}, 1), r({3, 3, 3, 32}, 2), r({32}, 3), poisoned_gpu({8, 32, 32, 32}),
       r({8, 32, 32, 32}, 4), poisoned_gpu({8, 32, 32, 3}), poisoned_gpu({3, 3, 3, 32}), poisoned_gpu({32})},
      {stride2, r({2, 10, 10, 3}, 5), r({3, 3, 3, 32}, 6), r({32}, 7), poisoned_gpu({2, 5, 5, 32}),
       r({2, 5, 5, 32}, 8), poisoned_gpu({2, 10, 10, 3}), poisoned_gpu({3, 3, 3, 32}), poisoned_gpu({32})},
  };
  ops::Pool2DParams avg;  // average, asymmetric: the explicit-padding path
  avg.kind = ops::PoolKind::average;
  avg.pad_bottom = avg.pad_right = 1;
  Tensor px = r({2, 15, 15, 8}, 10), py = poisoned_gpu({2, 8, 8, 8}), pdy = r({2, 8, 8, 8}, 11),
         pdx = poisoned_gpu({2, 15, 15, 8});
  Tensor nx = r({8, 16, 16, 32}, 20), ny = poisoned_gpu(nx.shape()), ndx = poisoned_gpu(nx.shape());
  Tensor ng = r({32}, 21), nb = r({32}, 22), nm = poisoned_gpu({32}), nv = poisoned_gpu({32}),
         ndg = poisoned_gpu({32}), ndb = poisoned_gpu({32});
  Tensor dx = r({8, 2304}, 30), dw = r({2304, 512}, 31), db = r({512}, 32), dy = poisoned_gpu({8, 512}),
         ddy = r({8, 512}, 33), ddx = poisoned_gpu({8, 2304}), ddw = poisoned_gpu({2304, 512}),
         ddb = poisoned_gpu({512});
  Tensor none;
  auto step = [&] {
    for (auto& c : convs) {
      ops::conv2d_forward(c.x, c.w, c.b, c.y, c.p);
      ops::conv2d_backward(c.x, c.w, c.dy, c.dx, c.dw, c.db, c.p);
    }
    ops::pool2d_forward(px, py, none, avg);
    ops::pool2d_backward(px, py, pdy, none, pdx, avg);
    ops::batch_norm_forward_training(nx, ng, nb, ny, nm, nv, 1e-3, nullptr);
    ops::batch_norm_backward(nx, ng, nm, nv, ny, ndx, ndg, ndb, 1e-3, nullptr);
    ops::dense_forward(dx, dw, db, dy);
    ops::dense_backward(dx, dw, ddy, ddx, ddw, ddb);
  };
  step();  // warm-up
  systolic::cuda::synchronize(0);
  auto before = systolic::cuda::allocator(0).stats();
  for (int i = 0; i < 3; ++i) step();
  systolic::cuda::synchronize(0);
  auto after = systolic::cuda::allocator(0).stats();
  EXPECT_EQ(after.raw_allocations, before.raw_allocations);
  EXPECT_EQ(after.in_use, before.in_use);
#endif
}

}  // namespace
}  // namespace systolic
