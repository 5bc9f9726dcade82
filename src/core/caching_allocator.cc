#include "core/caching_allocator.h"

#include <systolic/error.h>

namespace systolic {

CachingAllocator::CachingAllocator(std::string name, RawAlloc raw_alloc, RawFree raw_free)
    : name_(std::move(name)), raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() {
  release_cached();
}

std::size_t CachingAllocator::block_size(std::size_t bytes) {
  constexpr std::size_t small = 512, large = std::size_t(2) << 20, limit = std::size_t(1) << 20;
  if (bytes == 0) bytes = 1;
  std::size_t g = bytes <= limit ? small : large;
  return (bytes + g - 1) / g * g;
}

void* CachingAllocator::allocate(std::size_t bytes) {
  std::size_t size = block_size(bytes);
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  // Best fit among cached blocks, but never a block more than twice the request (a small tensor must not pin
  // a large block that a later large request needs).
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size) {
    void* p = it->second;
    std::size_t got = it->first;
    free_.erase(it);
    used_.emplace(p, got);
    stats_.cached -= got;
    stats_.in_use += got;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    ++stats_.reuses;
    return p;
  }
  void* p = raw_alloc_(size);
  if (!p && !free_.empty()) {
    for (auto& [s, q] : free_) {
      raw_free_(q);
      ++stats_.raw_frees;
    }
    free_.clear();
    stats_.cached = 0;
    p = raw_alloc_(size);
  }
  if (!p)
    fail("out of memory on {}: allocating {} bytes with {} bytes in use (peak {})", name_, size,
         stats_.in_use, stats_.peak_in_use);
  used_.emplace(p, size);
  ++stats_.raw_allocations;
  stats_.in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return p;
}

void CachingAllocator::deallocate(void* p) {
  if (!p) return;
  std::lock_guard lock(mutex_);
  ++stats_.deallocations;
  auto it = used_.find(p);
  SYSTOLIC_CHECK(it != used_.end(), "{}: freeing a block this allocator did not hand out", name_);
  std::size_t size = it->second;
  used_.erase(it);
  free_.emplace(size, p);
  stats_.in_use -= size;
  stats_.cached += size;
}

void CachingAllocator::release_cached() {
  std::lock_guard lock(mutex_);
  for (auto& [s, p] : free_) {
    raw_free_(p);
    ++stats_.raw_frees;
  }
  free_.clear();
  stats_.cached = 0;
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace systolic
