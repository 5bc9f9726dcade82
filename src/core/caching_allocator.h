// A caching allocator for device memory, as PyTorch's CUDA allocator does in spirit: freed blocks are kept
// and handed out again, so a training step (which frees and allocates the same sizes every time) never calls
// the driver's allocator after the first step. All work on a device runs on one stream, so a block freed by
// the host can be reused at once: any later use is ordered after every earlier use on that stream.
//
// The raw allocation functions are injected, so the logic is tested on the host (tests/test_allocator.cc)
// with malloc; the CUDA runtime plugs in cudaMalloc/cudaFree.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace systolic {

class CachingAllocator {
 public:
  using RawAlloc = std::function<void*(std::size_t)>;  // returns nullptr when out of memory
  using RawFree = std::function<void(void*)>;
  CachingAllocator(std::string name, RawAlloc raw_alloc, RawFree raw_free);
  ~CachingAllocator();  // returns the cached blocks; blocks still in use are the caller's leak
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // At least `bytes` (rounded by block_size); throws Error naming the device and the sizes when even an
  // allocation after releasing the cache fails. Zero bytes gives a valid, distinct block.
  void* allocate(std::size_t bytes);
  void deallocate(void* p);  // p from allocate(); anything else throws
  void release_cached();     // gives every cached block back to the raw allocator

  struct Stats {
    std::size_t in_use = 0;  // bytes in blocks handed out
    std::size_t cached = 0;  // bytes in free blocks kept for reuse
    std::size_t peak_in_use = 0;
    std::size_t raw_allocations = 0;  // calls of the raw allocator (cudaMalloc): constant in a steady loop
    std::size_t raw_frees = 0;
    std::size_t reuses = 0;       // allocations served from the cache
    std::size_t allocations = 0;  // calls of allocate() and deallocate(): a captured step must make none
    std::size_t deallocations = 0;
  };
  Stats stats() const;

  // The size class of a request: 512-byte granularity up to 1 MiB, 2 MiB granularity above (fewer, larger
  // driver allocations for activations and data sets).
  static std::size_t block_size(std::size_t bytes);

 private:
  std::string name_;
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;       // size -> block
  std::unordered_map<void*, std::size_t> used_;  // block -> size
  Stats stats_;
};

}  // namespace systolic
