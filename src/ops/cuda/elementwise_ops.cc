// CudaBackend's elementwise ops: fill, copy, add_n, accumulate, scale_shift, moving_average, activations,
// dropout, padding, concatenation, gathering rows, image augmentation. Each checks dtypes and shapes (Error
// naming the op), then launches on the device's stream (elementwise.h); none synchronises or allocates,
// except gather_rows with host indices, which uploads them (not a path of captured training steps).
// Contracts: include/systolic/ops.h.
#include <cmath>
#include <cstring>

#include "core/cuda/runtime.h"
#include "ops/augment.h"
#include "ops/concat_layout.h"
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/elementwise.h"

namespace systolic::ops::cuda {

namespace {

constexpr std::initializer_list<DType> kFloats = {DType::float32, DType::bfloat16, DType::float64};
constexpr std::initializer_list<DType> kFloat32Or16 = {DType::float32, DType::bfloat16};

// b has a's dtype and number of elements.
void check_like(const char* op, const Tensor& a, const Tensor& b) {
  SYSTOLIC_CHECK(b.defined(), "{}: a required tensor is undefined", op);
  SYSTOLIC_CHECK(a.dtype() == b.dtype() && a.numel() == b.numel(), "{}: {} {} and {} {} do not match", op,
                 dtype_name(a.dtype()), a.shape().str(), dtype_name(b.dtype()), b.shape().str());
}

// The device address of a float64 [1] step counter; null when undefined (the kernels read step 0 then).
const double* step_pointer(const char* op, const Tensor& step) {
  if (!step.defined()) return nullptr;
  SYSTOLIC_CHECK(step.dtype() == DType::float64 && step.numel() == 1,
                 "{}: the step counter must be float64 [1], not {} {}", op, dtype_name(step.dtype()),
                 step.shape().str());
  return step.data<double>();
}

ActivationKind kind_of(Activation a) {
  switch (a) {
    case Activation::linear:
      return ActivationKind::linear;
    case Activation::relu:
      return ActivationKind::relu;
    case Activation::sigmoid:
      return ActivationKind::sigmoid;
    case Activation::tanh:
      return ActivationKind::tanh;
    case Activation::softmax:
      return ActivationKind::softmax;
  }
  fail("unknown activation");
}

// Rows and columns of an activation's launch: softmax works on rows of the last axis, the others elementwise.
void activation_extent(Activation a, const Tensor& t, std::int64_t& rows, std::int64_t& cols) {
  if (a == Activation::softmax && t.rank() >= 1 && t.dim(-1) > 0) {
    cols = t.dim(-1);
    rows = t.numel() / cols;
  } else {
    cols = 1;
    rows = t.numel();
  }
}

}  // namespace

void CudaBackend::fill(Tensor& x, double value) {
  check_dtype("fill", x, {DType::float32, DType::bfloat16, DType::float64, DType::int32, DType::uint8});
  Context& c = context(x);
  // The value's bits in x's dtype, rounded as Tensor::fill rounds on the host.
  std::uint64_t bits = 0;
  switch (x.dtype()) {
    case DType::float32: {
      float f = static_cast<float>(value);
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      bits = u;
      break;
    }
    case DType::float64:
      std::memcpy(&bits, &value, 8);
      break;
    case DType::bfloat16:
      bits = bfloat16(static_cast<float>(value)).bits;
      break;
    case DType::int32:
      bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(std::nearbyint(value)));
      break;
    case DType::uint8:
      bits = static_cast<std::uint8_t>(std::nearbyint(value));
      break;
  }
  SYSTOLIC_CUDA_CHECK(
      launch_fill(x.raw_data(), x.numel(), static_cast<int>(dtype_size(x.dtype())), bits, c.stream));
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  SYSTOLIC_CHECK(src.defined() && dst.defined(), "copy: a required tensor is undefined");
  SYSTOLIC_CHECK(src.numel() == dst.numel() && src.dtype() == dst.dtype(),
                 "copy: source {} {} does not match destination {} {}", dtype_name(src.dtype()),
                 src.shape().str(), dtype_name(dst.dtype()), dst.shape().str());
  Context& c = context(dst);
  if (src.raw_data() == dst.raw_data() || dst.nbytes() == 0) return;
  SYSTOLIC_CUDA_CHECK(
      cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, c.stream));
}

void CudaBackend::cast(const Tensor& src, Tensor& dst) {
  check_dtype("cast", src, {DType::float32, DType::bfloat16, DType::float64});
  check_dtype("cast", dst, {DType::float32, DType::bfloat16, DType::float64});
  SYSTOLIC_CHECK(src.numel() == dst.numel(), "cast: {} values into {}", src.numel(), dst.numel());
  Context& c = context(dst);
  SYSTOLIC_CUDA_CHECK(launch_cast(src.raw_data(), element_of(src.dtype()), dst.raw_data(),
                                  element_of(dst.dtype()), dst.numel(), c.stream));
}

void CudaBackend::add_n(const std::vector<Tensor>& xs, Tensor& y) {
  check_dtype("add_n", y, kFloats);
  for (auto& x : xs) check_like("add_n", y, x);
  Context& c = context(y);
  if (xs.empty()) {
    SYSTOLIC_CUDA_CHECK(
        launch_fill(y.raw_data(), y.numel(), static_cast<int>(dtype_size(y.dtype())), 0, c.stream));
    return;
  }
  // kAddNMax inputs per launch; later launches add to y, so y may alias only one of the first launch's
  // inputs.
  for (std::size_t start = 0; start < xs.size(); start += kAddNMax) {
    const void* ptrs[kAddNMax];
    int count = static_cast<int>(std::min<std::size_t>(kAddNMax, xs.size() - start));
    for (int k = 0; k < count; ++k) {
      ptrs[k] = xs[start + k].raw_data();
      SYSTOLIC_CHECK(start == 0 || ptrs[k] != y.raw_data(),
                     "add_n: the output may be only one of the first {} of its {} inputs", kAddNMax,
                     xs.size());
    }
    SYSTOLIC_CUDA_CHECK(
        launch_add_n(ptrs, count, y.raw_data(), start > 0, y.numel(), element_of(y.dtype()), c.stream));
  }
}

void CudaBackend::accumulate(const Tensor& src, Tensor& dst) {
  check_dtype("accumulate", dst, kFloats);
  check_like("accumulate", dst, src);
  Context& c = context(dst);
  const void* ptrs[1] = {src.raw_data()};
  SYSTOLIC_CUDA_CHECK(
      launch_add_n(ptrs, 1, dst.raw_data(), true, dst.numel(), element_of(dst.dtype()), c.stream));
}

void CudaBackend::scale_shift(const Tensor& x, Tensor& y, double scale, double shift) {
  check_dtype("scale_shift", x, kFloats);
  check_like("scale_shift", x, y);
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_scale_shift(x.raw_data(), y.raw_data(), x.numel(), scale, shift,
                                         element_of(x.dtype()), c.stream));
}

void CudaBackend::moving_average(Tensor& moving, const Tensor& value, double momentum) {
  check_dtype("moving_average", moving, {DType::float32, DType::float64});
  check_like("moving_average", moving, value);
  Context& c = context(moving);
  SYSTOLIC_CUDA_CHECK(launch_moving_average(moving.raw_data(), value.raw_data(), moving.numel(), momentum,
                                            element_of(moving.dtype()), c.stream));
}

void CudaBackend::activation_forward(Activation a, const Tensor& x, Tensor& y) {
  check_dtype("activation_forward", x, kFloat32Or16);
  check_like("activation_forward", x, y);
  SYSTOLIC_CHECK(a != Activation::softmax || x.shape() == y.shape(),
                 "activation_forward: softmax of {} into {} (the shapes must be equal)", x.shape().str(),
                 y.shape().str());
  Context& c = context(y);
  std::int64_t rows, cols;
  activation_extent(a, x, rows, cols);
  SYSTOLIC_CUDA_CHECK(launch_activation_forward(kind_of(a), x.raw_data(), y.raw_data(), rows, cols,
                                                element_of(x.dtype()), c.stream));
}

void CudaBackend::activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx) {
  check_dtype("activation_backward", y, kFloat32Or16);
  check_like("activation_backward", y, dy);
  check_like("activation_backward", y, dx);
  SYSTOLIC_CHECK(a != Activation::softmax || (y.shape() == dy.shape() && y.shape() == dx.shape()),
                 "activation_backward: softmax with y {}, dy {}, dx {} (the shapes must be equal)",
                 y.shape().str(), dy.shape().str(), dx.shape().str());
  Context& c = context(dx);
  std::int64_t rows, cols;
  activation_extent(a, y, rows, cols);
  SYSTOLIC_CUDA_CHECK(launch_activation_backward(kind_of(a), y.raw_data(), dy.raw_data(), dx.raw_data(), rows,
                                                 cols, element_of(y.dtype()), c.stream));
}

void CudaBackend::dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed,
                                  const Tensor& step) {
  check_dtype("dropout_forward", x, kFloat32Or16);
  check_like("dropout_forward", x, y);
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_dropout(x.raw_data(), y.raw_data(), x.numel(), static_cast<float>(rate),
                                     static_cast<float>(1.0 / (1.0 - rate)), seed,
                                     step_pointer("dropout_forward", step), element_of(x.dtype()), c.stream));
}

void CudaBackend::dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed,
                                   const Tensor& step) {
  check_dtype("dropout_backward", dy, kFloat32Or16);
  check_like("dropout_backward", dy, dx);
  Context& c = context(dx);
  SYSTOLIC_CUDA_CHECK(launch_dropout(dy.raw_data(), dx.raw_data(), dy.numel(), static_cast<float>(rate),
                                     static_cast<float>(1.0 / (1.0 - rate)), seed,
                                     step_pointer("dropout_backward", step), element_of(dy.dtype()),
                                     c.stream));
}

namespace {
// x (N, H, W, C) padded by p is y (N, H + top + bottom, W + left + right, C).
void check_pad(const char* op, const Tensor& x, const Tensor& y, const Pad2D& p) {
  check_dtype(op, x, kFloats);
  SYSTOLIC_CHECK(y.defined() && x.dtype() == y.dtype(), "{}: mixed dtypes {} and {}", op,
                 dtype_name(x.dtype()), y.defined() ? dtype_name(y.dtype()) : "undefined");
  SYSTOLIC_CHECK(p.top >= 0 && p.bottom >= 0 && p.left >= 0 && p.right >= 0,
                 "{}: padding must not be negative (top {}, bottom {}, left {}, right {})", op, p.top,
                 p.bottom, p.left, p.right);
  SYSTOLIC_CHECK(x.rank() == 4 && y.rank() == 4 && y.dim(0) == x.dim(0) &&
                     y.dim(1) == x.dim(1) + p.top + p.bottom && y.dim(2) == x.dim(2) + p.left + p.right &&
                     y.dim(3) == x.dim(3),
                 "{}: {} padded by (top {}, bottom {}, left {}, right {}) is not {} (NHWC)", op,
                 x.shape().str(), p.top, p.bottom, p.left, p.right, y.shape().str());
}
}  // namespace

void CudaBackend::pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) {
  check_pad("pad2d_forward", x, y, p);
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_pad2d_forward(x.raw_data(), y.raw_data(), x.dim(0), x.dim(1), x.dim(2), x.dim(3),
                                           y.dim(1), y.dim(2), p.top, p.left,
                                           static_cast<int>(dtype_size(x.dtype())), c.stream));
}

void CudaBackend::pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  check_pad("pad2d_backward", dx, dy, p);
  Context& c = context(dx);
  SYSTOLIC_CUDA_CHECK(launch_pad2d_backward(dy.raw_data(), dx.raw_data(), dx.dim(0), dx.dim(1), dx.dim(2),
                                            dx.dim(3), dy.dim(1), dy.dim(2), p.top, p.left,
                                            static_cast<int>(dtype_size(dx.dtype())), c.stream));
}

void CudaBackend::concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  check_dtype("concat_forward", y, kFloats);
  for (auto& x : xs) SYSTOLIC_CHECK(x.defined(), "concat_forward: an input is undefined");
  ConcatLayout l = concat_layout("concat_forward", y, xs, axis);
  Context& c = context(y);
  const int bytes = static_cast<int>(dtype_size(y.dtype()));
  for (std::size_t k = 0; k < xs.size(); ++k)
    SYSTOLIC_CUDA_CHECK(launch_copy_rows(xs[k].raw_data(), l.width[k],
                                         static_cast<char*>(y.raw_data()) + l.offset[k] * bytes, l.row,
                                         l.outer, l.width[k], bytes, c.stream));
}

void CudaBackend::concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  check_dtype("concat_backward", dy, kFloats);
  ConcatLayout l = concat_layout("concat_backward", dy, dxs, axis);
  Context& c = context(dy);
  const int bytes = static_cast<int>(dtype_size(dy.dtype()));
  for (std::size_t k = 0; k < dxs.size(); ++k) {
    if (!dxs[k].defined()) continue;
    SYSTOLIC_CUDA_CHECK(launch_copy_rows(static_cast<const char*>(dy.raw_data()) + l.offset[k] * bytes, l.row,
                                         dxs[k].raw_data(), l.width[k], l.outer, l.width[k], bytes,
                                         c.stream));
  }
}

namespace {
// src (rows, ...) of any data-set dtype into dst of (count, ...) rows; returns the elements of a row.
std::int64_t check_gather(const Tensor& src, std::int64_t count, const Tensor& dst) {
  check_dtype("gather_rows", src, {DType::uint8, DType::int32, DType::float32, DType::float64});
  check_dtype("gather_rows", dst, {DType::float32, DType::bfloat16, DType::float64, DType::int32});
  SYSTOLIC_CHECK(src.rank() >= 1, "gather_rows: the source has no rows (shape {})", src.shape().str());
  std::int64_t rows = src.dim(0), row = rows ? src.numel() / rows : 0;
  SYSTOLIC_CHECK(count * row == dst.numel(), "gather_rows: {} rows of {} values do not fill {}", count, row,
                 dst.shape().str());
  return row;
}
}  // namespace

void CudaBackend::gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst) {
  const auto count = static_cast<std::int64_t>(indices.size());
  std::int64_t row = check_gather(src, count, dst), rows = src.dim(0);
  for (auto i : indices)
    SYSTOLIC_CHECK(i >= 0 && i < rows, "gather_rows: row {} out of range [0, {})", i, rows);
  Context& c = context(dst);
  if (count == 0 || row == 0) return;
  // The host's indices go up through a temporary device buffer, freed (stream-ordered) once the kernel is
  // queued.
  const std::size_t bytes = indices.size() * sizeof(std::int64_t);
  Tensor device_indices = scratch(bytes, c.device);
  systolic::cuda::copy(device_indices.raw_data(), device_indices.device(), indices.data(), Device::cpu(),
                       bytes);
  SYSTOLIC_CUDA_CHECK(launch_gather_rows(src.raw_data(), element_of(src.dtype()), rows, row,
                                         device_indices.raw_data(), true, count, dst.raw_data(),
                                         element_of(dst.dtype()), c.error_flags, kIndexOutOfRange, c.stream));
}

void CudaBackend::gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  SYSTOLIC_CHECK(indices.defined() && indices.dtype() == DType::int32,
                 "gather_rows: indices must be int32, not {}",
                 indices.defined() ? dtype_name(indices.dtype()) : "undefined");
  std::int64_t row = check_gather(src, indices.numel(), dst);
  Context& c = context(dst);
  // An index out of range sets kIndexOutOfRange (raised by the next synchronize) and gives a row of zeros.
  SYSTOLIC_CUDA_CHECK(launch_gather_rows(src.raw_data(), element_of(src.dtype()), src.dim(0), row,
                                         indices.raw_data(), false, indices.numel(), dst.raw_data(),
                                         element_of(dst.dtype()), c.error_flags, kIndexOutOfRange, c.stream));
}

void CudaBackend::augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                                 std::uint64_t first) {
  augment::Dims d = augment::check(x, y, p);
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_augment_images(x.data<float>(), y.data<float>(), d.N, d.H, d.W, d.C,
                                            augment::config_of(p), seed, first, c.stream));
}

}  // namespace systolic::ops::cuda
