// cuBLAS and cuBLASLt variants of the matmul family: the code every linear layer runs.
//
//   cublas.default          cublasGemmEx / cublasGemmStridedBatchedEx, cuBLAS choosing its kernel.
//   cublaslt.algo0..7       the K-th algorithm cuBLASLt's heuristic returns for the config
//                           (cublasLtMatmulAlgoGetHeuristic); prepare() records its id, tile,
//                           stages, split-K count and reduction scheme in the claim.
//   cublas.multistream      one handle whose calls rotate over four streams, without a workspace
//                           per stream: the case cuBLAS documents as not reproducible.
//   cublas.multistream_ws   the same with cublasSetWorkspace per stream: the documented fix.
//
// Row-major C[M,N] = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so every call passes B
// first. Compute type: f32 inputs at math "default" CUBLAS_COMPUTE_32F, "tf32"
// CUBLAS_COMPUTE_32F_FAST_TF32, "fp32-strict" CUBLAS_COMPUTE_32F_PEDANTIC; f16 and bf16
// CUBLAS_COMPUTE_32F (f32 accumulation, as the CPU reference); f64 CUBLAS_COMPUTE_64F.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <array>
#include <memory>
#include <string>

#include "kernels/common/cublas_util.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/matmul/matmul.h"

namespace d9m::matmul {
namespace {

// cuBLAS's dimensions and leading dimensions are int; the catalogue keeps sizes below 2^31.
int as_int(std::int64_t v) {
  if (v < 0 || v > INT_MAX) throw Unsupported("cuBLAS takes int sizes: " + std::to_string(v) + " does not fit");
  return static_cast<int>(v);
}

cudaDataType data_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

cublasComputeType_t compute_type(const Problem& p) {
  if (p.dtype == DType::f64) {
    if (p.math != "default") throw Unsupported("math mode " + p.math + " applies to f32 and lower");
    return CUBLAS_COMPUTE_64F;
  }
  if (p.math == "tf32") {
    if (p.dtype != DType::f32) throw Unsupported("math mode tf32 applies to f32 inputs");
    return CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  if (p.math == "fp32-strict") return CUBLAS_COMPUTE_32F_PEDANTIC;
  return CUBLAS_COMPUTE_32F;
}

// alpha = 1, beta = 0 in the scale type (double for f64, float otherwise).
struct Scalars {
  double d1 = 1, d0 = 0;
  float f1 = 1, f0 = 0;
  const void* one(bool f64) const { return f64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(bool f64) const { return f64 ? static_cast<const void*>(&d0) : &f0; }
};

// The column-major call's operands: first B (as C^T = op(B)^T op(A)^T), then A.
struct Call {
  cublasOperation_t op_first, op_second;
  int n, m, k, ld_first, ld_second, ldc;
  long long stride_first, stride_second, stride_c;
  int batch;
};

Call call_of(const Geometry& g) {
  return {g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
          as_int(g.n), as_int(g.m), as_int(g.k),
          as_int(g.trans_b ? g.k : g.n), as_int(g.trans_a ? g.m : g.k), as_int(g.n),
          g.k * g.n, g.m * g.k, g.m * g.n, as_int(g.batch)};
}

const Claim kReproducible{Determinism::deterministic, ClaimSource::vendor_doc,
                          "cuBLAS documents bit-wise reproducible results for the same toolkit, architecture and SM count on "
                          "one stream"};

// ---- cublas.default and the multistream pair ------------------------------------------------

constexpr int kStreams = 4;
constexpr std::size_t kStreamWorkspace = 32u << 20;  // CUBLAS_WORKSPACE_CONFIG=:4096:8 gives 8 x 4 MiB

struct BlasState {
  cublasHandle_t handle = nullptr;
  cublasComputeType_t compute{};
  // Multistream variants: the streams calls rotate over, events joining them to the trial's
  // stream, and (for the _ws variant) a workspace per stream.
  std::array<cudaStream_t, kStreams> streams{};
  std::array<cudaEvent_t, kStreams> ready{}, done{};
  std::array<void*, kStreams> workspaces{};
  int next = 0;
  ~BlasState() {
    for (int i = 0; i < kStreams; ++i) {
      if (workspaces[i]) cudaFree(workspaces[i]);
      if (ready[i]) cudaEventDestroy(ready[i]);
      if (done[i]) cudaEventDestroy(done[i]);
      if (streams[i]) cudaStreamDestroy(streams[i]);
    }
    if (handle) vendor::cublas().cublasDestroy(handle);
  }
};

enum class Streams { one, rotating, rotating_with_workspaces };

Prepared prepare_blas(const Problem& p, const ExecContext& exec, Streams mode) {
  auto st = std::make_shared<BlasState>();
  D9M_CUBLAS_CHECK(vendor::cublas().cublasCreate(&st->handle));
  D9M_CUBLAS_CHECK(vendor::cublas().cublasSetStream(st->handle, static_cast<cudaStream_t>(exec.stream)));
  st->compute = compute_type(p);
  (void)call_of(p.geom<Geometry>());  // sizes cuBLAS cannot take are UNSUPPORTED before any trial
  if (mode != Streams::one) {
    for (int i = 0; i < kStreams; ++i) {
      D9M_CUDA_CHECK(cudaStreamCreateWithFlags(&st->streams[i], cudaStreamNonBlocking));
      D9M_CUDA_CHECK(cudaEventCreateWithFlags(&st->ready[i], cudaEventDisableTiming));
      D9M_CUDA_CHECK(cudaEventCreateWithFlags(&st->done[i], cudaEventDisableTiming));
      if (mode == Streams::rotating_with_workspaces) D9M_CUDA_CHECK(cudaMalloc(&st->workspaces[i], kStreamWorkspace));
    }
  }
  return {st, std::nullopt};
}

void gemm(const KernelArgs& a, cublasHandle_t h, cublasComputeType_t compute) {
  const auto& g = a.problem.geom<Geometry>();
  const Call c = call_of(g);
  const cudaDataType t = data_type(a.problem.dtype);
  const bool f64 = a.problem.dtype == DType::f64;
  static const Scalars s;
  if (g.batch == 1)
    D9M_CUBLAS_CHECK(vendor::cublas().cublasGemmEx(h, c.op_first, c.op_second, c.n, c.m, c.k, s.one(f64), a.inputs[1], t, c.ld_first, a.inputs[0], t,
                            c.ld_second, s.zero(f64), a.output, t, c.ldc, compute, CUBLAS_GEMM_DEFAULT));
  else
    D9M_CUBLAS_CHECK(vendor::cublas().cublasGemmStridedBatchedEx(h, c.op_first, c.op_second, c.n, c.m, c.k, s.one(f64), a.inputs[1], t, c.ld_first,
                                          c.stride_first, a.inputs[0], t, c.ld_second, c.stride_second, s.zero(f64), a.output,
                                          t, c.ldc, c.stride_c, c.batch, compute, CUBLAS_GEMM_DEFAULT));
}

void run_blas(const KernelArgs& a, Streams mode) {
  auto& st = *static_cast<BlasState*>(a.state);
  if (mode == Streams::one) return gemm(a, st.handle, st.compute);
  // Rotate: this trial's call runs on the next stream of the four, ordered after the trial's
  // stream and before its end, so the trial's timing and digest see it.
  const int i = st.next;
  st.next = (st.next + 1) % kStreams;
  const cudaStream_t trial = cuda::stream_of(a);
  D9M_CUDA_CHECK(cudaEventRecord(st.ready[i], trial));
  D9M_CUDA_CHECK(cudaStreamWaitEvent(st.streams[i], st.ready[i], 0));
  D9M_CUBLAS_CHECK(vendor::cublas().cublasSetStream(st.handle, st.streams[i]));
  if (mode == Streams::rotating_with_workspaces) D9M_CUBLAS_CHECK(vendor::cublas().cublasSetWorkspace(st.handle, st.workspaces[i], kStreamWorkspace));
  gemm(a, st.handle, st.compute);
  D9M_CUDA_CHECK(cudaEventRecord(st.done[i], st.streams[i]));
  D9M_CUDA_CHECK(cudaStreamWaitEvent(trial, st.done[i], 0));
}

// ---- cuBLASLt: one variant per heuristic result -----------------------------------------------

constexpr int kHeuristicAlgos = 8;
constexpr std::size_t kLtWorkspace = 32u << 20;

struct LtState {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  ~LtState() {
    if (workspace) cudaFree(workspace);
    if (pref) vendor::cublas_lt().cublasLtMatmulPreferenceDestroy(pref);
    if (c) vendor::cublas_lt().cublasLtMatrixLayoutDestroy(c);
    if (second) vendor::cublas_lt().cublasLtMatrixLayoutDestroy(second);
    if (first) vendor::cublas_lt().cublasLtMatrixLayoutDestroy(first);
    if (desc) vendor::cublas_lt().cublasLtMatmulDescDestroy(desc);
    if (handle) vendor::cublas_lt().cublasLtDestroy(handle);
  }
};

cublasLtMatrixLayout_t layout(cudaDataType t, std::uint64_t rows, std::uint64_t cols, std::int64_t ld, int batch,
                              long long stride) {
  cublasLtMatrixLayout_t l = nullptr;
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  if (batch > 1) {
    D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
    D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  return l;
}

template <class V>
V algo_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  V v{};
  std::size_t written = 0;
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &written));
  return v;
}

std::string reduction_scheme_name(std::uint32_t r) {
  switch (r) {
    case CUBLASLT_REDUCTION_SCHEME_NONE: return "NONE";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE: return "INPLACE";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: return "COMPUTE_TYPE";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: return "OUTPUT_TYPE";
    default: return std::to_string(r);
  }
}

Prepared prepare_lt(int index, const Problem& p, const ExecContext&) {
  const auto& g = p.geom<Geometry>();
  const Call c = call_of(g);
  const cudaDataType t = data_type(p.dtype);
  auto st = std::make_shared<LtState>();
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtCreate(&st->handle));
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatmulDescCreate(&st->desc, compute_type(p), p.dtype == DType::f64 ? CUDA_R_64F : CUDA_R_32F));
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_TRANSA, &c.op_first, sizeof c.op_first));
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_TRANSB, &c.op_second, sizeof c.op_second));
  // Column-major extents of the stored operands: B^T is N x K (ld N) or, transposed, K x N (ld K).
  st->first = c.op_first == CUBLAS_OP_N ? layout(t, c.n, c.k, c.ld_first, c.batch, c.stride_first)
                                        : layout(t, c.k, c.n, c.ld_first, c.batch, c.stride_first);
  st->second = c.op_second == CUBLAS_OP_N ? layout(t, c.k, c.m, c.ld_second, c.batch, c.stride_second)
                                          : layout(t, c.m, c.k, c.ld_second, c.batch, c.stride_second);
  st->c = layout(t, c.n, c.m, c.ldc, c.batch, c.stride_c);
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatmulPreferenceCreate(&st->pref));
  const std::size_t ws = kLtWorkspace;
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatmulPreferenceSetAttribute(st->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t results[kHeuristicAlgos] = {};
  int returned = 0;
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatmulAlgoGetHeuristic(st->handle, st->desc, st->first, st->second, st->c, st->c, st->pref,
                                            kHeuristicAlgos, results, &returned));
  if (index >= returned)
    throw Unsupported("cuBLASLt's heuristic returned " + std::to_string(returned) + " algorithm(s) for this config");
  if (results[index].state != CUBLAS_STATUS_SUCCESS)
    throw Unsupported(std::string("cuBLASLt: heuristic result ") + vendor::cublas().cublasGetStatusString(results[index].state));
  st->algo = results[index].algo;
  D9M_CUDA_CHECK(cudaMalloc(&st->workspace, kLtWorkspace));
  Claim claim = kReproducible;
  claim.reason += "; algorithm " + std::to_string(algo_attribute<std::int32_t>(st->algo, CUBLASLT_ALGO_CONFIG_ID)) + ", tile " +
                  std::to_string(algo_attribute<std::uint32_t>(st->algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) + ", stages " +
                  std::to_string(algo_attribute<std::uint32_t>(st->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + ", split-K " +
                  std::to_string(algo_attribute<std::int32_t>(st->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + ", reduction " +
                  reduction_scheme_name(algo_attribute<std::uint32_t>(st->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) +
                  " (heuristic result " + std::to_string(index) + " of " + std::to_string(returned) + ")";
  return {st, claim};
}

void run_lt(const KernelArgs& a) {
  auto& st = *static_cast<LtState*>(a.state);
  static const Scalars s;
  const bool f64 = a.problem.dtype == DType::f64;
  D9M_CUBLAS_CHECK(vendor::cublas_lt().cublasLtMatmul(st.handle, st.desc, s.one(f64), a.inputs[1], st.first, a.inputs[0], st.second, s.zero(f64),
                            a.output, st.c, a.output, st.c, &st.algo, st.workspace, kLtWorkspace, cuda::stream_of(a)));
}

std::vector<VariantDef> variants(const std::string& op) {
  std::vector<VariantDef> out;
  auto blas = [&](std::string name, Streams mode, Claim claim) {
    out.push_back({.op = op, .name = std::move(name), .backend = Backend::cuda, .role = Role::vendor, .claim = std::move(claim),
                   .run = [mode](const KernelArgs& a) { run_blas(a, mode); },
                   .prepare = [mode](const Problem& p, const ExecContext& e) { return prepare_blas(p, e, mode); }});
  };
  blas("cublas.default", Streams::one, kReproducible);
  blas("cublas.multistream", Streams::rotating,
       {Determinism::nondeterministic, ClaimSource::vendor_doc,
        "cuBLAS documents that one handle used from several streams may pick different workspaces and give different "
        "results, unless each stream has its own workspace (four streams, in turn, one per trial)"});
  blas("cublas.multistream_ws", Streams::rotating_with_workspaces,
       {Determinism::deterministic, ClaimSource::vendor_doc,
        "cuBLAS documents cublasSetWorkspace per stream as restoring reproducibility across streams (four streams, 32 MiB "
        "each, in turn, one per trial)"});
  for (int i = 0; i < kHeuristicAlgos; ++i)
    out.push_back({.op = op, .name = "cublaslt.algo" + std::to_string(i), .backend = Backend::cuda, .role = Role::vendor,
                   .claim = kReproducible, .run = run_lt,
                   .prepare = [i](const Problem& p, const ExecContext& e) { return prepare_lt(i, p, e); }});
  return out;
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("matmul"));
D9M_REGISTER_VARIANTS(variants("matmul_batched"));

}  // namespace d9m::matmul
