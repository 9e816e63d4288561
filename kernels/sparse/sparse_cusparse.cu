// cuSPARSE's generic API, one variant per algorithm:
//   spmv  cusparseSpMV with CUSPARSE_SPMV_ALG_DEFAULT, _CSR_ALG1, _CSR_ALG2, _COO_ALG1, _COO_ALG2
//         (cusparse.spmv_default, cusparse.spmv_csr_alg1, ...)
//   spmm  cusparseSpMM with CUSPARSE_SPMM_ALG_DEFAULT, _CSR_ALG1.._CSR_ALG3, _COO_ALG1.._COO_ALG4
//         (cusparse.spmm_default, cusparse.spmm_csr_alg1, ...), b and the product row-major
//         (CUSPARSE_ORDER_ROW, leading dimension n)
//   sparse_dense_matmul  the spmm variants, with opB = CUSPARSE_OPERATION_TRANSPOSE for adjoint_b
//         (b stored [n, K] row-major, leading dimension K)
// with opA = CUSPARSE_OPERATION_NON_TRANSPOSE or _TRANSPOSE, 32-bit indices, zero base, data in
// the config's dtype (CUDA_R_32F, _16F, _16BF, _64F) and compute type CUDA_R_32F (CUDA_R_64F
// for f64), alpha = 1, beta = 0.
//
// prepare() (untimed) creates the handle and the descriptors, asks cusparse*_bufferSize for the
// workspace and allocates it. The descriptors point at a zeroed placeholder until the first
// call, which binds the inputs and runs cusparse*_preprocess once (the executor's untimed
// warm-up); the trials then only point the output descriptor at the trial's buffer and call.
// Whether an algorithm takes a format, a transposition or a dtype is cuSPARSE's answer to those
// calls: a failed buffer-size or preprocessing call makes the case UNSUPPORTED, with cuSPARSE's
// status in the reason.
//
// `cusparse.<algorithm>_percall`, for each algorithm a config may claim deterministic (a vendor
// variant, with the algorithm's claim): the same call made another way the API allows,
// cusparse*_preprocess again before every call and the product into one buffer
// the variant owns (the same address in every trial), copied to the trial's output afterwards. The
// H200 audit saw CSR_ALG3 and the mixed-precision default diverge with the plain variants, which
// preprocess once and point the output descriptor at a new buffer each trial: the API allows that,
// but should the per-call form repeat where the plain one does not, the divergence comes from
// that pattern, not from the algorithm itself.
//
// Claims, from the cuSPARSE documentation (generic API, cusparseSpMV and cusparseSpMM):
//   - SpMV "provides deterministic (bit-wise) results for each run only for CUSPARSE_SPMV_COO_ALG2
//     and CUSPARSE_SPMV_CSR_ALG2 algorithms, and opA == CUSPARSE_OPERATION_NON_TRANSPOSE"; of
//     COO_ALG2 and CSR_ALG2: "If opA != CUSPARSE_OPERATION_NON_TRANSPOSE, it is identical to"
//     COO_ALG1 / CSR_ALG1, which "may produce slightly different results during different runs
//     with the same input parameters".
//   - SpMM gives deterministic results for each run only with COO_ALG2, CSR_ALG3 (and BSR_ALG1,
//     not a format here); COO_ALG2 is identical to COO_ALG1 when opA is not NON_TRANSPOSE, CSR_ALG3
//     takes only NON_TRANSPOSE, and "when using the (conjugate) transpose of the sparse matrix A,
//     this routine may produce slightly different results during different runs with the same
//     input parameters". Mixed-precision SpMM (16-bit data, CUDA_R_32F compute) on COO and CSR
//     "defaults to" COO_ALG2 and CSR_ALG3.
// So the documented paths claim `deterministic` and every other algorithm `nondeterministic`
// (not guaranteed); prepare() adjusts the claim for the config: with A^T a documented path is
// `nondeterministic`, on a matrix of the other format (should cuSPARSE take it) `unknown`, and
// SpMM's default algorithm in mixed precision with A is `deterministic`.
#include <cusparse.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/cuda_check.h"
#include "kernels/common/cusparse_util.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/sparse/sparse.h"

namespace d9m::sparse {
namespace {

enum class Routine { spmv, spmm };

struct Algorithm {
  const char* variant;  // after "cusparse."
  int value;            // cusparseSpMVAlg_t or cusparseSpMMAlg_t
  bool documented_deterministic;
  const char* doc;      // what the documentation says of it
  const char* format;   // the format the documentation describes it for ("csr", "coo"; null: any)
  // A config may claim it deterministic (the documented paths; SpMM's default in mixed
  // precision): it also gets a `_percall` control.
  bool may_claim_deterministic = false;
};

const char kMayDiffer[] = "may produce slightly different results during different runs with the same input parameters";

const Algorithm kSpmvAlgorithms[] = {
    {"spmv_default", CUSPARSE_SPMV_ALG_DEFAULT, false,
     "CUSPARSE_SPMV_ALG_DEFAULT ('default algorithm for any sparse matrix format'): not guaranteed, the docs promise "
     "bit-wise results only for CUSPARSE_SPMV_COO_ALG2 and CUSPARSE_SPMV_CSR_ALG2 with opA == "
     "CUSPARSE_OPERATION_NON_TRANSPOSE", nullptr},
    {"spmv_csr_alg1", CUSPARSE_SPMV_CSR_ALG1, false, "CUSPARSE_SPMV_CSR_ALG1: the docs say it 'may produce slightly different "
                                                     "results during different runs with the same input parameters'", "csr"},
    {"spmv_csr_alg2", CUSPARSE_SPMV_CSR_ALG2, true,
     "CUSPARSE_SPMV_CSR_ALG2: 'provides deterministic (bit-wise) results for each run' (opA == "
     "CUSPARSE_OPERATION_NON_TRANSPOSE)", "csr", true},
    {"spmv_coo_alg1", CUSPARSE_SPMV_COO_ALG1, false, "CUSPARSE_SPMV_COO_ALG1: the docs say it 'may produce slightly different "
                                                     "results during different runs with the same input parameters'", "coo"},
    {"spmv_coo_alg2", CUSPARSE_SPMV_COO_ALG2, true,
     "CUSPARSE_SPMV_COO_ALG2: 'provides deterministic (bit-wise) results for each run' (opA == "
     "CUSPARSE_OPERATION_NON_TRANSPOSE)", "coo", true},
};

const Algorithm kSpmmAlgorithms[] = {
    {"spmm_default", CUSPARSE_SPMM_ALG_DEFAULT, false,
     "CUSPARSE_SPMM_ALG_DEFAULT: not guaranteed, the docs promise bit-wise results for each run only for "
     "CUSPARSE_SPMM_COO_ALG2, CUSPARSE_SPMM_CSR_ALG3 and CUSPARSE_SPMM_BSR_ALG1", nullptr, true},
    {"spmm_csr_alg1", CUSPARSE_SPMM_CSR_ALG1, false,
     "CUSPARSE_SPMM_CSR_ALG1: not guaranteed, the docs say it may produce slightly different results in different runs", "csr"},
    {"spmm_csr_alg2", CUSPARSE_SPMM_CSR_ALG2, false,
     "CUSPARSE_SPMM_CSR_ALG2: not guaranteed, the docs say it may produce slightly different results in different runs", "csr"},
    {"spmm_csr_alg3", CUSPARSE_SPMM_CSR_ALG3, true,
     "CUSPARSE_SPMM_CSR_ALG3: documented deterministic, for CSR with opA == CUSPARSE_OPERATION_NON_TRANSPOSE only", "csr", true},
    {"spmm_coo_alg1", CUSPARSE_SPMM_COO_ALG1, false,
     "CUSPARSE_SPMM_COO_ALG1: not guaranteed, the docs say it may produce slightly different results in different runs", "coo"},
    {"spmm_coo_alg2", CUSPARSE_SPMM_COO_ALG2, true,
     "CUSPARSE_SPMM_COO_ALG2: documented deterministic ('it provides deterministic result'), with opA == "
     "CUSPARSE_OPERATION_NON_TRANSPOSE", "coo", true},
    {"spmm_coo_alg3", CUSPARSE_SPMM_COO_ALG3, false,
     "CUSPARSE_SPMM_COO_ALG3: not guaranteed, the docs say it may produce slightly different results in different runs", "coo"},
    {"spmm_coo_alg4", CUSPARSE_SPMM_COO_ALG4, false,
     "CUSPARSE_SPMM_COO_ALG4: not guaranteed, the docs say it may produce slightly different results in different runs", "coo"},
};

const char kPerCall[] = " (the per-call control: preprocessing before every call, one fixed output buffer copied out)";

Claim static_claim(const Algorithm& alg, bool per_call) {
  return {alg.documented_deterministic ? Determinism::deterministic : Determinism::nondeterministic, ClaimSource::vendor_doc,
          alg.doc + std::string(per_call ? kPerCall : "")};
}

// What the documentation says for this config, where it differs from the variant's own claim.
std::optional<Claim> config_claim(Routine routine, const Algorithm& alg, const Problem& p) {
  const auto& g = p.geom<Geometry>();
  const std::string doc = alg.doc;
  if (alg.documented_deterministic && g.transpose) {
    std::string why;
    if (routine == Routine::spmv)
      why = std::string("; but A^T here: 'If opA != CUSPARSE_OPERATION_NON_TRANSPOSE, it is identical to ") +
            (alg.value == CUSPARSE_SPMV_CSR_ALG2 ? "CUSPARSE_SPMV_CSR_ALG1" : "CUSPARSE_SPMV_COO_ALG1") + "', which '" +
            kMayDiffer + "'";
    else
      why = "; but A^T here: 'when using the (conjugate) transpose of the sparse matrix A, this routine " + std::string(kMayDiffer) +
            "'";
    return Claim{Determinism::nondeterministic, ClaimSource::vendor_doc, doc + why};
  }
  const char* format = g.format == Format::csr ? "csr" : "coo";
  if (alg.documented_deterministic && std::string(alg.format) != format)
    return Claim{Determinism::unknown, ClaimSource::vendor_doc,
                 doc + "; but the docs describe it for " + alg.format + " matrices and A is " + format + " here: they promise nothing"};
  const bool mixed = p.dtype == DType::f16 || p.dtype == DType::bf16;
  if (routine == Routine::spmm && alg.value == CUSPARSE_SPMM_ALG_DEFAULT && mixed && !g.transpose)
    return Claim{Determinism::deterministic, ClaimSource::vendor_doc,
                 std::string("CUSPARSE_SPMM_ALG_DEFAULT in mixed precision (16-bit data, CUDA_R_32F compute): the docs say "
                             "mixed-precision SpMM on COO and CSR 'defaults to' CUSPARSE_SPMM_COO_ALG2 and CUSPARSE_SPMM_CSR_ALG3, "
                             "the algorithms documented deterministic (opA == CUSPARSE_OPERATION_NON_TRANSPOSE)")};
  return std::nullopt;
}

cudaDataType data_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

struct State {
  Routine routine{};
  int alg = 0;
  bool per_call = false;  // preprocess before every call, into fixed_output
  cusparseHandle_t handle = nullptr;
  cusparseSpMatDescr_t a = nullptr;
  cusparseDnVecDescr_t x = nullptr, y = nullptr;
  cusparseDnMatDescr_t b = nullptr, c = nullptr;
  cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE, op_b = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cudaDataType compute = CUDA_R_32F;
  double alpha64 = 1, beta64 = 0;
  float alpha32 = 1, beta32 = 0;
  DeviceBuffer placeholder, workspace, fixed_output;
  std::vector<const void*> bound;  // the inputs the descriptors point at (empty: the placeholder)

  const void* alpha() const { return compute == CUDA_R_64F ? static_cast<const void*>(&alpha64) : &alpha32; }
  const void* beta() const { return compute == CUDA_R_64F ? static_cast<const void*>(&beta64) : &beta32; }

  ~State() {
    if (c) vendor::cusparse().cusparseDestroyDnMat(c);
    if (b) vendor::cusparse().cusparseDestroyDnMat(b);
    if (y) vendor::cusparse().cusparseDestroyDnVec(y);
    if (x) vendor::cusparse().cusparseDestroyDnVec(x);
    if (a) vendor::cusparse().cusparseDestroySpMat(a);
    if (handle) vendor::cusparse().cusparseDestroy(handle);
  }
};

Prepared prepare(Routine routine, const Algorithm& alg, bool per_call, const Problem& p, const ExecContext& exec) {
  const auto& g = p.geom<Geometry>();
  const cudaStream_t stream = static_cast<cudaStream_t>(exec.stream);
  auto st = std::make_shared<State>();
  st->routine = routine;
  st->alg = alg.value;
  st->per_call = per_call;
  st->op = g.transpose ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
  st->op_b = g.adjoint_b ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
  st->compute = p.dtype == DType::f64 ? CUDA_R_64F : CUDA_R_32F;
  const cudaDataType type = data_type(p.dtype);
  D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCreate(&st->handle));
  D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseSetStream(st->handle, stream));

  // One zeroed buffer as large as any operand stands in for all of them until the first call.
  std::size_t largest = p.output.bytes();
  for (const auto& in : p.inputs) largest = std::max(largest, in.bytes());
  st->placeholder = DeviceBuffer(std::max<std::size_t>(largest, 16), stream);
  D9M_CUDA_CHECK(cudaMemsetAsync(st->placeholder.get(), 0, st->placeholder.bytes(), stream));
  void* ph = st->placeholder.get();

  if (g.format == Format::csr)
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCreateCsr(&st->a, g.rows, g.cols, g.nnz, ph, ph, ph, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_BASE_ZERO, type));
  else
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCreateCoo(&st->a, g.rows, g.cols, g.nnz, ph, ph, ph, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_BASE_ZERO, type));
  std::size_t bytes = 0;
  if (routine == Routine::spmv) {
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCreateDnVec(&st->x, g.in_rows(), ph, type));
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCreateDnVec(&st->y, g.out_rows(), ph, type));
    D9M_CUSPARSE_ATTEMPT("cusparseSpMV_bufferSize",
                         vendor::cusparse().cusparseSpMV_bufferSize(st->handle, st->op, st->alpha(), st->a, st->x, st->beta(), st->y, st->compute,
                                                 static_cast<cusparseSpMVAlg_t>(alg.value), &bytes));
  } else {
    if (g.adjoint_b) D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCreateDnMat(&st->b, g.n, g.in_rows(), g.in_rows(), ph, type, CUSPARSE_ORDER_ROW));
    else D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCreateDnMat(&st->b, g.in_rows(), g.n, g.n, ph, type, CUSPARSE_ORDER_ROW));
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCreateDnMat(&st->c, g.out_rows(), g.n, g.n, ph, type, CUSPARSE_ORDER_ROW));
    D9M_CUSPARSE_ATTEMPT("cusparseSpMM_bufferSize",
                         vendor::cusparse().cusparseSpMM_bufferSize(st->handle, st->op, st->op_b, st->alpha(), st->a, st->b,
                                                 st->beta(), st->c, st->compute, static_cast<cusparseSpMMAlg_t>(alg.value),
                                                 &bytes));
  }
  st->workspace = DeviceBuffer(std::max<std::size_t>(bytes, 16), stream);
  if (per_call) st->fixed_output = DeviceBuffer(std::max<std::size_t>(p.output.bytes(), 16), stream);
  auto claim = config_claim(routine, alg, p);
  if (claim && per_call) claim->reason += kPerCall;
  return {st, claim};
}

// Points the descriptors at this call's inputs and `output`; the first time (and whenever the
// inputs move, or before every call of a per-call control), preprocessing runs for them: cuSPARSE
// analyses A's sparsity once for all the trials.
void bind(State& st, const KernelArgs& a, void* output) {
  if (st.bound == a.inputs && !st.per_call) return;
  auto in = [&](std::size_t i) { return const_cast<void*>(a.inputs[i]); };  // cuSPARSE reads them only
  if (a.problem.geom<Geometry>().format == Format::csr)
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCsrSetPointers(st.a, in(kRowsArg), in(kColsArg), in(kValuesArg)));
  else
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseCooSetPointers(st.a, in(kRowsArg), in(kColsArg), in(kValuesArg)));
  if (st.routine == Routine::spmv) {
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseDnVecSetValues(st.x, in(kDenseArg)));
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseDnVecSetValues(st.y, output));
    D9M_CUSPARSE_ATTEMPT("cusparseSpMV_preprocess",
                         vendor::cusparse().cusparseSpMV_preprocess(st.handle, st.op, st.alpha(), st.a, st.x, st.beta(), st.y, st.compute,
                                                 static_cast<cusparseSpMVAlg_t>(st.alg), st.workspace.get()));
  } else {
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseDnMatSetValues(st.b, in(kDenseArg)));
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseDnMatSetValues(st.c, output));
    D9M_CUSPARSE_ATTEMPT("cusparseSpMM_preprocess",
                         vendor::cusparse().cusparseSpMM_preprocess(st.handle, st.op, st.op_b, st.alpha(), st.a, st.b,
                                                 st.beta(), st.c, st.compute, static_cast<cusparseSpMMAlg_t>(st.alg),
                                                 st.workspace.get()));
  }
  st.bound = a.inputs;
}

void run(const KernelArgs& a) {
  auto& st = *static_cast<State*>(a.state);
  const cudaStream_t stream = cuda::stream_of(a);
  D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseSetStream(st.handle, stream));
  void* const output = st.per_call ? st.fixed_output.get() : a.output;
  bind(st, a, output);
  if (st.routine == Routine::spmv) {
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseDnVecSetValues(st.y, output));
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseSpMV(st.handle, st.op, st.alpha(), st.a, st.x, st.beta(), st.y, st.compute,
                                    static_cast<cusparseSpMVAlg_t>(st.alg), st.workspace.get()));
  } else {
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseDnMatSetValues(st.c, output));
    D9M_CUSPARSE_CHECK(vendor::cusparse().cusparseSpMM(st.handle, st.op, st.op_b, st.alpha(), st.a, st.b, st.beta(), st.c,
                                    st.compute, static_cast<cusparseSpMMAlg_t>(st.alg), st.workspace.get()));
  }
  if (st.per_call)
    D9M_CUDA_CHECK(cudaMemcpyAsync(a.output, output, a.problem.output.bytes(), cudaMemcpyDeviceToDevice, stream));
}

template <std::size_t N>
std::vector<VariantDef> variants(const std::string& op, Routine routine, const Algorithm (&algorithms)[N]) {
  std::vector<VariantDef> out;
  for (const Algorithm& alg : algorithms)
    for (bool per_call : {false, true}) {
      if (per_call && !alg.may_claim_deterministic) continue;
      out.push_back({.op = op, .name = std::string("cusparse.") + alg.variant + (per_call ? "_percall" : ""),
                     .backend = Backend::cuda, .role = Role::vendor, .claim = static_claim(alg, per_call), .run = run,
                     .prepare = [routine, &alg, per_call](const Problem& p, const ExecContext& e) {
                       return prepare(routine, alg, per_call, p, e);
                     }});
    }
  return out;
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("spmv", Routine::spmv, kSpmvAlgorithms));
D9M_REGISTER_VARIANTS(variants("spmm", Routine::spmm, kSpmmAlgorithms));
D9M_REGISTER_VARIANTS(variants("sparse_dense_matmul", Routine::spmm, kSpmmAlgorithms));

}  // namespace d9m::sparse
