// CUDA variants of the loss family (loss.h): PyTorch's kernels. [N, C]: nll_loss's one block of
// 32 threads (cuda.ordered), or a thread per example adding with atomicAdd (cuda.atomic, d9m's).
// [N, C, H, W]: nll_loss2d's blocks of 1024 threads and BlockReduceSum, the block sums added with
// atomicAdd in T (cuda.atomic, PyTorch's kernel) or kept apart and added in block order
// (cuda.ordered).
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/loss/loss.h"

namespace d9m::loss {
namespace {

// block_reduce.cuh's WarpReduceSum and BlockReduceSum (1-D blocks of kBlockThreads).
template <class A>
__device__ A warp_reduce_sum(A v) {
  for (int h = kWarp / 2; h > 0; h >>= 1) v = v + __shfl_down_sync(0xffffffffu, v, h);
  return v;
}

template <class A>
__device__ A block_reduce_sum(A v, A* shared) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  v = warp_reduce_sum(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = static_cast<int>(threadIdx.x) < kBlockThreads / kWarp ? shared[lane] : A(0);
  if (warp == 0) v = warp_reduce_sum(v);
  return v;
}

// nll_loss_forward_reduce_cuda_kernel_2d: one block of kLanes2d threads.
template <class T>
__global__ void lanes_kernel(Terms<T> terms, T* out) {
  using A = Acc<T>;
  __shared__ A loss[kLanes2d], weight[kLanes2d];
  const Partial<A> mine = lane_partial(terms, static_cast<int>(threadIdx.x));
  loss[threadIdx.x] = mine.loss;
  weight[threadIdx.x] = mine.weight;
  __syncthreads();
  if (threadIdx.x != 0) return;
  Partial<A> total;
  for (int l = 0; l < kLanes2d; ++l) {
    total.loss = total.loss + loss[l];
    total.weight = total.weight + weight[l];
  }
  *out = finish_2d<T>(terms.g.reduction, total);
}

// d9m's atomic [N, C] shape: a thread per example.
template <class T>
__global__ void examples_atomic_kernel(Terms<T> terms, Acc<T>* total) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= terms.g.n || !terms.counts(i)) return;
  accumulate::cuda::atomic_add(total, Acc<T>(0) - widen(terms.product(i)));
  accumulate::cuda::atomic_add(total + 1, widen(terms.class_weight(terms.target[i])));
}

template <class T>
__global__ void finish_2d_kernel(Reduction r, const Acc<T>* total, T* out) {
  *out = finish_2d<T>(r, Partial<Acc<T>>{total[0], total[1]});
}

// nll_loss2d_forward_kernel: block b's two sums, rounded to T, added into sums[0..1] with
// atomicAdd (atomic) or written to sums[2b], sums[2b + 1] (ordered).
template <class T>
__global__ void __launch_bounds__(kBlockThreads) blocks_kernel(Terms<T> terms, T* sums, bool atomic) {
  using A = Acc<T>;
  __shared__ A weight_smem[kBlockThreads / kWarp], loss_smem[kBlockThreads / kWarp];
  const Partial<A> mine = thread_partial(terms, blockIdx.x, static_cast<int>(threadIdx.x));
  const A weight = block_reduce_sum(mine.weight, weight_smem);
  const A loss = block_reduce_sum(mine.loss, loss_smem);
  if (threadIdx.x != 0) return;
  if (atomic) {
    accumulate::cuda::atomic_add(sums + 1, narrow<T>(weight));
    accumulate::cuda::atomic_add(sums, narrow<T>(loss));
  } else {
    sums[2 * blockIdx.x] = narrow<T>(loss);
    sums[2 * blockIdx.x + 1] = narrow<T>(weight);
  }
}

// The finish of either spatial variant: block sums added in block order (ordered, `blocks` pairs)
// or the atomically accumulated pair (blocks = 1), then nll_loss2d_forward_size_average_kernel.
template <class T>
__global__ void finish_spatial_kernel(Reduction r, const T* sums, std::int64_t blocks, T* out) {
  Sums<T> total;
  for (std::int64_t b = 0; b < blocks; ++b) {
    total.loss = add(total.loss, sums[2 * b]);
    total.weight = add(total.weight, sums[2 * b + 1]);
  }
  *out = finish_spatial(r, total.loss, total.weight);
}

template <class T>
__global__ void gather_kernel(Terms<T> terms, T* gathered) {
  const std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (p >= terms.g.positions()) return;
  gathered[p] = terms.counts(p) ? log_softmax_at(terms.g, terms.input, p, terms.target[p]) : T{};
}

template <class T>
void run(const KernelArgs& a, bool atomic, T) {
  using A = Acc<T>;
  const cudaStream_t stream = cuda::stream_of(a);
  const Geometry& g = a.problem.geom<Geometry>();
  Terms<T> terms{g, a.in<T>(0), nullptr, a.in<std::int32_t>(1), g.weighted ? a.in<T>(2) : nullptr};
  DeviceBuffer gathered;
  if (g.logits) {  // log_softmax first (its own kernel in PyTorch), the same in both variants
    gathered = DeviceBuffer(static_cast<std::size_t>(g.positions()) * sizeof(T), stream);
    gather_kernel<<<blocks_for(static_cast<std::size_t>(g.positions())), 256, 0, stream>>>(terms, gathered.get<T>());
    D9M_CUDA_CHECK_LAUNCH();
    terms.gathered = gathered.get<T>();
  }
  T* out = a.out<T>();

  if (!g.spatial()) {
    if (!atomic) {
      lanes_kernel<<<1, kLanes2d, 0, stream>>>(terms, out);
      D9M_CUDA_CHECK_LAUNCH();
      return;
    }
    DeviceBuffer total(2 * sizeof(A), stream);
    D9M_CUDA_CHECK(cudaMemsetAsync(total.get(), 0, total.bytes(), stream));
    examples_atomic_kernel<<<blocks_for(static_cast<std::size_t>(g.n)), 256, 0, stream>>>(terms, total.get<A>());
    D9M_CUDA_CHECK_LAUNCH();
    finish_2d_kernel<<<1, 1, 0, stream>>>(g.reduction, total.get<A>(), out);
    D9M_CUDA_CHECK_LAUNCH();
    return;
  }

  const auto blocks = static_cast<unsigned>(g.blocks());
  DeviceBuffer sums((atomic ? 2 : 2 * static_cast<std::size_t>(blocks)) * sizeof(T), stream);
  if (atomic) D9M_CUDA_CHECK(cudaMemsetAsync(sums.get(), 0, sums.bytes(), stream));  // output.zero_(), total_weight.zero_()
  blocks_kernel<<<blocks, kBlockThreads, 0, stream>>>(terms, sums.get<T>(), atomic);
  D9M_CUDA_CHECK_LAUNCH();
  finish_spatial_kernel<<<1, 1, 0, stream>>>(g.reduction, sums.get<T>(), atomic ? 1 : static_cast<std::int64_t>(blocks), out);
  D9M_CUDA_CHECK_LAUNCH();
}

// softmax_cross_entropy_grad: W by one thread in position order (mean), then a thread per row
// running grad_row, the CPU's code.
template <class T>
__global__ void weight_sum_kernel(Geometry g, const std::int32_t* target, const T* weight, Acc<T>* total) {
  *total = counted_weight_sum(g, target, weight);
}

template <class T>
void grad(const KernelArgs& a, T) {
  using A = Acc<T>;
  const cudaStream_t stream = cuda::stream_of(a);
  const Geometry g = a.problem.geom<Geometry>();
  const T* x = a.in<T>(0);
  const auto* target = a.in<std::int32_t>(1);
  const T* weight = g.weighted ? a.in<T>(2) : nullptr;
  DeviceBuffer total(sizeof(A), stream);
  A* w = total.get<A>();
  const bool mean = g.reduction == Reduction::mean;
  if (mean) {
    weight_sum_kernel<<<1, 1, 0, stream>>>(g, target, weight, w);
    D9M_CUDA_CHECK_LAUNCH();
  }
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(g.positions()), [=] __device__(std::size_t p) {
    grad_row(g, x, target, weight, mean ? *w : A(1), static_cast<std::int64_t>(p), out);
  });
}

std::vector<VariantDef> variants(const std::string& op) {
  return {
      {.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
       .claim = op::nondeterministic("atomicAdd in hardware order: nll_loss2d's block sums in T ([N, C, H, W], PyTorch's "
                                     "kernel), each example's term in Acc<T> ([N, C], d9m's)"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, true, t); })},
      {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
       .claim = op::deterministic("PyTorch's nll_loss kernel ([N, C]: one block of 32 lanes) or nll_loss2d's blocks with the "
                                  "block sums added in block order (bit-equal to cpu.serial)"),
       .run = typed([](const KernelArgs& a, auto t) { run(a, false, t); }), .bit_equal_to = "cpu.serial"},
  };
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("nll_loss"));
D9M_REGISTER_VARIANTS(variants("softmax_cross_entropy"));
D9M_REGISTER_VARIANTS({{.op = "softmax_cross_entropy_grad", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                        .claim = op::deterministic("the weight sum in position order by one thread, then a thread per row "
                                                   "(bit-equal to cpu.serial)"),
                        .run = typed([](const KernelArgs& a, auto t) { grad(a, t); }), .bit_equal_to = "cpu.serial"}});

}  // namespace d9m::loss
