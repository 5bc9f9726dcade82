// The input pipeline: batches gathered from a uint8 (or any dtype) data set, converted to the model's dtype and
// optionally augmented on background threads, a few batches ahead of training. Only batches are ever converted:
// the whole data set stays in its own dtype. fit() uses it; it can be used alone:
//
//   BatchPipeline pipe(x, y, order, {.batch_size = 128, .augmentation = {.width_shift_range = 0.1,
//                                     .height_shift_range = 0.1, .horizontal_flip = true}, .seed = 42});
//   for (Tensor xb, yb; pipe.next(xb, yb);) { ... }   // xb float32 (n, H, W, C), yb int32 (n,)
//
// Augmentation is Keras's ImageDataGenerator spelled the same way (the subset systolic implements): random shifts
// with bilinear interpolation and fill_mode "nearest" (default) or "constant" (cval), then a random horizontal
// flip with probability 1/2. The random numbers of sample k of an epoch come from Philox at (seed, k), so the
// result is the same for a seed whatever the number of threads.
#pragma once

#include <systolic/tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace systolic {

struct Augmentation {
  // Keras's meaning: a value < 1 is a fraction of the width (height); >= 1 is pixels. The shift is drawn
  // uniformly from [-range, range) (Keras draws integers when given an int >= 1; here it is always a float).
  double width_shift_range = 0.0;
  double height_shift_range = 0.0;
  bool horizontal_flip = false;
  std::string fill_mode = "nearest";  // "nearest" (Keras's default) or "constant"
  double cval = 0.0;                  // the value outside the image with fill_mode "constant"
  bool enabled() const { return width_shift_range > 0 || height_shift_range > 0 || horizontal_flip; }
  void check() const;  // throws Error naming the bad option
};

// Augments one image (H, W, C) of float values in place of `out` (same shape) from `in`; `index` is the sample's
// position in the epoch.
void augment_image(const float* in, float* out, std::int64_t H, std::int64_t W, std::int64_t C,
                   const Augmentation& a, std::uint64_t seed, std::uint64_t index);

struct BatchPipelineOptions {
  std::int64_t batch_size = 32;
  Augmentation augmentation;
  std::uint64_t seed = 0;          // of the augmentation's random numbers
  std::int64_t first_batch = 0;    // start at this batch of the order (a resumed epoch skips those done)
  int workers = 1;                 // background threads building batches (0: build on the calling thread)
  int max_queue_size = 4;          // batches built ahead of the consumer (Keras's fit max_queue_size)
  DType x_dtype = DType::float32;  // batch dtypes
  DType y_dtype = DType::int32;
};

class BatchPipeline {
 public:
  // x: (N, ...) samples; y: (N, ...) labels (or undefined); order: the rows of this epoch in order (any subset).
  BatchPipeline(const Tensor& x, const Tensor& y, std::vector<std::int64_t> order,
                const BatchPipelineOptions& options);
  ~BatchPipeline();
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  std::int64_t steps() const;
  // The next batch, in order: x (n, ...) in x_dtype, y (n, ...) in y_dtype (flattened to (n,) when y has one value
  // per sample). The tensors stay valid until the following call. False after the last batch. An error raised while
  // building a batch is rethrown here.
  bool next(Tensor& x, Tensor& y);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace systolic
