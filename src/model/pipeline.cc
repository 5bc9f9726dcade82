// BatchPipeline: a ring of max_queue_size + 1 batch slots. Worker threads take batch numbers in turn, wait for the
// slot of batch b (b % slots) to be released by the consumer, fill it (gather, convert, augment), mark it ready.
// The consumer takes batches strictly in order. Plain loops, no OpenMP: the training step owns those threads.
#include <systolic/pipeline.h>
#include <systolic/random.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/dtype_dispatch.h"
#include "ops/augment.h"

namespace systolic {

void Augmentation::check() const {
  SYSTOLIC_CHECK(width_shift_range >= 0 && std::isfinite(width_shift_range),
                 "augmentation: width_shift_range must be >= 0, got {}", width_shift_range);
  SYSTOLIC_CHECK(height_shift_range >= 0 && std::isfinite(height_shift_range),
                 "augmentation: height_shift_range must be >= 0, got {}", height_shift_range);
  SYSTOLIC_CHECK(fill_mode == "nearest" || fill_mode == "constant",
                 "augmentation: fill_mode '{}' is not supported (nearest or constant)", fill_mode);
}

namespace {

// The per-image augmentation is ops::augment_images' (ops/augment.h; ops/augment_math.h holds the math the CUDA
// kernel shares).
ops::AugmentParams augment_params(const Augmentation& a) {
  return {.width_shift_range = a.width_shift_range,
          .height_shift_range = a.height_shift_range,
          .horizontal_flip = a.horizontal_flip,
          .fill_constant = a.fill_mode == "constant",
          .cval = a.cval};
}

template <class S, class T>
void convert(const S* in, T* out, std::int64_t n) {
  if constexpr (std::is_same_v<T, bfloat16>)
    for (std::int64_t i = 0; i < n; ++i) out[i] = bfloat16(static_cast<float>(in[i]));
  else
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i]);
}

// f(TypeTag<S>{}) for the data set's element type S.
template <class F>
void with_source_type(DType d, F&& f) {
  visit_dtype<std::uint8_t, std::int32_t, float, double>(
      d, f, [](DType t) { fail("input pipeline: data of dtype {} is not supported", dtype_name(t)); });
}

// f(TypeTag<T>{}) for the batch's element type T; bfloat16 under mixed precision (the batch in the first layer's
// compute dtype).
template <class F>
void with_target_type(DType d, F&& f) {
  visit_dtype<std::int32_t, float, double, bfloat16>(
      d, f, [](DType t) { fail("input pipeline: batches of dtype {} are not supported", dtype_name(t)); });
}

}  // namespace

void augment_image(const float* in, float* out, std::int64_t H, std::int64_t W, std::int64_t C,
                   const Augmentation& a, std::uint64_t seed, std::uint64_t index) {
  ops::augment::augment_image(in, out, H, W, C, augment_params(a), seed, index);
}

struct BatchPipeline::Impl {
  Tensor x, y;
  std::vector<std::int64_t> order;
  BatchPipelineOptions o;
  std::int64_t steps = 0, row_x = 0, row_y = 0, H = 0, W = 0, C = 0;

  struct Slot {
    Tensor x, y;
    std::int64_t batch = -1;  // the batch it holds when ready
    bool ready = false;
  };
  std::vector<Slot> slots;
  std::mutex mutex;
  std::condition_variable changed;
  std::int64_t next_to_build = 0;  // handed to workers in order
  std::int64_t consumed = 0;       // batches handed to the consumer and released (all before `current`)
  std::int64_t current = 0;        // the next batch next() returns
  bool stop = false;
  std::exception_ptr error;
  std::vector<std::thread> threads;

  std::int64_t rows_of(std::int64_t b) const {
    return std::min<std::int64_t>(o.batch_size, std::int64_t(order.size()) - b * o.batch_size);
  }

  void build(std::int64_t b, Slot& s) {
    thread_local std::vector<float> augmented;
    std::int64_t n = rows_of(b), first = b * o.batch_size;
    Shape xs = x.shape().without_batch().with_batch(n);
    const ops::AugmentParams augment = augment_params(o.augmentation);
    if (!s.x.defined() || s.x.numel() != xs.numel())
      s.x = Tensor(xs, o.x_dtype);
    else
      s.x = s.x.reshape(xs);
    with_source_type(x.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      const S* src = static_cast<const S*>(x.raw_data());
      with_target_type(o.x_dtype, [&](auto ttag) {
        using T = typename decltype(ttag)::type;
        T* dst = static_cast<T*>(s.x.raw_data());
        for (std::int64_t i = 0; i < n; ++i) {
          const S* row = src + order[first + i] * row_x;
          if constexpr (std::is_same_v<T, float>) {
            if (o.augmentation.enabled()) {
              ops::augment::augment_image(row, dst + i * row_x, H, W, C, augment, o.seed,
                                          std::uint64_t(first + i));
              continue;
            }
          } else if constexpr (std::is_same_v<T, bfloat16>) {
            if (o.augmentation.enabled()) {  // augmented in float32, then rounded once
              augmented.resize(std::size_t(row_x));
              ops::augment::augment_image(row, augmented.data(), H, W, C, augment, o.seed,
                                          std::uint64_t(first + i));
              convert(augmented.data(), dst + i * row_x, row_x);
              continue;
            }
          }
          convert(row, dst + i * row_x, row_x);
        }
      });
    });
    if (!y.defined()) return;
    Shape ys = row_y == 1 ? Shape({n}) : y.shape().without_batch().with_batch(n);
    if (!s.y.defined() || s.y.numel() != ys.numel())
      s.y = Tensor(ys, o.y_dtype);
    else
      s.y = s.y.reshape(ys);
    with_source_type(y.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      const S* src = static_cast<const S*>(y.raw_data());
      with_target_type(o.y_dtype, [&](auto ttag) {
        using T = typename decltype(ttag)::type;
        T* dst = static_cast<T*>(s.y.raw_data());
        for (std::int64_t i = 0; i < n; ++i) convert(src + order[first + i] * row_y, dst + i * row_y, row_y);
      });
    });
  }

  void worker() {
    for (;;) {
      std::int64_t b;
      Slot* slot;
      {
        std::unique_lock lock(mutex);
        if (stop || error || next_to_build >= steps) return;
        b = next_to_build++;
        // The slot of batch b is free once batch b - slots has been released by the consumer.
        changed.wait(lock, [&] { return stop || error || b - std::int64_t(slots.size()) < consumed; });
        if (stop || error) return;
        slot = &slots[std::size_t(b % std::int64_t(slots.size()))];
      }
      try {
        build(b, *slot);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!error) error = std::current_exception();
        changed.notify_all();
        return;
      }
      std::lock_guard lock(mutex);
      slot->batch = b;
      slot->ready = true;
      changed.notify_all();
    }
  }
};

BatchPipeline::BatchPipeline(const Tensor& x, const Tensor& y, std::vector<std::int64_t> order,
                             const BatchPipelineOptions& o)
    : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  SYSTOLIC_CHECK(x.defined() && x.rank() >= 1, "input pipeline: x is empty");
  SYSTOLIC_CHECK(o.batch_size > 0, "input pipeline: batch_size must be positive, got {}", o.batch_size);
  SYSTOLIC_CHECK(o.workers >= 0 && o.workers <= 64, "input pipeline: workers must be 0 to 64, got {}",
                 o.workers);
  SYSTOLIC_CHECK(o.max_queue_size >= 1, "input pipeline: max_queue_size must be >= 1, got {}",
                 o.max_queue_size);
  o.augmentation.check();
  std::int64_t N = x.dim(0);
  SYSTOLIC_CHECK(!y.defined() || (y.rank() >= 1 && y.dim(0) == N),
                 "input pipeline: {} samples in x but {} labels in y", N,
                 y.defined() && y.rank() ? y.dim(0) : 0);
  for (auto r : order) SYSTOLIC_CHECK(r >= 0 && r < N, "input pipeline: row {} out of range [0, {})", r, N);
  p.x = x, p.y = y, p.order = std::move(order), p.o = o;
  p.row_x = N ? x.numel() / N : 0;
  p.row_y = y.defined() && N ? y.numel() / N : 0;
  if (o.augmentation.enabled()) {
    SYSTOLIC_CHECK(x.rank() == 3 || x.rank() == 4,
                   "augmentation needs images (N, H, W, C) or (N, H, W); x has shape {}", x.shape().str());
    SYSTOLIC_CHECK(o.x_dtype == DType::float32 || o.x_dtype == DType::bfloat16,
                   "augmentation builds float32 or bfloat16 batches, not {}", dtype_name(o.x_dtype));
    p.H = x.dim(1), p.W = x.dim(2), p.C = x.rank() == 4 ? x.dim(3) : 1;
  }
  p.steps = (std::int64_t(p.order.size()) + o.batch_size - 1) / o.batch_size;
  SYSTOLIC_CHECK(o.first_batch >= 0 && o.first_batch <= p.steps,
                 "input pipeline: first_batch {} is not within the {} batches", o.first_batch, p.steps);
  p.next_to_build = p.consumed = p.current = o.first_batch;
  p.slots.resize(std::size_t(o.max_queue_size) + 1);
  for (int i = 0; i < o.workers && i < p.steps - o.first_batch; ++i)
    p.threads.emplace_back([&p] { p.worker(); });
}

BatchPipeline::~BatchPipeline() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->changed.notify_all();
  for (auto& t : impl_->threads) t.join();
}

std::int64_t BatchPipeline::steps() const {
  return impl_->steps;
}

bool BatchPipeline::next(Tensor& x, Tensor& y) {
  Impl& p = *impl_;
  std::unique_lock lock(p.mutex);
  if (p.current > p.o.first_batch) {  // release the batch returned last time
    auto& prev = p.slots[std::size_t((p.current - 1) % std::int64_t(p.slots.size()))];
    prev.ready = false;
    p.consumed = p.current;
    p.changed.notify_all();
  }
  if (p.current >= p.steps) return false;
  auto& slot = p.slots[std::size_t(p.current % std::int64_t(p.slots.size()))];
  if (p.threads.empty()) {  // synchronous
    lock.unlock();
    p.build(p.current, slot);
    lock.lock();
    slot.batch = p.current, slot.ready = true;
  }
  p.changed.wait(lock, [&] { return p.error || (slot.ready && slot.batch == p.current); });
  if (p.error) std::rethrow_exception(p.error);
  x = slot.x, y = slot.y;
  ++p.current;
  return true;
}

}  // namespace systolic
