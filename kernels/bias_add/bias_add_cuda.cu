// CUDA variants of the bias_add family.
#include "kernels/bias_add/bias_add.h"

#include <algorithm>
#include <memory>
#include <string>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"

namespace d9m::bias_add {
namespace {

template <class T>
void forward_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const T* value = a.in<T>(0);
  const T* bias = a.in<T>(1);
  T* out = a.out<T>();
  const std::int64_t c = g.channels;
  cuda::for_each_index(a, static_cast<std::size_t>(g.rows * c),
                       [=] __device__(std::size_t i) { out[i] = add(value[i], bias[static_cast<std::int64_t>(i) % c]); });
}

template <class T>
void forward_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const auto n = static_cast<std::size_t>(g.rows * g.channels);
  T* out = a.out<T>();
  const T negative_zero = from_float<T>(-0.0f);
  cuda::for_each_index(a, n, [=] __device__(std::size_t i) { out[i] = negative_zero; });
  accumulate::cuda::atomic(cuda::stream_of(a), 2 * n, out, BiasSplat<T>{n, g.channels, a.in<T>(0), a.in<T>(1)});
}

template <class T>
void grad_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  cuda::zero_output(a);
  accumulate::cuda::atomic(cuda::stream_of(a), static_cast<std::size_t>(g.rows), a.out<T>(),
                           GradRows<T>{g.channels, a.in<T>(0)});
}

// The order of cpu.ordered: one thread per (block of kRowsPerBlock rows, channel) sums its rows
// in order from 0; then one thread per channel sums the block partials in order from 0.
template <class T>
void grad_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const std::int64_t c = g.channels, rows = g.rows, blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  DeviceBuffer partial(static_cast<std::size_t>(blocks * c) * sizeof(T), cuda::stream_of(a));
  T* p = partial.get<T>();
  const T* dy = a.in<T>(0);
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(blocks * c), [=] __device__(std::size_t i) {
    const std::int64_t b = static_cast<std::int64_t>(i) / c, k = static_cast<std::int64_t>(i) % c;
    const std::int64_t end = (b + 1) * kRowsPerBlock < rows ? (b + 1) * kRowsPerBlock : rows;
    T acc{};
    for (std::int64_t r = b * kRowsPerBlock; r < end; ++r) acc = add(acc, dy[r * c + k]);
    p[i] = acc;
  });
  cuda::for_each_index(a, static_cast<std::size_t>(c), [=] __device__(std::size_t k) {
    T acc{};
    for (std::int64_t b = 0; b < blocks; ++b) acc = add(acc, p[b * c + static_cast<std::int64_t>(k)]);
    out[k] = acc;
  });
}

// TensorFlow's custom GPU kernel for this op, BiasGradNHWC_SharedAtomics (tensorflow/core/kernels/
// bias_op_gpu.cu.cc): for NHWC where C accumulators fit in half a block's shared memory (every
// catalogued config), it is one of the two forms TF's BiasAddGrad times and picks between, the
// other a CUB column reduction (bias_op.cc: the first call of each shape times both and keeps the
// faster). A grid of 1024-thread blocks, one per SM at most (TF's GetGpuLaunchConfig), strides over
// the elements with 32-bit indices; each block adds its elements into C accumulators in shared
// memory with shared-memory atomics, then adds each accumulator, rounded once to T, into the
// output with one global atomicAdd in T. Both stages race. The accumulators are Acc<T>, f32 at
// f16 and bf16 (TF's AccumulatorType). Why it matters at model shapes: at 16 bits a global
// atomicAdd is a compare-and-swap loop on sm_90 (the SASS of accumulate_cuda.cuh's atomic_add),
// which cuda.atomic pays once per element and this kernel once per block and channel.
template <class T, class Index>
__global__ void grad_shared_atomic_kernel(Index n, Index c, const T* dy, T* out) {
  extern __shared__ __align__(8) unsigned char shared_bytes[];
  auto* acc = reinterpret_cast<Acc<T>*>(shared_bytes);
  for (Index k = threadIdx.x; k < c; k += blockDim.x) acc[k] = Acc<T>(0);
  __syncthreads();
  const Index stride = static_cast<Index>(blockDim.x) * static_cast<Index>(gridDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x); i < n; i += stride)
    atomicAdd(acc + i % c, widen(dy[i]));
  __syncthreads();
  for (Index k = threadIdx.x; k < c; k += blockDim.x) accumulate::cuda::atomic_add(out + k, narrow<T>(acc[k]));
}

constexpr unsigned kSharedAtomicThreads = 1024;

struct SharedAtomicLaunch {
  unsigned blocks = 1;
  std::size_t shared_bytes = 0;
};

// TF's launch: min(ceil(min(elements, SMs x threads per SM) / 1024), SMs) blocks; and its
// condition for this kernel, C accumulators within half the shared memory of a block (TF takes its
// naive per-element kernel beyond, which cuda.atomic stands for).
Prepared prepare_shared_atomic(const Problem& p) {
  const auto& g = p.geom<Geometry>();
  const std::size_t acc_bytes = p.output.dtype == DType::f64 ? 8 : 4;
  int device = 0, sms = 0, threads_per_sm = 0, shared_per_block = 0;
  D9M_CUDA_CHECK(cudaGetDevice(&device));
  D9M_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  D9M_CUDA_CHECK(cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  D9M_CUDA_CHECK(cudaDeviceGetAttribute(&shared_per_block, cudaDevAttrMaxSharedMemoryPerBlock, device));
  auto launch = std::make_shared<SharedAtomicLaunch>();
  launch->shared_bytes = static_cast<std::size_t>(g.channels) * acc_bytes;
  if (launch->shared_bytes > static_cast<std::size_t>(shared_per_block) / 2)
    throw Unsupported(std::to_string(g.channels) + " channel accumulators take " + std::to_string(launch->shared_bytes) +
                      " bytes of shared memory, more than half of a block's " + std::to_string(shared_per_block) +
                      ": TensorFlow runs its per-element kernel there (cuda.atomic)");
  const std::int64_t physical = std::min(g.rows * g.channels, std::int64_t{sms} * threads_per_sm);
  launch->blocks = static_cast<unsigned>(
      std::clamp<std::int64_t>((physical + kSharedAtomicThreads - 1) / kSharedAtomicThreads, 1, std::max(sms, 1)));
  return Prepared{launch, std::nullopt};
}

template <class T>
void grad_shared_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const auto& launch = *static_cast<const SharedAtomicLaunch*>(a.state);
  cuda::zero_output(a);
  const std::int64_t n = g.rows * g.channels;
  if (n == 0) return;
  const auto s = cuda::stream_of(a);
  // TF indexes with int32 (its op refuses larger tensors); d9m takes 64 bits only where it must.
  if (n < (std::int64_t{1} << 31))
    grad_shared_atomic_kernel<T, std::int32_t><<<launch.blocks, kSharedAtomicThreads, launch.shared_bytes, s>>>(
        static_cast<std::int32_t>(n), static_cast<std::int32_t>(g.channels), a.in<T>(0), a.out<T>());
  else
    grad_shared_atomic_kernel<T, std::int64_t><<<launch.blocks, kSharedAtomicThreads, launch.shared_bytes, s>>>(
        n, g.channels, a.in<T>(0), a.out<T>());
  D9M_CUDA_CHECK_LAUNCH();
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = typed([](const KernelArgs& a, auto tag) { forward_ordered<decltype(tag)>(a); }), .bit_equal_to = "cpu.ordered"}});
D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
                       .claim = op::deterministic("two atomicAdds per output onto -0 commute"), .run = typed([](const KernelArgs& a, auto tag) { forward_atomic<decltype(tag)>(a); })}});
// (No bit_equal_to claim: atom.add.f32 flushes subnormals to zero, so on subnormal inputs its
// bits can differ from the CPU's, deterministically.)
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
                       .claim = op::nondeterministic("float atomicAdd of every row into the channel sums, in hardware order"),
                       .run = typed([](const KernelArgs& a, auto tag) { grad_atomic<decltype(tag)>(a); })}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cuda.shared_atomic", .backend = Backend::cuda, .role = Role::atomic,
                       .claim = op::nondeterministic("TensorFlow's custom kernel, BiasGradNHWC_SharedAtomics: per-block channel sums by "
                                                     "shared-memory atomicAdd, then one global atomicAdd per block and channel, "
                                                     "both in hardware order"),
                       .run = typed([](const KernelArgs& a, auto tag) { grad_shared_atomic<decltype(tag)>(a); }),
                       .prepare = [](const Problem& p, const ExecContext&) { return prepare_shared_atomic(p); }}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::deterministic("blocks of 256 rows summed in order, then block sums in order (two passes)"),
                       .run = typed([](const KernelArgs& a, auto tag) { grad_ordered<decltype(tag)>(a); }), .bit_equal_to = "cpu.ordered"}});

}  // namespace d9m::bias_add
