// The shapes of one attention call (ops.h's attention_forward/backward), shared by the backends: q [B, T, H, D],
// k [B, S, G, D], v [B, S, G, E]; query head h reads key/value head h / per. Where (batch b, query head h or
// key/value head g) begins in each tensor: rows of q, y and dy are H heads apart, rows of k and v G heads apart.
// No systolic error formatting here: CUDA files may include it.
#pragma once

#include <systolic/tensor.h>

#include <cstdint>
#include <vector>

namespace systolic::ops {

struct AttentionLayout {
  std::int64_t B, T, H, D, S, G, E, per;
  AttentionLayout(const Tensor& q, const Tensor& k, const Tensor& v)
      : B(q.dim(0)),
        T(q.dim(1)),
        H(q.dim(2)),
        D(q.dim(3)),
        S(k.dim(1)),
        G(k.dim(2)),
        E(v.dim(3)),
        per(q.dim(2) / k.dim(2)) {}
  std::vector<std::int64_t> scores() const { return {B, H, T, S}; }  // probs' shape
  std::int64_t q_at(std::int64_t b, std::int64_t h) const { return (b * T * H + h) * D; }
  std::int64_t k_at(std::int64_t b, std::int64_t g) const { return (b * S * G + g) * D; }
  std::int64_t v_at(std::int64_t b, std::int64_t g) const { return (b * S * G + g) * E; }
  std::int64_t y_at(std::int64_t b, std::int64_t h) const { return (b * T * H + h) * E; }
};

}  // namespace systolic::ops
