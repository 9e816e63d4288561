// CUDA variants of the matmul family, d9m's own split-K kernels (the shape of cuBLAS's split-K
// with an atomic reduction, and its fixed-order alternative):
//   cuda.atomic   one thread per (output, chunk) adds its chunk sum into an accumulator with
//                 atomicAdd (f32, or f64 for f64), then the accumulator is rounded to the dtype.
//   cuda.ordered  one thread per (output, chunk) writes its chunk sum apart; one thread per
//                 output then adds them in chunk order: cpu.ordered's bits (matmul.h).
#include "kernels/common/cuda_check.h"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/matmul/matmul.h"

namespace d9m::matmul {
namespace {

template <class T>
__global__ void chunk_sums_kernel(Geometry g, const T* a, const T* b, Acc<T>* sums, bool atomic) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t c = blockIdx.y;
  if (o >= g.outputs()) return;
  std::int64_t e, i, j;
  output_coords(g, o, e, i, j);
  const Acc<T> s = partial(g, a, b, e, i, j, c * kSplitK, c * kSplitK + kSplitK < g.k ? c * kSplitK + kSplitK : g.k);
  if (atomic) atomicAdd(sums + o, s);
  else sums[o * g.chunks() + c] = s;
}

template <class T>
__global__ void finish_kernel(Geometry g, const Acc<T>* sums, std::int64_t per_output, T* out) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (o >= g.outputs()) return;
  Acc<T> total = 0;
  for (std::int64_t c = 0; c < per_output; ++c) total = total + sums[o * per_output + c];
  out[o] = narrow<T>(total);
}

template <class T>
void split_k(const KernelArgs& a, bool atomic) {
  const auto& g = a.problem.geom<Geometry>();
  const cudaStream_t s = cuda::stream_of(a);
  if (g.outputs() == 0) return;
  // CUDA grids allow 65535 blocks in y: more chunks than that is a config these kernels refuse.
  if (g.chunks() > 65535) throw Unsupported("more than 65535 chunks of K (K > 16 M)");
  const std::int64_t per_output = atomic ? 1 : g.chunks();
  DeviceBuffer sums(static_cast<std::size_t>(g.outputs() * per_output) * sizeof(Acc<T>), s);
  if (atomic) D9M_CUDA_CHECK(cudaMemsetAsync(sums.get(), 0, sums.bytes(), s));  // +0 in f32 and f64
  const dim3 grid(blocks_for(static_cast<std::size_t>(g.outputs())), static_cast<unsigned>(g.chunks()));
  chunk_sums_kernel<T><<<grid, 256, 0, s>>>(g, a.in<T>(0), a.in<T>(1), sums.get<Acc<T>>(), atomic);
  D9M_CUDA_CHECK_LAUNCH();
  finish_kernel<T><<<blocks_for(static_cast<std::size_t>(g.outputs())), 256, 0, s>>>(g, sums.get<Acc<T>>(), per_output, a.out<T>());
  D9M_CUDA_CHECK_LAUNCH();
}

std::vector<VariantDef> variants(const std::string& op) {
  auto run = [](bool atomic) {
    return [atomic](const KernelArgs& a) { with_float_type(a.problem.dtype, [&](auto tag) { split_k<decltype(tag)>(a, atomic); }); };
  };
  return {{.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic("split-K: chunk sums of 256 k added with atomicAdd in hardware scheduling order"),
           .unsupported = [](const Problem& p) { return own_kernels_support(p.math); }, .run = run(true)},
          {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("split-K: chunk sums of 256 k kept apart, then added in chunk order (bit-equal to cpu.ordered)"),
           .unsupported = [](const Problem& p) { return own_kernels_support(p.math); }, .run = run(false),
           .bit_equal_to = "cpu.ordered", .invariance = fixed_chunks_are_invariant()}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("matmul"));
D9M_REGISTER_VARIANTS(variants("matmul_batched"));

}  // namespace d9m::matmul
