// Scaled dot-product attention on CUDA (ops.h's attention_forward/backward): cuBLASLt's strided-batched products
// over head-major copies, with attention_kernels.cu's masked softmax, its backward and dropout between them.
//
// q [B, T, H, D], k [B, S, G, D] and v [B, S, G, E] are first copied head-major (qt [B, H, T, D], kt [B, G, S, D],
// vt [B, G, S, E]). Since H = G * per with query head h reading key/value head h / per, the `per` query heads of one
// key/value head are one matrix of per * T rows in qt, and their score rows are one matrix of probs [B, H, T, S]:
// every product is one batch of B * G GEMMs with a single stride, and the gradients of k and v add over a group's
// query heads inside the GEMM (no atomics, deterministic). Row-major products, for batch i = (b, g), M = per * T:
//   forward   probs_i [M, S] = scale * qt_i kt_i^T; softmax of each row; y_i [M, E] = d_i vt_i
//   backward  dvt_i = d_i^T dyt_i; ds_i = dyt_i vt_i^T, back through dropout and the softmax (kernel);
//             dqt_i = ds_i kt_i; dkt_i = ds_i^T qt_i
// (d = probs after dropout, recomputed from probs and the step's Philox bits), then y, dq, dk and dv copied back
// to Keras's layouts. The additive score (AttentionScore::additive) replaces the scores' product and dq's and dk's
// by attention_kernels.cu's loops on the same head-major copies. float32 products run in full float32 (CUBLAS_COMPUTE_32F, not TF32: a score's rounding
// error becomes a relative error of its probability), float64 in float64. All scratch (the copies, the dropped
// probabilities, ds, cuBLASLt's workspace) is one Context::workspace request; nothing synchronises or allocates,
// so a captured training step replays it.
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/attention_layout.h"
#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/dnn_common.h"

namespace systolic::ops::cuda {

namespace {

constexpr std::size_t kWorkspaceLimit = std::size_t(32) << 20;

// One row-major batched product C_i [M, N] = alpha op(A_i) op(B_i) (beta 0), A_i [M, K] (ta: stored [K, M]),
// B_i [K, N] (tb: stored [N, K]), every matrix packed, the i-th at i * stride elements. cuBLASLt is column-major:
// the row-major C is C' (N x M) = op(B)' op(A)', so B is cuBLASLt's first operand.
struct Product {
  bool ta, tb;
  std::int64_t M, N, K, batch, stride_a, stride_b, stride_c;
};

std::size_t bytes(DType t, std::int64_t n) {
  return static_cast<std::size_t>(n) * (t == DType::float64 ? 8 : 4);
}

cudaDataType_t blas_type(DType t) {
  return t == DType::float64 ? CUDA_R_64F : CUDA_R_32F;
}

void make_layout(cublasLtMatrixLayout_t* layout, DType t, std::int64_t rows, std::int64_t cols,
                 std::int64_t batch, std::int64_t stride) {
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, blas_type(t), static_cast<std::uint64_t>(rows),
                                                   static_cast<std::uint64_t>(cols), rows));
  const std::int32_t count = static_cast<std::int32_t>(batch);
  SYSTOLIC_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                         &stride, sizeof(stride)));
}

std::unique_ptr<MatmulPlan> make_plan(Context& c, DType t, const Product& p, std::size_t align_a,
                                      std::size_t align_b, std::size_t align_c) {
  auto e = std::make_unique<MatmulPlan>();
  const bool f64 = t == DType::float64;
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&e->desc, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                                 f64 ? CUDA_R_64F : CUDA_R_32F));
  const cublasOperation_t op_first = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_second = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  SYSTOLIC_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  SYSTOLIC_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  // cuBLASLt's A is our B: row-major [K, N], column-major N x K; stored [N, K] (tb) it is K x N, transposed by the
  // op. Its B is our A.
  make_layout(&e->a, t, p.tb ? p.K : p.N, p.tb ? p.N : p.K, p.batch, p.stride_b);
  make_layout(&e->b, t, p.ta ? p.M : p.K, p.ta ? p.K : p.M, p.batch, p.stride_a);
  make_layout(&e->d, t, p.N, p.M, p.batch, p.stride_c);
  Preference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(kWorkspaceLimit));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<std::uint32_t>(align_b));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<std::uint32_t>(align_a));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<std::uint32_t>(align_c));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<std::uint32_t>(align_c));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(c.cublaslt, e->desc, e->a, e->b, e->d, e->d,
                                                               pref.p, 1, &result, &returned);
  SYSTOLIC_CHECK(
      status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS,
      "attention: cuBLASLt has no algorithm for {} batches of [{} x {}] {}x [{} x {}]{} ({}) within {} "
      "MiB of workspace ({})",
      p.batch, p.ta ? p.K : p.M, p.ta ? p.M : p.K, p.ta ? "^T " : "", p.tb ? p.N : p.K, p.tb ? p.K : p.N,
      p.tb ? "^T" : "", dtype_name(t), kWorkspaceLimit >> 20,
      cublas_status_name(status != CUBLAS_STATUS_SUCCESS ? status : result.state));
  e->algo = result.algo;
  e->workspace = result.workspaceSize;
  return e;
}

// The cached plan of a product (per device, dtype, sizes and the operands' alignments).
MatmulPlan& plan_for(Context& c, DType t, const Product& p, const void* a, const void* b, const void* out) {
  static auto* mutex = new std::mutex;
  static auto* plans = new std::map<std::vector<std::int64_t>, std::unique_ptr<MatmulPlan>>;
  const std::size_t aa = pointer_alignment(a), ab = pointer_alignment(b), ac = pointer_alignment(out);
  const std::vector<std::int64_t> key{c.device,
                                      static_cast<std::int64_t>(t),
                                      p.ta,
                                      p.tb,
                                      p.M,
                                      p.N,
                                      p.K,
                                      p.batch,
                                      p.stride_a,
                                      p.stride_b,
                                      p.stride_c,
                                      static_cast<std::int64_t>(aa),
                                      static_cast<std::int64_t>(ab),
                                      static_cast<std::int64_t>(ac)};
  std::lock_guard lock(*mutex);
  auto& slot = (*plans)[key];
  if (!slot) slot = make_plan(c, t, p, aa, ab, ac);
  return *slot;
}

// Whether a product runs cuBLASLt (not when empty, nor for an empty sum, which is zeros).
bool runs_gemm(const Product& p) {
  return p.M > 0 && p.N > 0 && p.batch > 0 && p.K > 0;
}

// Stands for an operand in the workspace when planning (pointer_alignment reads 256 of it).
const void* const kAligned = reinterpret_cast<const void*>(std::uintptr_t(256));

// The workspace a product's plan takes (0 when it runs no GEMM).
std::size_t workspace_of(Context& c, DType t, const Product& p, const void* a, const void* b,
                         const void* out) {
  return runs_gemm(p) ? plan_for(c, t, p, a, b, out).workspace : 0;
}

// C = alpha op(A) op(B) for every batch; an empty sum (K = 0) is zeros.
void product(Context& c, DType t, const Product& p, double alpha, const void* a, const void* b, void* out,
             void* workspace, std::size_t workspace_bytes) {
  if (p.M == 0 || p.N == 0 || p.batch == 0) return;
  if (!runs_gemm(p)) {
    SYSTOLIC_CUDA_CHECK(cudaMemsetAsync(out, 0, bytes(t, p.M * p.N * p.batch), c.stream));
    return;
  }
  MatmulPlan& e = plan_for(c, t, p, a, b, out);
  SYSTOLIC_CHECK(e.workspace <= workspace_bytes, "attention: a product's workspace grew");
  const double alpha64 = alpha, beta64 = 0.0;
  const float alpha32 = static_cast<float>(alpha), beta32 = 0.0f;
  const void* pa = t == DType::float64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* pb = t == DType::float64 ? static_cast<const void*>(&beta64) : &beta32;
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatmul(c.cublaslt, e.desc, pa, b, e.a, a, e.b, pb, out, e.d, out, e.d,
                                       &e.algo, workspace, e.workspace, c.stream));
}

attn::Mask mask_of(const Tensor& m) {
  return m.defined() ? attn::Mask{m.raw_data(), element_of(m.dtype())} : attn::Mask{};
}

attn::Visibility visibility(const AttentionParams& p, const AttentionLayout& L, const Tensor& query_mask,
                            const Tensor& key_mask, const Tensor& attention_mask) {
  attn::Visibility v;
  v.query = mask_of(query_mask);
  v.key = mask_of(key_mask);
  v.pair = mask_of(attention_mask);
  v.T = L.T, v.S = L.S, v.H = L.H;
  v.causal = p.causal;
  v.window = p.window;
  return v;
}

// The additive score's weights (ops.h's score_weights): their data and count, null and 0 when undefined.
const void* raw_or_null(const Tensor& w) {
  return w.defined() ? w.raw_data() : nullptr;
}
std::int64_t weights_count(const Tensor& w) {
  return w.defined() ? w.numel() : 0;
}

const double* step_of(const Tensor& step) {
  return step.defined() ? static_cast<const double*>(step.raw_data()) : nullptr;
}

// The products of one call, for batch (b, g) of B * G with M = per * T query rows.
struct Products {
  Product scores, values, d_values, d_probs, d_queries, d_keys;
  explicit Products(const AttentionLayout& L) {
    const std::int64_t n = L.B * L.G, M = L.per * L.T, S = L.S, D = L.D, E = L.E;
    scores = {false, true, M, S, D, n, M * D, S * D, M * S};      // probs = scale qt kt^T
    values = {false, false, M, E, S, n, M * S, S * E, M * E};     // yt = d vt
    d_values = {true, false, S, E, M, n, M * S, M * E, S * E};    // dvt = d^T dyt
    d_probs = {false, true, M, S, E, n, M * E, S * E, M * S};     // ds = dyt vt^T
    d_queries = {false, false, M, D, S, n, M * S, S * D, M * D};  // dqt = ds kt
    d_keys = {true, false, S, D, M, n, M * S, M * D, S * D};      // dkt = ds^T qt
  }
};

}  // namespace

const DTypes attention_forward_dtypes{DType::float32, DType::float64};
void attention_forward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,
                       const Tensor& attention_mask, const Tensor& step, Tensor& y, Tensor& probs) {
  const AttentionLayout L(q, k, v);
  if (L.B * L.H * L.T == 0) return;
  Context& c = context(q);
  const DType t = q.dtype();
  const Element el = element_of(t);
  const Products pr(L);
  const bool drop = p.dropout > 0;
  const std::int64_t n_probs = L.B * L.H * L.T * L.S;

  WorkspacePlan plan;
  const std::size_t at_q = plan.add(bytes(t, q.numel())), at_k = plan.add(bytes(t, k.numel())),
                    at_v = plan.add(bytes(t, v.numel())), at_y = plan.add(bytes(t, y.numel())),
                    at_d = plan.add(drop ? bytes(t, n_probs) : 0);
  // The products' workspaces, from their plans (the copies in the workspace are 256-byte aligned).
  const void* d_src = drop ? kAligned : probs.raw_data();
  const bool additive = p.score == AttentionScore::additive;
  const std::size_t gemm_bytes =
      std::max(additive ? 0 : workspace_of(c, t, pr.scores, kAligned, kAligned, probs.raw_data()),
               workspace_of(c, t, pr.values, d_src, kAligned, kAligned));
  const std::size_t at_gemm = plan.add(gemm_bytes);
  void* base = c.workspace(plan.total());
  void* qt = WorkspacePlan::at(base, at_q);
  void* kt = WorkspacePlan::at(base, at_k);
  void* vt = WorkspacePlan::at(base, at_v);
  void* yt = WorkspacePlan::at(base, at_y);
  void* dropped = drop ? WorkspacePlan::at(base, at_d) : nullptr;
  void* gemm = WorkspacePlan::at(base, at_gemm);

  SYSTOLIC_CUDA_CHECK(attn::launch_swap12(q.raw_data(), qt, el, L.B, L.T, L.H, L.D, c.stream));
  SYSTOLIC_CUDA_CHECK(attn::launch_swap12(k.raw_data(), kt, el, L.B, L.S, L.G, L.D, c.stream));
  SYSTOLIC_CUDA_CHECK(attn::launch_swap12(v.raw_data(), vt, el, L.B, L.S, L.G, L.E, c.stream));
  if (additive)
    SYSTOLIC_CUDA_CHECK(attn::launch_additive_scores(qt, kt, raw_or_null(score_weights),
                                                     weights_count(score_weights), probs.raw_data(), el, L.B,
                                                     L.H, L.G, L.T, L.S, L.D, p.scale, c.stream));
  else
    product(c, t, pr.scores, p.scale, qt, kt, probs.raw_data(), gemm, gemm_bytes);
  const attn::Visibility vis = visibility(p, L, query_mask, key_mask, attention_mask);
  SYSTOLIC_CUDA_CHECK(
      attn::launch_softmax_rows(probs.raw_data(), el, vis, L.B * L.H * L.T, p.empty_rows_uniform, c.stream));
  if (drop)
    SYSTOLIC_CUDA_CHECK(attn::launch_dropout(probs.raw_data(), dropped, el, n_probs, p.dropout, p.seed,
                                             step_of(step), c.stream));
  product(c, t, pr.values, 1.0, drop ? dropped : probs.raw_data(), vt, yt, gemm, gemm_bytes);
  SYSTOLIC_CUDA_CHECK(attn::launch_swap12(yt, y.raw_data(), el, L.B, L.H, L.T, L.E, c.stream));
}

const DTypes attention_backward_dtypes{DType::float32, DType::float64};
void attention_backward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,
                        const Tensor& attention_mask, const Tensor& step, const Tensor& probs,
                        const Tensor& dy, const Tensor& dprobs, Tensor& dq, Tensor& dk, Tensor& dv,
                        Tensor& dscore_weights) {
  const AttentionLayout L(q, k, v);
  if (!dq.defined() && !dk.defined() && !dv.defined() && !dscore_weights.defined()) return;
  Context& c = context(q);
  const DType t = q.dtype();
  const Element el = element_of(t);
  const Products pr(L);
  const bool additive = p.score == AttentionScore::additive;
  const bool drop = p.dropout > 0, scores = dq.defined() || dk.defined() || dscore_weights.defined();
  const std::int64_t n_probs = L.B * L.H * L.T * L.S;

  WorkspacePlan plan;
  const std::size_t at_q = plan.add(bytes(t, q.numel())), at_k = plan.add(bytes(t, k.numel())),
                    at_v = plan.add(bytes(t, v.numel())), at_dy = plan.add(bytes(t, dy.numel())),
                    at_d = plan.add(drop ? bytes(t, n_probs) : 0),
                    at_ds = plan.add(scores ? bytes(t, n_probs) : 0),
                    at_dq = plan.add(dq.defined() ? bytes(t, q.numel()) : 0),
                    at_dk = plan.add(dk.defined() ? bytes(t, k.numel()) : 0),
                    at_dv = plan.add(dv.defined() ? bytes(t, v.numel()) : 0),
                    at_parts = plan.add(dscore_weights.defined() ? bytes(t, L.D) : 0);
  const void* d_src = drop ? kAligned : probs.raw_data();
  std::size_t gemm_bytes = 0;
  auto need = [&](bool on, const Product& pp, const void* a) {
    if (on) gemm_bytes = std::max(gemm_bytes, workspace_of(c, t, pp, a, kAligned, kAligned));
  };
  need(dv.defined(), pr.d_values, d_src);
  need(scores, pr.d_probs, kAligned);
  need(!additive && dq.defined(), pr.d_queries, kAligned);
  need(!additive && dk.defined(), pr.d_keys, kAligned);
  const std::size_t at_gemm = plan.add(gemm_bytes);
  void* base = c.workspace(plan.total());
  auto at = [&](std::size_t offset) { return WorkspacePlan::at(base, offset); };
  void* qt = at(at_q);
  void* kt = at(at_k);
  void* vt = at(at_v);
  void* dyt = at(at_dy);
  void* dropped = drop ? at(at_d) : nullptr;
  void* ds = at(at_ds);
  void* gemm = at(at_gemm);

  // The additive score's gradients read both q and k; the products' dq reads k, dk reads q.
  if (dk.defined() || (additive && scores))
    SYSTOLIC_CUDA_CHECK(attn::launch_swap12(q.raw_data(), qt, el, L.B, L.T, L.H, L.D, c.stream));
  if (dq.defined() || (additive && scores))
    SYSTOLIC_CUDA_CHECK(attn::launch_swap12(k.raw_data(), kt, el, L.B, L.S, L.G, L.D, c.stream));
  if (scores) SYSTOLIC_CUDA_CHECK(attn::launch_swap12(v.raw_data(), vt, el, L.B, L.S, L.G, L.E, c.stream));
  SYSTOLIC_CUDA_CHECK(attn::launch_swap12(dy.raw_data(), dyt, el, L.B, L.T, L.H, L.E, c.stream));
  if (drop)
    SYSTOLIC_CUDA_CHECK(attn::launch_dropout(probs.raw_data(), dropped, el, n_probs, p.dropout, p.seed,
                                             step_of(step), c.stream));
  if (dv.defined()) {
    product(c, t, pr.d_values, 1.0, drop ? dropped : probs.raw_data(), dyt, at(at_dv), gemm, gemm_bytes);
    SYSTOLIC_CUDA_CHECK(attn::launch_swap12(at(at_dv), dv.raw_data(), el, L.B, L.G, L.S, L.E, c.stream));
  }
  if (!scores) return;
  product(c, t, pr.d_probs, 1.0, dyt, vt, ds, gemm, gemm_bytes);
  const attn::Visibility vis = visibility(p, L, query_mask, key_mask, attention_mask);
  SYSTOLIC_CUDA_CHECK(attn::launch_softmax_backward(probs.raw_data(), dropped,
                                                    dprobs.defined() ? dprobs.raw_data() : nullptr, ds, el,
                                                    vis, L.B * L.H * L.T, p.dropout, p.scale, c.stream));
  if (additive) {
    SYSTOLIC_CUDA_CHECK(
        attn::launch_additive_backward(qt, kt, raw_or_null(score_weights), weights_count(score_weights), ds,
                                       dq.defined() ? at(at_dq) : nullptr, dk.defined() ? at(at_dk) : nullptr,
                                       dscore_weights.defined() ? dscore_weights.raw_data() : nullptr,
                                       at(at_parts), el, L.B, L.H, L.G, L.T, L.S, L.D, c.stream));
    if (dq.defined())
      SYSTOLIC_CUDA_CHECK(attn::launch_swap12(at(at_dq), dq.raw_data(), el, L.B, L.H, L.T, L.D, c.stream));
    if (dk.defined())
      SYSTOLIC_CUDA_CHECK(attn::launch_swap12(at(at_dk), dk.raw_data(), el, L.B, L.G, L.S, L.D, c.stream));
    return;
  }
  if (dq.defined()) {
    product(c, t, pr.d_queries, 1.0, ds, kt, at(at_dq), gemm, gemm_bytes);
    SYSTOLIC_CUDA_CHECK(attn::launch_swap12(at(at_dq), dq.raw_data(), el, L.B, L.H, L.T, L.D, c.stream));
  }
  if (dk.defined()) {
    product(c, t, pr.d_keys, 1.0, ds, qt, at(at_dk), gemm, gemm_bytes);
    SYSTOLIC_CUDA_CHECK(attn::launch_swap12(at(at_dk), dk.raw_data(), el, L.B, L.G, L.S, L.D, c.stream));
  }
}

}  // namespace systolic::ops::cuda
