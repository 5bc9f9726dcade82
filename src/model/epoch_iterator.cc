// EpochIterator (epoch_iterator.h): the epoch's order and seed, then batches from the BatchPipeline or from
// DeviceBatches.
#include "model/epoch_iterator.h"

#include <systolic/ops.h>
#include <systolic/random.h>

#include <algorithm>
#include <numeric>

#include "core/philox.h"
#include "distribute/replica_group.h"
#include "model/model_state.h"

namespace systolic {

// The training samples on the model's device and the epoch's order as an int32 device tensor; each batch is
// gathered (and converted) by ops through a fixed index buffer, then augmented.
struct EpochIterator::DeviceBatches {
  Arrays x, y;
  Tensor w, order, idx;
  Tensor raw, augmented;  // float32 batches before and after augmentation (one input of images)

  DeviceBatches(ModelState& s, const Arrays& xt, const Arrays& yt, const Tensor& wt, std::int64_t batch,
                bool augment) {
    Device d = s.device();
    SYSTOLIC_CHECK(xt.samples() < (std::int64_t(1) << 31),
                   "fit: {} samples are too many for int32 row indices", xt.samples());
    x = xt.to(d);
    y = yt.to(d);
    w = wt.defined() ? wt.to(d) : Tensor();
    s.ensure_capacity(batch);
    idx = Tensor({batch}, DType::int32, d);
    // Augmentation works on float32 images; under mixed precision its result is cast to the compute dtype.
    const Tensor& xb = s.x_bufs[0];
    raw = augment ? Tensor(xb.shape(), DType::float32, d) : Tensor();
    augmented = augment && xb.dtype() != DType::float32 ? Tensor(xb.shape(), DType::float32, d) : Tensor();
  }

  void set_order(const std::vector<std::int64_t>& rows) {
    Tensor host({static_cast<std::int64_t>(rows.size())}, DType::int32);
    auto* p = host.data<std::int32_t>();
    for (std::size_t i = 0; i < rows.size(); ++i) p[i] = static_cast<std::int32_t>(rows[i]);
    order = host.to(idx.device());  // one copy per epoch
  }

  // Rows [begin, begin + n) of the epoch's order into the model's input and label buffers.
  void load(ModelState& s, std::int64_t begin, std::int64_t n, const Augmentation& a, std::uint64_t seed) {
    Tensor rows = idx.slice(0, n), src = order.slice(begin, begin + n);
    ops::copy(src, rows);
    for (std::size_t i = 0; i < x.size(); ++i) {
      Tensor xb = s.x_bufs[i].slice(0, n);
      if (!a.enabled()) {
        ops::gather_rows(x[i], rows, xb);
        continue;
      }
      Tensor r = raw.slice(0, n);
      ops::gather_rows(x[i], rows, r);
      auto images = [](const Tensor& t) {
        return t.rank() == 3 ? t.reshape({t.dim(0), t.dim(1), t.dim(2), 1}) : t;
      };
      Tensor out = augmented.defined() ? images(augmented.slice(0, n)) : images(xb);
      ops::augment_images(images(r), out, augment_params(a), seed, static_cast<std::uint64_t>(begin));
      if (augmented.defined()) ops::cast(out, xb);
    }
    for (std::size_t i = 0; i < y.size(); ++i) {
      Tensor yb = s.heads[i].y_buf.slice(0, n);
      ops::gather_rows(y[i], rows, yb);
    }
    if (w.defined()) {
      Tensor wb = s.w_buf.slice(0, n);
      ops::gather_rows(w, rows, wb);
    }
  }

  static ops::AugmentParams augment_params(const Augmentation& a) {
    return {.width_shift_range = a.width_shift_range,
            .height_shift_range = a.height_shift_range,
            .horizontal_flip = a.horizontal_flip,
            .fill_constant = a.fill_mode == "constant",
            .cval = a.cval};
  }
};

EpochIterator::EpochIterator(ModelState& s, const Arrays& x, const Arrays& y, const Tensor& w,
                             const FitOptions& o)
    : s_(s),
      x_(x),
      y_(y),
      w_(w),
      batch_size_(o.batch_size),
      samples_(x.samples()),
      steps_((x.samples() + o.batch_size - 1) / o.batch_size),
      full_batch_(std::min(o.batch_size, x.samples())),
      shuffle_(o.shuffle),
      augmentation_(o.augmentation),
      workers_(o.workers),
      max_queue_size_(o.max_queue_size) {
  distribute::ReplicaGroup* group = s.replicas.get();
  seed_ = global_generator().split();
  if (group && group->strategy().num_workers() > 1) {  // the chief's (32-bit halves: exact in doubles)
    std::vector<double> shared{double(seed_ >> 32), double(seed_ & 0xffffffffu)};
    group->broadcast_from_chief(shared);
    seed_ = (static_cast<std::uint64_t>(shared[0]) << 32) | static_cast<std::uint64_t>(shared[1]);
  }
  // Fixes the batch dtypes (y_buf: int32 or float); a replica holds only its shard (and turns its own sample
  // weights on or off with each step's).
  s.weigh_samples_like(w);
  s.ensure_capacity(group ? std::max<std::int64_t>(1, full_batch_ / group->size()) : full_batch_);
  // GPUs build batches on the device, and so does a model of several inputs or outputs; replicas split host
  // batches.
  bool on_device = !group && (o.batches == FitOptions::Batches::on_device || several() ||
                              (o.batches == FitOptions::Batches::automatic && !s.device().is_cpu()));
  if (on_device) device_ = std::make_unique<DeviceBatches>(s, x, y, w, full_batch_, augmentation_.enabled());
}

EpochIterator::~EpochIterator() = default;

void EpochIterator::begin_epoch(int epoch, std::int64_t first_batch) {
  SYSTOLIC_CHECK(first_batch >= 0 && first_batch <= steps_, "fit: batch {} of an epoch of {} batches",
                 first_batch, steps_);
  // Every worker holds the chief's seed (broadcast by the constructor, or by BackupAndRestore when it restored
  // one), so every worker draws the same order here.
  Generator g(philox::mix64(seed_ + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(epoch) + 1)));
  std::vector<std::int64_t> order(static_cast<std::size_t>(samples_));
  if (shuffle_)
    order = g.permutation(samples_);
  else
    std::iota(order.begin(), order.end(), std::int64_t(0));
  augmentation_seed_ = augmentation_.enabled() ? g.split() : 0;
  step_ = first_batch;
  if (device_) {
    device_->set_order(order);
    return;
  }
  pipeline_.reset();  // an epoch that stopped early (stop_training) may have left one
  if (w_.defined() || several()) order_ = order;
  if (several()) return;  // gathered in next()
  pipeline_ = std::make_unique<BatchPipeline>(x_[0], y_[0], std::move(order),
                                              BatchPipelineOptions{.batch_size = batch_size_,
                                                                   .augmentation = augmentation_,
                                                                   .seed = augmentation_seed_,
                                                                   .first_batch = first_batch,
                                                                   .workers = workers_,
                                                                   .max_queue_size = max_queue_size_,
                                                                   .x_dtype = s_.dtype,
                                                                   .y_dtype = s_.heads[0].y_buf.dtype()});
}

bool EpochIterator::next(Batch& batch) {
  if (step_ >= steps_) {
    pipeline_.reset();  // its threads end with the epoch
    return false;
  }
  batch = Batch{.index = step_};
  const std::int64_t begin = step_ * batch_size_;
  if (device_) {
    batch.size = std::min(batch_size_, samples_ - begin);
    device_->load(s_, begin, batch.size, augmentation_, augmentation_seed_);
    ++step_;
    return true;
  }
  // The batch's rows of the epoch's order (as the pipeline gathers x and y).
  auto rows = [&] {
    const auto first = order_.begin() + begin;
    return std::vector<std::int64_t>(first, first + batch.size);
  };
  if (several()) {  // each array's rows, converted to the buffers' dtypes
    batch.size = std::min(batch_size_, samples_ - begin);
    auto gather = [&](const Tensor& from, const Tensor& like) {
      Tensor t(like.shape().without_batch().with_batch(batch.size), like.dtype());
      ops::gather_rows(from, rows(), t);
      return t;
    };
    for (std::size_t i = 0; i < x_.size(); ++i) batch.x.push_back(gather(x_[i], s_.x_bufs[i]));
    for (std::size_t i = 0; i < y_.size(); ++i) batch.y.push_back(gather(y_[i], s_.heads[i].y_buf));
  } else {
    Tensor x, y;
    if (!pipeline_->next(x, y)) return false;
    batch.x = {x};
    batch.y = {y};
    batch.size = x.dim(0);
  }
  if (w_.defined()) {
    batch.w = Tensor(w_.shape().without_batch().with_batch(batch.size), w_.dtype());
    ops::gather_rows(w_, rows(), batch.w);
  }
  ++step_;
  return true;
}

ValidationData EpochIterator::place(const ValidationData& data) const {
  if (!device_) return data;
  return {data.x.to(s_.device()), data.y.to(s_.device()),
          data.sample_weight.defined() ? data.sample_weight.to(s_.device()) : Tensor()};
}

}  // namespace systolic
