// Core types: shapes, tensors and views, dtype conversion, devices, the Philox generator.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include "core/dtype_dispatch.h"
#include "core/philox.h"
#include "test_util.h"

using namespace systolic;

TEST(Shape, NumelAndKerasString) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s[-1], 4);
  EXPECT_EQ(s.str(), "(2, 3, 4)");
  EXPECT_EQ(Shape({5}).str(), "(5,)");
  EXPECT_EQ(Shape({32, 32, 3}).keras_str(), "(None, 32, 32, 3)");
  EXPECT_EQ(s.with_batch(7), Shape({7, 2, 3, 4}));
  EXPECT_EQ(s.without_batch(), Shape({3, 4}));
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor row = t.slice(1, 2);
  EXPECT_EQ(row.shape(), Shape({1, 2}));
  row.data<float>()[0] = 42;
  EXPECT_EQ(t.data<float>()[2], 42);
  EXPECT_EQ(t.reshape({6}).data<float>()[5], 5);
  EXPECT_THROW(t.reshape({4}), Error);
  EXPECT_THROW(t.slice(2, 4), Error);
  EXPECT_THROW(t.data<double>(), Error);
  Tensor c = t.clone();
  c.data<float>()[0] = -1;
  EXPECT_EQ(t.data<float>()[0], 0);
}

TEST(Tensor, DtypeConversion) {
  Tensor t = Tensor::from_vector<float>({-1.5f, 0.25f, 255.0f}, {3});
  auto d = t.to(DType::float64).to_doubles();
  EXPECT_EQ(d, (std::vector<double>{-1.5, 0.25, 255.0}));
  auto u = Tensor::from_vector<float>({0.4f, 254.6f}, {2}).to(DType::uint8);
  EXPECT_EQ(u.data<std::uint8_t>()[0], 0);
  EXPECT_EQ(u.data<std::uint8_t>()[1], 255);
  // bfloat16 keeps 8 significant bits, rounding to nearest even.
  EXPECT_EQ(float(bfloat16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(float(bfloat16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_EQ(Tensor::full({2}, 3.0, DType::bfloat16).to_doubles()[1], 3.0);
}

// visit_dtype (core/dtype_dispatch.h): every dtype's storage type, a list of types, a fallback for the others.
TEST(DType, VisitGivesTheStorageType) {
  for (DType t : {DType::float32, DType::float64, DType::bfloat16, DType::uint8, DType::int32}) {
    std::size_t size = visit_dtype(t, [](auto tag) { return sizeof(typename decltype(tag)::type); });
    EXPECT_EQ(size, dtype_size(t)) << dtype_name(t);
    DType back = visit_dtype(t, [](auto tag) { return dtype_v<typename decltype(tag)::type>; });
    EXPECT_EQ(back, t);
  }
  EXPECT_EQ((visit_dtype<float, double>(DType::float64,
                                        [](auto tag) { return sizeof(typename decltype(tag)::type); })),
            8u);
  EXPECT_THAT(systolic::testing::error_of([] { visit_dtype<float, double>(DType::int32, [](auto) {}); }),
              ::testing::HasSubstr("dtype int32 is not handled here"));
  int fallback = visit_dtype<float>(
      DType::uint8, [](auto) { return 1; }, [](DType) { return 2; });
  EXPECT_EQ(fallback, 2);
}

TEST(Device, ParseAndAvailability) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device::parse("cuda").str(), "cuda:0");
  EXPECT_THROW(Device::parse("gpu"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
  EXPECT_TRUE(device_available(Device::cpu()));
  // This build has no CUDA backend: allocating there is a clear error, not a crash.
  EXPECT_THROW(Tensor({2}, DType::float32, Device::cuda(0)), Error);
}

TEST(Random, PhiloxKnownAnswer) {
  // Random123's known-answer vectors for philox4x32-10.
  auto a = philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(a, (std::array<std::uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  auto b = philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(b, (std::array<std::uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Random, PhiloxLanesEqualPhiloxGroupByGroup) {
  // The CPU's dropout draws its words 16 groups at a time (philox::random4_lanes); they must be random4's bits, which
  // the CUDA kernels draw one group per thread.
  for (std::uint64_t key : {0ull, 0x0123456789abcdefull, ~0ull})
    for (std::uint64_t first : {0ull, 5ull, 0xfffffff8ull, 0x1234567800000000ull}) {
      std::uint32_t words[4 * 16];
      philox::random4_lanes<16>(key, first, words);
      for (int j = 0; j < 16; ++j) {
        auto r = philox::random4(key, first + j);
        for (int k = 0; k < 4; ++k) ASSERT_EQ(words[4 * j + k], r.v[k]) << key << " " << first << " " << j;
      }
    }
}

TEST(Random, GeneratorIsRepeatableAndUniform) {
  Generator a(5), b(5), c(6);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
  EXPECT_NE(Generator(5).next_u64(), c.next_u64());
  Generator g(1);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) sum += g.uniform();
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
  auto p = Generator(3).permutation(1000);
  auto q = Generator(3).permutation(1000);
  EXPECT_EQ(p, q);
  std::sort(p.begin(), p.end());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(p[i], i);
}

TEST(Naming, KerasSnakeCaseAndCounters) {
  EXPECT_EQ(to_snake_case("Conv2D"), "conv2d");
  EXPECT_EQ(to_snake_case("MaxPooling2D"), "max_pooling2d");
  EXPECT_EQ(to_snake_case("BatchNormalization"), "batch_normalization");
  EXPECT_EQ(to_snake_case("GlobalAveragePooling2D"), "global_average_pooling2d");
  EXPECT_EQ(to_snake_case("ReLU"), "re_lu");
  clear_session();
  EXPECT_EQ(layers::Conv2D(1, {1, 1})->name(), "conv2d");
  EXPECT_EQ(layers::Conv2D(1, {1, 1})->name(), "conv2d_1");
  EXPECT_EQ(layers::Dense(1)->name(), "dense");
  EXPECT_EQ(layers::Conv2D(1, {1, 1}, {.name = "mine"})->name(), "mine");
  EXPECT_EQ(layers::Input({2}).node()->layer->name(), "input_1");
  clear_session();
}
