// What the backends' core pieces see of a tensor beyond its public API: its storage and byte offset (the XLA
// backend's traces read and write arrays at element offsets).
#pragma once

#include <systolic/tensor.h>

#include "core/storage.h"

namespace systolic {

struct TensorInternals {
  static const std::shared_ptr<Storage>& storage(const Tensor& t) { return t.storage_; }
  static std::size_t byte_offset(const Tensor& t) { return t.offset_; }
};

}  // namespace systolic
