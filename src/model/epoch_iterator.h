// fit's batches, epoch by epoch (Keras's EpochIterator). They come from one of two sources:
//  - the host: the BatchPipeline gathers each batch, converts it to the model's dtypes and augments it on
//    background threads, a few batches ahead; the train function copies it into the model's buffers (or,
//    under replicas, splits it among them). A model of several inputs or outputs has its host batches
//    gathered on the caller's thread (under replicas; without them its batches are built as device batches).
//  - the device (DeviceBatches): the training samples are copied to the model's device once per fit, in their
//    own dtype; each batch is gathered and converted by ops straight into the model's input buffers, from a
//    device tensor that holds the epoch's order, then augmented there. GPUs take this way, so that the step
//    can be replayed from a CUDA graph; FitOptions::Batches::on_device runs the same logic with CPU ops on
//    the CPU, where it gives the host pipeline's weights bit for bit.
// Epoch e's order (a fresh permutation when shuffling) and its augmentation seed come from Philox keyed by
// (the fit's seed, e), not from how far a generator has advanced: a fit resumed in epoch e (BackupAndRestore)
// draws what an uninterrupted one drew, and skips the batches done. The fit's seed is drawn once from the
// global generator when the iterator is made; across workers every worker takes the chief's, so they all build
// the same global batches.
#pragma once

#include <systolic/model.h>
#include <systolic/tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace systolic {

class ModelState;

// One batch of an epoch.
struct Batch {
  std::int64_t index = 0;  // in the epoch: 0 .. steps - 1
  std::int64_t size = 0;   // samples
  // Built on the host in the model's dtypes, an array per input and per output; empty when the batch is already
  // in the model's input buffers (device batches). w: the batch's sample weights (undefined when the fit has
  // none).
  Arrays x, y;
  Tensor w;
};

class EpochIterator {
 public:
  // x, y: the training samples (validation data already split off); w: their sample weights ([N], the model's
  // weight_dtype()) or undefined. Sizes the model's buffers for the batches (and turns its sample weights on or
  // off); on the device, copies the samples there.
  EpochIterator(ModelState& model, const Arrays& x, const Arrays& y, const Tensor& w,
                const FitOptions& options);
  ~EpochIterator();
  EpochIterator(const EpochIterator&) = delete;
  EpochIterator& operator=(const EpochIterator&) = delete;

  // Whether the batches are built on the model's device (into its input buffers).
  bool on_device() const { return device_ != nullptr; }
  std::int64_t steps() const { return steps_; }            // batches per epoch
  std::int64_t full_batch() const { return full_batch_; }  // samples in every batch but maybe the last
  // The fit's seed (what a backup stores), and the one a resumed fit takes back.
  std::uint64_t seed() const { return seed_; }
  void set_seed(std::uint64_t seed) { seed_ = seed; }
  // Starts epoch `epoch` at its batch `first_batch` (0, or the batches a resumed epoch has done): its order
  // and augmentation seed from (seed, epoch).
  void begin_epoch(int epoch, std::int64_t first_batch = 0);
  // The epoch's next batch; false after its last.
  bool next(Batch& batch);
  // Validation data where this fit's batches live: copied to the model's device once (for every epoch's
  // validation) when they are built there.
  ValidationData place(const ValidationData& data) const;

 private:
  struct DeviceBatches;
  ModelState& s_;
  Arrays x_, y_;
  Tensor w_;
  // The epoch's order, for the sample weights of host batches and for the host batches of a model of several
  // inputs or outputs (gathered here, not by the BatchPipeline, which builds one x and one y).
  std::vector<std::int64_t> order_;
  std::int64_t batch_size_, samples_, steps_, full_batch_;
  bool shuffle_;
  Augmentation augmentation_;
  int workers_, max_queue_size_;
  std::int64_t step_ = 0;
  std::uint64_t seed_ = 0, augmentation_seed_ = 0;
  std::unique_ptr<DeviceBatches> device_;
  std::unique_ptr<BatchPipeline> pipeline_;
  bool several() const { return x_.size() > 1 || y_.size() > 1; }
};

}  // namespace systolic
