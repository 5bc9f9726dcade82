// The caching device allocator's logic, on the host: malloc stands in for cudaMalloc.
#include <cstdlib>
#include <set>
#include <vector>

#include "core/caching_allocator.h"
#include "test_util.h"

namespace systolic {
namespace {

struct Counting {
  std::size_t limit = SIZE_MAX;  // bytes the fake device holds
  std::size_t held = 0;
  std::map<void*, std::size_t> blocks;
  CachingAllocator make() {
    return CachingAllocator(
        "fake:0",
        [this](std::size_t n) -> void* {
          if (held + n > limit) return nullptr;
          void* p = std::malloc(n);
          blocks[p] = n;
          held += n;
          return p;
        },
        [this](void* p) {
          held -= blocks.at(p);
          blocks.erase(p);
          std::free(p);
        });
  }
};

TEST(CachingAllocator, BlockSizes) {
  EXPECT_EQ(CachingAllocator::block_size(0), 512u);
  EXPECT_EQ(CachingAllocator::block_size(1), 512u);
  EXPECT_EQ(CachingAllocator::block_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::block_size(1 << 20), std::size_t(1) << 20);
  EXPECT_EQ(CachingAllocator::block_size((1 << 20) + 1), std::size_t(2) << 20);
  EXPECT_EQ(CachingAllocator::block_size(5u << 20), std::size_t(6) << 20);
}

TEST(CachingAllocator, ASteadyLoopCallsTheRawAllocatorOnlyInItsFirstIteration) {
  Counting dev;
  auto a = dev.make();
  std::vector<std::size_t> sizes{100, 4096, 3 << 20, 777, 4096, 1 << 20, 12};
  for (int step = 0; step < 5; ++step) {
    std::vector<void*> live;
    for (auto s : sizes) live.push_back(a.allocate(s));
    std::set<void*> distinct(live.begin(), live.end());
    EXPECT_EQ(distinct.size(), live.size());  // no block handed out twice
    for (auto* p : live) a.deallocate(p);
    if (step == 0) {
      EXPECT_EQ(a.stats().raw_allocations, sizes.size());
    }
  }
  auto s = a.stats();
  EXPECT_EQ(s.raw_allocations, sizes.size());
  EXPECT_EQ(s.reuses, 4 * sizes.size());
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.allocations, 5 * sizes.size());
  EXPECT_EQ(s.deallocations, 5 * sizes.size());
  EXPECT_GT(s.cached, 0u);
}

TEST(CachingAllocator, ASmallRequestDoesNotTakeAMuchLargerBlock) {
  Counting dev;
  auto a = dev.make();
  void* big = a.allocate(8 << 20);
  a.deallocate(big);
  void* small = a.allocate(1000);
  EXPECT_NE(small, big);
  void* big2 = a.allocate(8 << 20);
  EXPECT_EQ(big2, big);  // the cached large block serves the large request
  a.deallocate(small);
  a.deallocate(big2);
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheAndRetriesThenFailsClearly) {
  Counting dev;
  dev.limit = 10 << 20;
  auto a = dev.make();
  void* p = a.allocate(6 << 20);
  a.deallocate(p);  // cached: 6 MiB held by the fake device
  void* q =
      a.allocate(8 << 20);  // does not fit next to the cached block: the cache is released, then it fits
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(a.stats().cached, 0u);
  std::string e = testing::error_of([&] { a.allocate(4 << 20); });
  EXPECT_NE(e.find("out of memory on fake:0"), std::string::npos) << e;
  EXPECT_NE(e.find("bytes in use"), std::string::npos) << e;
  a.deallocate(q);
}

TEST(CachingAllocator, FreeingAForeignPointerIsAnError) {
  Counting dev;
  auto a = dev.make();
  int x = 0;
  EXPECT_NE(testing::error_of([&] { a.deallocate(&x); }).find("did not hand out"), std::string::npos);
  a.deallocate(nullptr);  // a no-op, as free(nullptr)
}

TEST(CachingAllocator, ReleaseCachedReturnsEverythingToTheDevice) {
  Counting dev;
  auto a = dev.make();
  std::vector<void*> v;
  for (int i = 0; i < 10; ++i) v.push_back(a.allocate(1000 * (i + 1)));
  for (auto* p : v) a.deallocate(p);
  EXPECT_GT(dev.held, 0u);
  a.release_cached();
  EXPECT_EQ(dev.held, 0u);
  EXPECT_EQ(a.stats().raw_frees, 10u);
}

}  // namespace
}  // namespace systolic
