// Elementwise ops, padding, concatenation and row gathers on the XLA backend (xla_backend.h). Dropout: philox.h.
#include <systolic/error.h>

#include <cmath>

#include "ops/concat_layout.h"
#include "ops/xla/emit.h"
#include "ops/xla/philox.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

const DTypes fill_dtypes = kAllDTypes;
void fill(Tensor& x, double value) {
  traced([&] { write(x, constant(value, Type{systolic::xla::elem_of(x.dtype()), x.shape().dims()})); });
}

const DTypes copy_dtypes = kAllDTypes;
void copy(const Tensor& src, Tensor& dst) {
  traced([&] { trace().write(dst, hlo().reshape(trace().read(src), dst.shape().dims())); });
}

const DTypes cast_dtypes{DType::float32, DType::float64, DType::bfloat16, DType::int32};
void cast(const Tensor& src, Tensor& dst) {
  traced([&] {
    if (dst.dtype() != DType::int32)
      return write(dst, reshape(read_as(src, systolic::xla::elem_of(dst.dtype())), dst.shape().dims()));
    // Toward zero (stablehlo.convert); not finite or outside int32's range: INT32_MIN, as the other backends.
    E v = read_as(src, Elem::f64);
    E in_range = v > -2147483649.0 && v < 2147483648.0;
    E i = convert(where(in_range, v, 0.0), Elem::i32);
    write(dst, reshape(where(in_range, i, -2147483648.0), dst.shape().dims()));
  });
}

const DTypes add_n_dtypes = kFloatsAndBf16;
void add_n(const std::vector<Tensor>& xs, Tensor& y) {
  traced([&] {
    // No inputs: the empty sum, zeros (as the CPU's loop gives).
    if (xs.empty()) return write(y, constant(0.0, Type{compute_elem(y.dtype()), y.shape().dims()}));
    E total = read(xs[0]);
    for (std::size_t i = 1; i < xs.size(); ++i) total = total + reshape(read(xs[i]), total.dims());
    write(y, total);
  });
}

const DTypes accumulate_dtypes = kFloatsAndBf16;
void accumulate(const Tensor& src, Tensor& dst) {
  traced([&] { accumulate_into(dst, read(src)); });
}

const DTypes scale_shift_dtypes = kFloatsAndBf16;
void scale_shift(const Tensor& x, Tensor& y, double scale, double shift) {
  traced([&] { write(y, read(x) * scale + shift); });
}

const DTypes moving_average_dtypes = kFloatsAndBf16;
void moving_average(Tensor& moving, const Tensor& value, double momentum) {
  traced([&] {
    E m = read(moving);
    write(moving, m * momentum + reshape(read(value), m.dims()) * (1.0 - momentum));
  });
}

const DTypes gather_rows_dtypes{DType::float32, DType::float64, DType::bfloat16, DType::int32};
void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  traced([&] {
    const std::int64_t n = indices.numel();
    std::vector<std::int64_t> row = src.shape().dims();
    const std::int64_t rank = static_cast<std::int64_t>(row.size());
    E s = trace().read(src);
    E idx = reshape(read_as(indices, Elem::i32), {n, 1});
    std::vector<std::int64_t> sizes = row, offset_dims, out = {n};
    sizes[0] = 1;
    for (std::int64_t d = 1; d < rank; ++d) {
      offset_dims.push_back(d);
      out.push_back(row[static_cast<std::size_t>(d)]);
    }
    std::string list;
    for (std::size_t i = 0; i < offset_dims.size(); ++i)
      list += (i ? ", " : "") + std::to_string(offset_dims[i]);
    E g = hlo().op("stablehlo.gather", {s.v, idx.v}, Type{s.elem(), out},
                   "dimension_numbers = #stablehlo.gather<offset_dims = [" + list +
                       "], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, "
                       "indices_are_sorted = false, slice_sizes = " +
                       systolic::xla::i64_array(sizes));
    // stablehlo.gather clamps an index out of range: such a row reads NaN instead (float rows).
    E rows_in = reshape(idx, {n});
    E bad = !(rows_in >= constant(0.0, rows_in.type()) && rows_in < constant(double(row[0]), rows_in.type()));
    E rows = convert(g, systolic::xla::elem_of(dst.dtype()));
    if (dst.dtype() != DType::int32) rows = where(broadcast(bad, rows.dims(), {0}), like(NAN, rows), rows);
    write(dst, reshape(rows, dst.shape().dims()));
  });
}

const DTypes compute_mask_dtypes = kFloatsAndBf16;
void compute_mask(const Tensor& x, double value, Tensor& mask) {
  traced([&] {
    const std::int64_t R = mask.numel(), C = R ? x.numel() / R : 0;
    // Compared in x's dtype: the value rounded to it first (bfloat16 reads as float32, exactly).
    E v = reshape(read(x), {R, C});
    E target =
        convert(convert(constant(value, Type{Elem::f64, {}}), systolic::xla::elem_of(x.dtype())), v.elem());
    E differs = where(!eq(v, broadcast(target, {R, C}, {})), like(1.0, v), 0.0);
    write(mask, reduce_max(differs, {1}));
  });
}

const DTypes scatter_add_rows_dtypes = kFloats;
void scatter_add_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  traced([&] {
    const std::int64_t n = indices.numel();
    std::vector<std::int64_t> row = dst.shape().dims(), updates = {n};
    const std::int64_t rank = static_cast<std::int64_t>(row.size());
    std::string window;
    for (std::int64_t d = 1; d < rank; ++d) {
      updates.push_back(row[static_cast<std::size_t>(d)]);
      window += (d > 1 ? ", " : "") + std::to_string(d);
    }
    E table = read(dst);
    E idx = reshape(read_as(indices, Elem::i32), {n, 1});
    E upd = reshape(read_as(src, table.elem()), updates);
    // An index out of range updates nothing (stablehlo.scatter skips it).
    E out =
        hlo().op("stablehlo.scatter", {table.v, idx.v, upd.v}, table.type(),
                 "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [" + window +
                     "], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = "
                     "1>, indices_are_sorted = false, unique_indices = false",
                 hlo().binary_region("stablehlo.add", table.elem()));
    write(dst, out);
  });
}

const DTypes pad2d_forward_dtypes = kFloatsAndBf16;
void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) {
  traced([&] {
    E v = read(x);
    E zero = constant(0.0, Type{v.elem(), {}});
    write(y, hlo().pad(v.v, zero.v, {0, p.top, p.left, 0}, {0, p.bottom, p.right, 0}));
  });
}

const DTypes pad2d_backward_dtypes = kFloatsAndBf16;
void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  traced([&] {
    E g = read(dy);
    auto d = g.dims();
    write(dx, hlo().slice(g.v, {0, p.top, p.left, 0}, {d[0], d[1] - p.bottom, d[2] - p.right, d[3]}));
  });
}

const DTypes concat_forward_dtypes = kFloatsAndBf16;
void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  traced([&] {
    std::vector<Value> parts;
    for (auto& x : xs) parts.push_back(read(x).v);
    write(y, hlo().concatenate(parts, axis));
  });
}

const DTypes concat_backward_dtypes = kFloatsAndBf16;
void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  traced([&] {
    E g = read(dy);
    ConcatLayout l = concat_layout(dy, dxs, axis);
    const std::int64_t inner = dy.dim(axis) ? l.row / dy.dim(axis) : 1;  // elements per step along the axis
    std::vector<std::int64_t> start(g.dims().size(), 0), limit = g.dims();
    for (std::size_t k = 0; k < dxs.size(); ++k) {
      if (!dxs[k].defined()) continue;
      start[static_cast<std::size_t>(axis)] = l.offset[k] / inner;
      limit[static_cast<std::size_t>(axis)] = (l.offset[k] + l.width[k]) / inner;
      write(dxs[k], hlo().slice(g.v, start, limit));
    }
  });
}

namespace {

// Inverted dropout as the CPU's dropout_apply (ops/cpu/elementwise.cc): element i keeps v[i] * scale when word
// i % 4 of random4(key, i / 4), as (word >> 8) >= rate * 2^24 in float32, holds; else +0 (NaN included). scale is
// 1/(1-rate) in the compute type (float32 for bfloat16, rounded once when written), so the float32 result is the
// CPU's bit for bit.
void dropout_apply(const Tensor& in, const Tensor& out, double rate, std::uint64_t seed, const Tensor& step) {
  E v = read(in);
  const std::int64_t n = in.numel(), groups = (n + 3) / 4;
  philox::Words w = philox::random4(philox::dropout_key(seed, step), groups);
  std::vector<Value> parts;
  for (const E& word : w) parts.push_back(reshape(word, {groups, 1}).v);
  E words = reshape(E(hlo().concatenate(parts, 1)), {4 * groups});
  words = hlo().slice(words.v, {0}, {n});
  const float threshold = static_cast<float>(rate) * 16777216.0f;
  E keep = convert(shift_right(words, 8), Elem::f32) >= static_cast<double>(threshold);
  E flat = reshape(v, {n});
  write(out, where(keep, flat * (1.0 / (1.0 - rate)), 0.0));
}

}  // namespace

const DTypes dropout_forward_dtypes = kFloatsAndBf16;
void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step) {
  traced([&] { dropout_apply(x, y, rate, seed, step); });
}

const DTypes dropout_backward_dtypes = kFloatsAndBf16;
void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step) {
  traced([&] { dropout_apply(dy, dx, rate, seed, step); });
}

}  // namespace systolic::ops::xla
