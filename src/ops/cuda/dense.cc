// Dense layers on CUDA through cuBLASLt. Contract (ops.h): x[M,K] (leading dims flattened into M), w[K,U],
// b[U]: y[M,U] = x @ w + b; backward: dx = dy @ w^T (=), dw += x^T @ dy, db += column sums of dy.
// x, w, y, dy, dx share one dtype: float32 (CUBLAS_COMPUTE_32F_FAST_TF32: TF32 tensor cores, TensorFlow's
// default) or bfloat16 (float accumulation); b, dw, db may also be float32 when the data are bfloat16.
//
// cuBLASLt is column-major; a row-major [R, C] matrix is the column-major C x R matrix with leading dimension
// C, so with primes for those views (no copies, no transposed storage):
//   forward   y'(U x M)  = w'(U x K, ld U) * x'(K x M, ld K), bias per row of y' (= per unit) by the BIAS
//             epilogue
//   data      dx'(K x M) = w'^T * dy'(U x M, ld U)
//   weights   dw'(U x K) = dy' * x'^T + dw' (beta = 1: the accumulation happens in the GEMM)
//   bias      db += column sums of dy (deterministic reduction kernel, dnn_kernels.cu)
// Each GEMM's descriptors and the algorithm cuBLASLt's heuristic picks (within kWorkspaceLimit) are cached
// per (device, GEMM, dtypes, sizes, pointer alignments): algorithms are chosen for the alignment of the
// buffers they will see, and weights inside one flat parameter buffer need not be 256-byte aligned. The bias
// epilogue is used when b has y's dtype and 16-byte alignment; otherwise a kernel adds b after the GEMM.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/dnn_common.h"
#include "ops/cuda/dnn_kernels.h"

namespace systolic::ops::cuda {

namespace {

constexpr std::size_t kWorkspaceLimit = std::size_t(32) << 20;

enum class Gemm { forward, forward_bias, data, weights };

cudaDataType_t blas_type(DType t) {
  return t == DType::bfloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

// One column-major GEMM D = op(A) op(B) (+ beta C, C = D), described by its stored matrices.
struct GemmSpec {
  Gemm kind;
  DType data, out;  // A and B's dtype; C and D's dtype
  cublasOperation_t trans_a, trans_b;
  std::int64_t a_rows, a_cols, b_rows, b_cols, d_rows, d_cols;  // leading dimension = rows (packed)
  const void* a;
  const void* b;
  void* d;
  const void* bias;  // forward_bias only
};

const char* gemm_name(Gemm g) {
  switch (g) {
    case Gemm::forward:
      return "forward";
    case Gemm::forward_bias:
      return "forward with bias";
    case Gemm::data:
      return "backward-data";
    case Gemm::weights:
      return "backward-weights";
  }
  return "?";
}

std::unique_ptr<MatmulPlan> make_plan(Context& c, const GemmSpec& s) {
  auto e = std::make_unique<MatmulPlan>();
  cublasComputeType_t compute = s.data == DType::float32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&e->desc, compute, CUDA_R_32F));
  SYSTOLIC_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &s.trans_a, sizeof(s.trans_a)));
  SYSTOLIC_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &s.trans_b, sizeof(s.trans_b)));
  if (s.kind == Gemm::forward_bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;  // bias of D's type, one per row of D
    SYSTOLIC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    // The heuristic reads the pointer's alignment (the key holds it; each call sets its own pointer).
    SYSTOLIC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof(s.bias)));
  }
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&e->a, blas_type(s.data),
                                                   static_cast<std::uint64_t>(s.a_rows),
                                                   static_cast<std::uint64_t>(s.a_cols), s.a_rows));
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&e->b, blas_type(s.data),
                                                   static_cast<std::uint64_t>(s.b_rows),
                                                   static_cast<std::uint64_t>(s.b_cols), s.b_rows));
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&e->d, blas_type(s.out),
                                                   static_cast<std::uint64_t>(s.d_rows),
                                                   static_cast<std::uint64_t>(s.d_cols), s.d_rows));
  Preference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(kWorkspaceLimit));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<std::uint32_t>(pointer_alignment(s.a)));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<std::uint32_t>(pointer_alignment(s.b)));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<std::uint32_t>(pointer_alignment(s.d)));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<std::uint32_t>(pointer_alignment(s.d)));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(c.cublaslt, e->desc, e->a, e->b, e->d, e->d, pref.p,
                                                         1, &result, &returned);
  SYSTOLIC_CHECK(
      status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS,
      "dense: cuBLASLt has no {} algorithm for {} x {} times {} x {} ({}{}, {} -> {}) within {} MiB of "
      "workspace ({})",
      gemm_name(s.kind), s.a_rows, s.a_cols, s.b_rows, s.b_cols, s.trans_a == CUBLAS_OP_T ? "A^T" : "A",
      s.trans_b == CUBLAS_OP_T ? " B^T" : " B", dtype_name(s.data), dtype_name(s.out), kWorkspaceLimit >> 20,
      cublas_status_name(status != CUBLAS_STATUS_SUCCESS ? status : result.state));
  e->algo = result.algo;
  e->workspace = result.workspaceSize;
  return e;
}

MatmulPlan& matmul_plan(Context& c, const GemmSpec& s) {
  static auto* mutex = new std::mutex;
  static auto* plans = new std::map<std::vector<std::int64_t>, std::unique_ptr<MatmulPlan>>;
  std::vector<std::int64_t> key{
      c.device,
      static_cast<std::int64_t>(s.kind),
      static_cast<std::int64_t>(s.data),
      static_cast<std::int64_t>(s.out),
      s.a_rows,
      s.a_cols,
      s.b_rows,
      s.b_cols,
      s.d_rows,
      s.d_cols,
      static_cast<std::int64_t>(pointer_alignment(s.a)),
      static_cast<std::int64_t>(pointer_alignment(s.b)),
      static_cast<std::int64_t>(pointer_alignment(s.d)),
      s.kind == Gemm::forward_bias ? static_cast<std::int64_t>(pointer_alignment(s.bias)) : 0};
  std::lock_guard lock(*mutex);
  auto& slot = (*plans)[key];
  if (!slot) slot = make_plan(c, s);
  return *slot;
}

// Runs a planned GEMM with D = alpha op(A) op(B) + beta D, its workspace at `scratch`.
void run(Context& c, MatmulPlan& e, const GemmSpec& s, float beta, void* scratch) {
  if (s.kind == Gemm::forward_bias)
    SYSTOLIC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof(s.bias)));
  const float alpha = 1.0f;
  SYSTOLIC_CUBLAS_CHECK(cublasLtMatmul(c.cublaslt, e.desc, &alpha, s.a, e.a, s.b, e.b, &beta, s.d, e.d, s.d,
                                       e.d, &e.algo, scratch, e.workspace, c.stream));
}

// Product of all dims but the last (1 for a vector).
std::int64_t leading(const Tensor& t) {
  std::int64_t n = 1;
  for (int i = 0; i + 1 < t.rank(); ++i) n *= t.dim(i);
  return n;
}

}  // namespace

const DTypes dense_forward_dtypes{DType::float32, DType::bfloat16};
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const std::int64_t M = leading(x), K = w.dim(0), U = w.dim(1);
  if (M == 0 || U == 0) return;
  Context& c = context(x);
  if (K == 0) {  // an empty sum: y is the bias
    SYSTOLIC_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), c.stream));
    if (b.defined())
      SYSTOLIC_CUDA_CHECK(dnn::launch_add_bias(y.raw_data(), element_of(y.dtype()), b.raw_data(),
                                               element_of(b.dtype()), M, U,
                                               /*relu=*/false, c.stream));
    return;
  }
  const bool fused = b.defined() && b.dtype() == y.dtype() && pointer_alignment(b.raw_data()) >= 16;
  GemmSpec s{fused ? Gemm::forward_bias : Gemm::forward,
             x.dtype(),
             y.dtype(),
             CUBLAS_OP_N,
             CUBLAS_OP_N,
             U,
             K,  // w'
             K,
             M,  // x'
             U,
             M,  // y'
             w.raw_data(),
             x.raw_data(),
             y.raw_data(),
             fused ? b.raw_data() : nullptr};
  MatmulPlan& e = matmul_plan(c, s);
  run(c, e, s, 0.0f, c.workspace(e.workspace));
  if (b.defined() && !fused)
    SYSTOLIC_CUDA_CHECK(dnn::launch_add_bias(y.raw_data(), element_of(y.dtype()), b.raw_data(),
                                             element_of(b.dtype()), M, U,
                                             /*relu=*/false, c.stream));
}

const DTypes dense_backward_dtypes{DType::float32, DType::bfloat16};
void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  const std::int64_t M = leading(x), K = w.dim(0), U = w.dim(1);
  if (!dx.defined() && !dw.defined() && !db.defined()) return;
  Context& c = context(dy);

  const bool data = dx.defined() && M > 0 && K > 0 && U > 0;
  const bool weights = dw.defined() && M > 0 && K > 0 && U > 0;
  const bool bias = db.defined() && M > 0 && U > 0;
  GemmSpec sd{Gemm::data,
              x.dtype(),
              x.dtype(),
              CUBLAS_OP_T,
              CUBLAS_OP_N,
              U,
              K,  // w' (transposed by the op)
              U,
              M,  // dy'
              K,
              M,  // dx'
              w.raw_data(),
              dy.raw_data(),
              data ? dx.raw_data() : nullptr,
              nullptr};
  GemmSpec sw{Gemm::weights,
              x.dtype(),
              dw.defined() ? dw.dtype() : x.dtype(),
              CUBLAS_OP_N,
              CUBLAS_OP_T,
              U,
              M,  // dy'
              K,
              M,  // x' (transposed by the op)
              U,
              K,  // dw'
              dy.raw_data(),
              x.raw_data(),
              weights ? dw.raw_data() : nullptr,
              nullptr};
  MatmulPlan* pd = data ? &matmul_plan(c, sd) : nullptr;
  MatmulPlan* pw = weights ? &matmul_plan(c, sw) : nullptr;

  // One workspace request: the GEMMs run one after the other (they share their scratch), then the bias
  // partials.
  WorkspacePlan plan;
  std::size_t at_scratch =
      plan.add(std::max(pd ? pd->workspace : std::size_t(0), pw ? pw->workspace : std::size_t(0)));
  std::size_t at_partial = plan.add(bias ? dnn::bias_grad_partial_bytes(M, U) : 0);
  void* base = c.workspace(plan.total());

  if (dx.defined() && dx.numel() > 0 && !data)  // U == 0: an empty sum
    SYSTOLIC_CUDA_CHECK(cudaMemsetAsync(dx.raw_data(), 0, dx.nbytes(), c.stream));
  if (pd) run(c, *pd, sd, 0.0f, WorkspacePlan::at(base, at_scratch));
  if (pw) run(c, *pw, sw, 1.0f, WorkspacePlan::at(base, at_scratch));
  if (bias)
    SYSTOLIC_CUDA_CHECK(dnn::launch_bias_grad(dy.raw_data(), element_of(dy.dtype()), db.raw_data(),
                                              element_of(db.dtype()), M, U,
                                              WorkspacePlan::at(base, at_partial), c.stream));
}

}  // namespace systolic::ops::cuda
