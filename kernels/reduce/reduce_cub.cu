// CUB variants of the reduce family, compiled against the pinned CCCL 3.3 headers (the toolkit's
// CCCL 3.0 predates the determinism levels; kernels/CMakeLists.txt gives this file alone the
// newer headers). Per op:
//   cub.default         the two-phase call the frameworks make, no environment: CUB's default level
//                       (DeviceReduce and DeviceSegmentedReduce run_to_run, DeviceScan not_guaranteed).
//   cub.not_guaranteed  the single-phase call with an environment that requires
//   cub.run_to_run      cuda::execution::determinism::<level>, the case's stream, and a memory
//   cub.gpu_to_gpu      resource handing out the workspace sized and allocated in prepare().
// Where CCCL 3.3 refuses a level for an algorithm, it does so at compile time (static_assert), so
// the variant is UNSUPPORTED with the assertion's words; suites/cub/ checks that the headers
// still refuse. CCCL 3.3 has no environment overload of InclusiveSum (suites/cub/ checks that too,
// so a CCCL that adds one says so): cumsum's environment call is ExclusiveSum over N+1 items (the
// input padded with a zero), out[i] = exclusive[i+1].
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda/__execution/determinism.h>
#include <cuda/__execution/require.h>
#include <cuda/__iterator/counting_iterator.h>
#include <cuda/__iterator/tabulate_output_iterator.h>
#include <cuda/__iterator/transform_iterator.h>
#include <cuda/__memory_resource/get_memory_resource.h>
#include <cuda/__stream/get_stream.h>
#include <cuda/std/__execution/env.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "kernels/common/cuda_check.h"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/reduce/cccl_version.h"
#include "kernels/reduce/reduce.h"

namespace d9m::reduce {

int cccl_version_of_cub_variants() { return CCCL_VERSION; }

// A memory resource over one workspace allocated in prepare(): every request is served from it,
// so a trial allocates nothing. With no workspace it only records the size asked for and refuses
// (CUB then returns cudaErrorMemoryAllocation before launching anything): that is how prepare()
// learns the size from the single-phase call, which has no size query of its own. (Outside the
// anonymous namespace: there, members that only the resource concept names warn as unreferenced.)
struct Workspace {
  void* base = nullptr;
  std::size_t capacity = 0;
  std::size_t* requested = nullptr;

  void* allocate(::cuda::stream_ref, std::size_t bytes, std::size_t = alignof(std::max_align_t)) {
    if (requested) *requested = bytes;
    if (!base || bytes > capacity) throw std::bad_alloc();
    return base;
  }
  void deallocate(::cuda::stream_ref, void*, std::size_t, std::size_t = alignof(std::max_align_t)) noexcept {}
  // CUB allocates stream-ordered only; a synchronous request would mean a changed contract.
  void* allocate_sync(std::size_t, std::size_t) { throw std::bad_alloc(); }
  void deallocate_sync(void*, std::size_t, std::size_t) noexcept {}
  bool operator==(const Workspace& o) const { return base == o.base && capacity == o.capacity && requested == o.requested; }
  bool operator!=(const Workspace& o) const { return !(*this == o); }
};
static_assert(::cuda::mr::resource<Workspace>);

namespace {

namespace det = ::cuda::execution::determinism;

template <class Level>
auto environment(cudaStream_t s, Workspace w, Level level) {
  using ::cuda::std::execution::prop;
  return ::cuda::std::execution::env{prop{::cuda::get_stream_t{}, ::cuda::stream_ref{s}},
                                     prop{::cuda::mr::get_memory_resource_t{}, w}, ::cuda::execution::require(level)};
}

int as_int(std::int64_t v, const char* what) {
  if (v >= INT_MAX) throw Unsupported(std::string("CUB is called with int sizes: ") + what + " does not fit");
  return static_cast<int>(v);
}

// ---- the calls, each in its two forms ---------------------------------------------------------

// Each call is made from the case: the config's sizes and, in a trial, its pointers (prepare()
// passes none: CUB's size queries read no data).
template <class T>
struct SumCall {
  const T* x;
  T* out;
  int n;
  static SumCall of(const Problem& p, const KernelArgs* a) {
    return {a ? a->in<T>(0) : nullptr, a ? a->out<T>() : nullptr, as_int(p.geom<Geometry>().n, "N")};
  }
  cudaError_t operator()(void* temp, std::size_t& bytes, cudaStream_t s) const {
    return cub::DeviceReduce::Sum(temp, bytes, x, out, n, s);
  }
  template <class Env>
  cudaError_t operator()(Env env) const {
    return cub::DeviceReduce::Sum(x, out, n, env);
  }
};

// x padded with one zero, and the exclusive sums shifted down by one: exclusive[i+1] is the
// inclusive sum of x[0..i].
template <class T>
struct PaddedInput {
  const T* x;
  int n;
  __host__ __device__ T operator()(int i) const { return i < n ? x[i] : T(0); }
};
template <class T>
struct ShiftedOutput {
  T* out;
  __host__ __device__ void operator()(int i, T v) const {
    if (i > 0) out[i - 1] = v;
  }
};

template <class T>
struct ScanCall {
  const T* x;
  T* out;
  int n;
  static ScanCall of(const Problem& p, const KernelArgs* a) {
    return {a ? a->in<T>(0) : nullptr, a ? a->out<T>() : nullptr, as_int(p.geom<Geometry>().n, "N")};
  }
  cudaError_t operator()(void* temp, std::size_t& bytes, cudaStream_t s) const {
    return cub::DeviceScan::InclusiveSum(temp, bytes, x, out, n, s);
  }
  template <class Env>
  cudaError_t operator()(Env env) const {
    auto in = ::cuda::transform_iterator(::cuda::counting_iterator<int>(0), PaddedInput<T>{x, n});
    return cub::DeviceScan::ExclusiveSum(in, ::cuda::tabulate_output_iterator(ShiftedOutput<T>{out}), n + 1, env);
  }
};

template <class T>
struct SegmentsCall {
  const T* x;
  const std::int32_t* offsets;
  T* out;
  std::int64_t segments;
  static SegmentsCall of(const Problem& p, const KernelArgs* a) {
    (void)as_int(p.geom<Geometry>().n, "N");
    return {a ? a->in<T>(0) : nullptr, a ? a->in<std::int32_t>(1) : nullptr, a ? a->out<T>() : nullptr,
            p.geom<Geometry>().segments};
  }
  cudaError_t operator()(void* temp, std::size_t& bytes, cudaStream_t s) const {
    return cub::DeviceSegmentedReduce::Sum(temp, bytes, x, out, segments, offsets, offsets + 1, s);
  }
  template <class Env>
  cudaError_t operator()(Env env) const {
    return cub::DeviceSegmentedReduce::Sum(x, out, segments, offsets, offsets + 1, env);
  }
};

// ---- prepare and run ------------------------------------------------------------------------

struct State {
  DeviceBuffer workspace;
  std::size_t bytes = 0;
};

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw_cuda(e, call, __FILE__, __LINE__);
}

// Level: det::not_guaranteed_t, run_to_run_t, gpu_to_gpu_t, or void for the two-phase call.
template <template <class> class Call, class T, class Level>
Prepared prepare_typed(const Problem& p, const ExecContext& exec) {
  const auto s = static_cast<cudaStream_t>(exec.stream);
  auto st = std::make_shared<State>();
  const auto call = Call<T>::of(p, nullptr);
  if constexpr (std::is_void_v<Level>) {
    check(call(nullptr, st->bytes, s), "the two-phase call's size query");
  } else {
    std::size_t requested = SIZE_MAX;
    const cudaError_t e = call(environment(s, Workspace{nullptr, 0, &requested}, Level{}));
    if (requested == SIZE_MAX) check(e == cudaSuccess ? cudaErrorUnknown : e, "the single-phase call's size query");
    st->bytes = requested;
  }
  // Never empty: a null workspace would make CUB's two-phase call a size query.
  st->workspace = DeviceBuffer(std::max<std::size_t>(st->bytes, 256), s);
  return {st, std::nullopt};
}

template <template <class> class Call, class T, class Level>
void run_typed(const KernelArgs& a) {
  auto& st = *static_cast<State*>(a.state);
  const cudaStream_t s = cuda::stream_of(a);
  const auto call = Call<T>::of(a.problem, &a);
  if constexpr (std::is_void_v<Level>) {
    std::size_t bytes = st.bytes;
    check(call(st.workspace.get(), bytes, s), "the two-phase call");
  } else {
    check(call(environment(s, Workspace{st.workspace.get(), st.workspace.bytes(), nullptr}, Level{})),
          "the single-phase call (cudaErrorMemoryAllocation: it asked for more than prepare() was told)");
  }
}

template <template <class> class Call, class Level>
VariantDef cub_variant(const std::string& op, const std::string& name, Claim claim) {
  return {.op = op, .name = name, .backend = Backend::cuda, .role = Role::vendor, .claim = std::move(claim),
          .run = [](const KernelArgs& a) {
            if (a.problem.dtype == DType::f64) run_typed<Call, double, Level>(a);
            else run_typed<Call, float, Level>(a);
          },
          .prepare = [](const Problem& p, const ExecContext& e) {
            return p.dtype == DType::f64 ? prepare_typed<Call, double, Level>(p, e) : prepare_typed<Call, float, Level>(p, e);
          }};
}

// A level CCCL 3.3 refuses for the algorithm at compile time: registered so the table shows U
// with the library's own words, never run (no call is compiled for it).
VariantDef refused(const std::string& op, const std::string& name, const std::string& why) {
  return {.op = op, .name = name, .backend = Backend::cuda, .role = Role::vendor,
          .claim = {Determinism::unknown, ClaimSource::vendor_api, why},
          .unsupported = [why](const Problem&) { return std::optional<std::string>(why); },
          .run = [why](const KernelArgs&) { throw Unsupported(why); }};
}

Claim vendor(Determinism d, std::string reason) { return {d, ClaimSource::vendor_doc, std::move(reason)}; }

const std::string kRunToRun =
    "determinism::run_to_run: CCCL documents bitwise-identical results across runs on the same GPU (same input, build "
    "and launch configuration)";

std::vector<VariantDef> variants() {
  std::vector<VariantDef> v;
  // DeviceReduce: every level is offered for float and double sums.
  v.push_back(cub_variant<SumCall, void>("reduce_sum", "cub.default",
                            vendor(Determinism::deterministic,
                                   "two-phase cub::DeviceReduce::Sum, no environment: CUB documents run-to-run determinism "
                                   "on the same GPU (DeviceReduce's default level, run_to_run)")));
  v.push_back(cub_variant<SumCall, det::not_guaranteed_t>(
      "reduce_sum", "cub.not_guaranteed",
      vendor(Determinism::nondeterministic,
             "determinism::not_guaranteed: CCCL documents a single-pass reduction that adds block partials with atomics, "
             "whose result varies from run to run (CCCL 3.1 release notes)")));
  v.push_back(cub_variant<SumCall, det::run_to_run_t>("reduce_sum", "cub.run_to_run", vendor(Determinism::deterministic, kRunToRun)));
  v.push_back(cub_variant<SumCall, det::gpu_to_gpu_t>(
      "reduce_sum", "cub.gpu_to_gpu",
      vendor(Determinism::deterministic,
             "determinism::gpu_to_gpu: CCCL documents the same bits on every GPU architecture for float and double sums "
             "(a reproducible floating-point accumulator); a cross-GPU claim: one GPU shows its run-to-run part, "
             "comparing stacks (d9m diff) the rest")));
  // DeviceScan: not_guaranteed only for float sums.
  v.push_back(cub_variant<ScanCall, void>(
      "cumsum", "cub.default",
      vendor(Determinism::unknown,
             "two-phase cub::DeviceScan::InclusiveSum, no environment: DeviceScan's documented default is not_guaranteed "
             "(its decoupled look-back may associate tile prefixes differently from run to run); PyTorch refuses CUDA float "
             "cumsum in deterministic mode (pytorch#75240), cupy.cumsum gave 3 results in 1000 runs (cupy#8350)")));
  v.push_back(cub_variant<ScanCall, det::not_guaranteed_t>(
      "cumsum", "cub.not_guaranteed",
      vendor(Determinism::unknown,
             "determinism::not_guaranteed (DeviceScan's default): no reproducibility promised. CCCL 3.3 has no environment "
             "overload of InclusiveSum: this is ExclusiveSum over N+1 items, out[i] = exclusive[i+1]")));
  const std::string scan_refusal =
      "CCCL 3.3 refuses it at compile time: DeviceScan's environment API static_asserts \"run_to_run or gpu_to_gpu is only "
      "supported for integral types with known operators\" (float and double sums are not; CCCL's support matrix: partial)";
  v.push_back(refused("cumsum", "cub.run_to_run", scan_refusal));
  v.push_back(refused("cumsum", "cub.gpu_to_gpu", scan_refusal));
  // DeviceSegmentedReduce: no gpu_to_gpu.
  v.push_back(cub_variant<SegmentsCall, void>("segmented_reduce", "cub.default",
                            vendor(Determinism::deterministic,
                                   "two-phase cub::DeviceSegmentedReduce::Sum, no environment: CUB documents run-to-run "
                                   "determinism (DeviceSegmentedReduce's default level, run_to_run)")));
  v.push_back(cub_variant<SegmentsCall, det::not_guaranteed_t>(
      "segmented_reduce", "cub.not_guaranteed",
      vendor(Determinism::unknown,
             "determinism::not_guaranteed: no reproducibility promised. CCCL 3.3's DeviceSegmentedReduce::Sum reads the "
             "requirement only to refuse gpu_to_gpu and runs its one (run_to_run) algorithm, so one digest is expected")));
  v.push_back(cub_variant<SegmentsCall, det::run_to_run_t>("segmented_reduce", "cub.run_to_run", vendor(Determinism::deterministic, kRunToRun)));
  v.push_back(refused("segmented_reduce", "cub.gpu_to_gpu",
                      "CCCL 3.3 refuses it at compile time: DeviceSegmentedReduce::Sum static_asserts \"gpu_to_gpu "
                      "determinism is not supported for device segmented reductions\" (CCCL's support matrix: no)"));
  return v;
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::reduce
