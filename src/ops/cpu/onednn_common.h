// Private plumbing shared by the oneDNN float32 ops (onednn_*.cc): the one CPU engine and stream, memory
// descriptors over systolic tensors, the per-thread primitive cache, and the translation of dnnl::error into
// systolic::Error. Kept out of onednn.h so that callers of the ops never see dnnl.hpp.
#pragma once

#include <omp.h>
#include <systolic/error.h>
#include <systolic/ops.h>
#include <systolic/tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>
#include <vector>

namespace systolic::ops::onednn::detail {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// One engine and one in-order stream for the process: the CPU runtime is OpenMP, so a stream carries no
// per-thread state and execution is synchronous (no stream.wait() needed between primitives).
dnnl::engine& engine();
dnnl::stream& stream();
// oneDNN's eltwise algorithm of relu, sigmoid (logistic) or tanh (forward; Error for another activation).
dnnl::algorithm eltwise_algorithm(const Activation& a);

inline dnnl::memory::desc f32_md(const dims& d, tag t) {
  return {d, dt::f32, t};
}
// oneDNN's name for a tensor's element type (float32 or bfloat16; the float64 loops never get here).
inline dt dnnl_dtype(DType t) {
  return t == DType::bfloat16 ? dt::bf16 : dt::f32;
}
inline dnnl::memory::desc md(const dims& d, DType t, tag g) {
  return {d, dnnl_dtype(t), g};
}

// Whether oneDNN's bfloat16 primitives run on this CPU's own bfloat16 instructions (AVX-512 BF16, AMX). Where
// they do not, the ops run bfloat16 data by widening it to float32 (bf16_emulation.h), which is faster there
// than oneDNN's emulated or reference bfloat16 kernels and is what the CPU computed before it had native ones.
bool native_bf16();

// A dnnl::memory over a tensor's own storage (no copy). oneDNN takes void* even for read-only arguments.
inline dnnl::memory wrap(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, engine(), const_cast<void*>(t.raw_data()));
}

// Runs `body`, turning oneDNN's exceptions into systolic::Error naming the op, so that callers deal with one
// exception type and the message says which op failed.
template <class F>
void guarded(const char* op, F&& body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    fail("oneDNN {}: {}", op, e.what());
  }
}

// oneDNN splits every primitive among all the OpenMP threads, however little it computes; starting and joining
// them costs microseconds, more than a small product takes on one core (a batch-1 LSTM step and its Dense head
// through Model::predict: 35 µs on this 2-core VM's two threads, 13 µs on one). So a call whose work (its
// multiply-adds, or values for element-wise primitives) is under kSerialWork runs on the calling thread alone, as
// the CPU backend's own loops do under kParallelMin. The primitive caches key their entries by the thread count
// they were made for (PrimitiveCache), since oneDNN sizes a primitive's partitioning when it makes it.
inline constexpr std::int64_t kSerialWork = std::int64_t(1) << 16;
class SerialBelow {
 public:
  explicit SerialBelow(std::int64_t work) : saved_(work < kSerialWork ? omp_get_max_threads() : 1) {
    if (saved_ > 1) omp_set_num_threads(1);
  }
  ~SerialBelow() {
    if (saved_ > 1) omp_set_num_threads(saved_);
  }
  SerialBelow(const SerialBelow&) = delete;
  SerialBelow& operator=(const SerialBelow&) = delete;

 private:
  int saved_;
};
// guarded(), on the calling thread alone when `work` is under kSerialWork.
template <class F>
void guarded(const char* op, std::int64_t work, F&& body) {
  SerialBelow serial(work);
  guarded(op, std::forward<F>(body));
}

// The cache key: every integer that decides a primitive's shape and configuration.
using Key = std::vector<std::int64_t>;
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    std::size_t h = 0x9e3779b97f4a7c15ull;
    for (auto v : k) h ^= std::hash<std::int64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
  }
};

// Primitives (and the scratch buffers their reorders write into) by shape. oneDNN's own primitive cache
// spares the JIT, but building the op descriptor and primitive descriptor still walks its implementation
// list on every call; a model calls the same few shapes thousands of times, so this map skips all of it.
// Use one per op, `thread_local`: entries own scratch memory that a concurrent caller must not share, and
// no lock is needed. The capacity bound only guards against a caller that keeps changing shapes.
// Entries are kept per OpenMP thread count (the calling thread's, which SerialBelow lowers for small calls):
// oneDNN partitions a primitive's work for the threads there are when it is made.
template <class Entry>
class PrimitiveCache {
 public:
  template <class Make>
  Entry& get(const Key& key, Make&& make) {
    Map& map = for_threads(omp_get_max_threads());
    auto it = map.find(key);
    if (it != map.end()) return *it->second;
    if (map.size() >= kCapacity) map.clear();
    return *map.emplace(key, std::make_unique<Entry>(make())).first->second;
  }

 private:
  static constexpr std::size_t kCapacity = 128;
  using Map = std::unordered_map<Key, std::unique_ptr<Entry>, KeyHash>;
  Map& for_threads(int threads) {
    for (auto& [n, map] : maps_)
      if (n == threads) return map;
    return maps_.emplace_back(threads, Map()).second;
  }
  std::vector<std::pair<int, Map>> maps_;  // one or two thread counts: the caller's, and 1
};

// A reorder from one layout to another into a buffer the entry owns, or nothing when the layouts agree
// (then the caller's memory is used directly).
struct Staged {
  dnnl::reorder reorder;
  dnnl::memory buffer;  // in the primitive's preferred layout; empty when no reorder is needed
  bool needed() const { return static_cast<bool>(buffer); }
};
// user -> wanted (inputs).
inline Staged stage_in(const dnnl::memory::desc& user, const dnnl::memory::desc& wanted) {
  if (user == wanted) return {};
  Staged s;
  s.buffer = dnnl::memory(wanted, engine());
  s.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), user, engine(), wanted));
  return s;
}
// wanted -> user (outputs); `accumulate` adds into the user's memory (a sum post-op) instead of overwriting.
inline Staged stage_out(const dnnl::memory::desc& wanted, const dnnl::memory::desc& user,
                        bool accumulate = false) {
  if (user == wanted && !accumulate) return {};
  Staged s;
  s.buffer = dnnl::memory(wanted, engine());
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  s.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), wanted, engine(), user, attr));
  return s;
}
// Inputs: returns the memory the primitive should read (the staged copy after reordering, or `user`).
inline dnnl::memory input(Staged& s, const dnnl::memory& user) {
  if (!s.needed()) return user;
  s.reorder.execute(stream(), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, s.buffer}});
  return s.buffer;
}
// Outputs: the memory the primitive should write; call finish() after the primitive ran.
inline dnnl::memory output(Staged& s, const dnnl::memory& user) {
  return s.needed() ? s.buffer : user;
}
inline void finish(Staged& s, const dnnl::memory& user) {
  if (s.needed()) s.reorder.execute(stream(), {{DNNL_ARG_FROM, s.buffer}, {DNNL_ARG_TO, user}});
}

}  // namespace systolic::ops::onednn::detail
