// CUDA variants of ctc_loss_bwd (ctc.h), with the CPU variants' arithmetic (the same D9M_HD
// functions):
//   cuda.atomic   the rows initialised by a thread per (t, n), then PyTorch's
//                 ctc_loss_backward_collect_nonblank_gpu_kernel: a thread per (n, j) walking t and
//                 adding its label term with atomicAdd, in PyTorch's block shape.
//   cuda.ordered  a thread per (t, n) row writes its base values, then adds its label terms in
//                 ascending j (the decomposition of PyTorch's small-problem kernel): cpu.serial's
//                 bits.
// Both first run the recursions with a block per sequence, threads over the states and a barrier
// per step, as LossCTC.cu's alpha and beta kernels do.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/ctc/ctc.h"

namespace d9m::ctc {
namespace {

template <class T>
__global__ void lattice_kernel(Inputs<T> in, Lattice<T> lat) {
  const std::int64_t n = blockIdx.x;
  const std::int64_t steps = in.length(n), states = 2 * in.target_length(n) + 1;
  for (std::int64_t t = 0; t < steps; ++t) {
    for (std::int64_t s = threadIdx.x; s < states; s += blockDim.x)
      lat.alpha[state_at<T>(in.g, n, t, s)] = alpha_state(in, lat.alpha, n, t, s);
    __syncthreads();
  }
  for (std::int64_t t = steps - 1; t >= 0; --t) {
    for (std::int64_t s = threadIdx.x; s < states; s += blockDim.x)
      lat.beta[state_at<T>(in.g, n, t, s)] = beta_state(in, lat.beta, n, t, s);
    __syncthreads();
  }
  if (threadIdx.x == 0) lat.nll[n] = nll_of(in, lat.alpha, n);
}

template <class T>
__global__ void rows_kernel(Inputs<T> in, Lattice<T> lat, bool gather, T* out) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= in.g.time * in.g.batch) return;
  if (gather) gather_row(in, lat, r % in.g.batch, r / in.g.batch, out);
  else init_row(in, lat, r % in.g.batch, r / in.g.batch, out);
}

// Thread (j, n) of PyTorch's nonblank kernel: threadIdx.x + blockIdx.x blockDim.x indexes the
// target position, threadIdx.y + blockIdx.y blockDim.y the sequence.
template <class T>
__global__ void label_terms_kernel(LabelTerms<T> terms, T* out) {
  const std::int64_t n = threadIdx.y + blockIdx.y * static_cast<std::int64_t>(blockDim.y);
  const std::int64_t j = threadIdx.x + blockIdx.x * static_cast<std::int64_t>(blockDim.x);
  if (n >= terms.in.g.batch || j >= terms.in.g.max_target) return;
  accumulate::cuda::AtomicEmit<T> emit{out};
  terms(static_cast<std::size_t>(n * terms.in.g.max_target + j), emit);
}

// PyTorch's launch shape for the nonblank kernel: max_threads (1024 for float, 896 for double)
// halved while half still covers the target length, the rest of the block over sequences.
struct Shape {
  dim3 grid, block;
};

Shape label_terms_shape(const Geometry& g, bool wide) {
  const std::int64_t max_threads = wide ? 896 : 1024;
  std::int64_t threads_target = max_threads;
  while (threads_target / 2 >= g.max_target && threads_target > 1) threads_target /= 2;
  const std::int64_t threads_batch = std::min(max_threads / threads_target, g.batch);
  return {dim3(static_cast<unsigned>(std::max<std::int64_t>((g.max_target + threads_target - 1) / threads_target, 1)),
               static_cast<unsigned>((g.batch + threads_batch - 1) / threads_batch)),
          dim3(static_cast<unsigned>(threads_target), static_cast<unsigned>(threads_batch))};
}

// Threads of the recursion kernel: the smallest power of two from 32 up that covers the states,
// at most 1024 (more states loop).
unsigned lattice_threads(const Geometry& g) {
  unsigned threads = 32;
  while (threads < 1024 && threads < static_cast<std::uint64_t>(g.states())) threads *= 2;
  return threads;
}

template <class T>
void run(const KernelArgs& a, bool atomic) {
  const auto& g = a.problem.geom<Geometry>();
  const cudaStream_t s = cuda::stream_of(a);
  const Inputs<T> in{g, a.in<T>(0), a.in<std::int32_t>(1), a.in<std::int32_t>(2), a.in<std::int32_t>(3), a.in<T>(4)};
  const auto lattice_bytes = static_cast<std::size_t>(g.batch * g.time * g.states()) * sizeof(T);
  DeviceBuffer alpha(lattice_bytes, s), beta(lattice_bytes, s), nll(static_cast<std::size_t>(g.batch) * sizeof(T), s);
  const Lattice<T> lat{alpha.get<T>(), beta.get<T>(), nll.get<T>()};
  lattice_kernel<T><<<static_cast<unsigned>(g.batch), lattice_threads(g), 0, s>>>(in, lat);
  D9M_CUDA_CHECK_LAUNCH();
  const auto rows = static_cast<std::size_t>(g.time * g.batch);
  rows_kernel<T><<<blocks_for(rows), 256, 0, s>>>(in, lat, !atomic, a.out<T>());
  D9M_CUDA_CHECK_LAUNCH();
  if (!atomic) return;
  const Shape shape = label_terms_shape(g, sizeof(T) == 8);
  label_terms_kernel<T><<<shape.grid, shape.block, 0, s>>>(LabelTerms<T>{in, lat}, a.out<T>());
  D9M_CUDA_CHECK_LAUNCH();
}

void dispatch(const KernelArgs& a, bool atomic) {
  if (a.problem.dtype == DType::f64) run<double>(a, atomic);
  else run<float>(a, atomic);
}

std::optional<std::string> launch_limits(const Problem& p) {
  const auto& g = p.geom<Geometry>();
  if (g.batch > 2147483647) return std::string("more than 2^31 - 1 sequences: one block each");
  if (label_terms_shape(g, p.dtype == DType::f64).grid.y > 65535) return std::string("more than 65535 blocks of sequences");
  return std::nullopt;
}

std::vector<VariantDef> variants() {
  const char* op = "ctc_loss_bwd";
  return {{.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic("a thread per (sequence, target position) adds its label terms with atomicAdd in "
                                         "hardware scheduling order (PyTorch's ctc_loss_backward_collect_nonblank_gpu_kernel)"),
           .unsupported = launch_limits, .run = [](const KernelArgs& a) { dispatch(a, true); }},
          {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("a thread per (t, n) row adds its label terms in ascending target position "
                                      "(bit-equal to cpu.serial)"),
           .unsupported = launch_limits, .run = [](const KernelArgs& a) { dispatch(a, false); }, .bit_equal_to = "cpu.serial",
           .invariance = op::deterministic("every recursion and every row reads one sequence only: no row sees the batch")}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::ctc
