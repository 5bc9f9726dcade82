// Training on real data: the seed CNN on 4,096 Fashion-MNIST samples learns (test accuracy far above the 10% of
// chance). Skips visibly when Debian's dataset-fashion-mnist is not installed (scripts/setup installs it).
#include <systolic/systolic.h>

#include "test_util.h"

using namespace systolic;

TEST(Training, SeedCnnLearnsFashionMnist) {
  if (!systolic::testing::fashion_mnist_installed())
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  auto data = datasets::fashion_mnist::load_data();
  Tensor x = data.train.x.slice(0, 4096).reshape({4096, 28, 28, 1});
  Tensor y = data.train.y.slice(0, 4096);
  Tensor xt = data.test.x.slice(0, 2000).reshape({2000, 28, 28, 1});
  Tensor yt = data.test.y.slice(0, 2000);
  set_random_seed(1);
  clear_session();
  Model model = models::seed_cnn({28, 28, 1}, 10);
  auto history = model.fit(x, y, {.batch_size = 128, .epochs = 2, .verbose = 2});
  auto scores = model.evaluate(xt, yt, {.batch_size = 256, .verbose = 0});
  std::printf("test loss %.4f, test accuracy %.4f\n", scores[0], scores[1]);
  EXPECT_LT(history["loss"][1], history["loss"][0]);
  EXPECT_GT(scores[1], 0.70);
}
