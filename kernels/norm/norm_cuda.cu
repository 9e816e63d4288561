// CUDA variants of the norm family (norm.h): a thread per row running the CPU's row code for the
// row-by-row ops; for the parameter gradients a thread per row for the moments, then the row sums
// in cpu.ordered's block order (cuda.ordered) or with atomicAdd (cuda.atomic).
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/map_variants_cuda.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/norm/norm.h"

namespace d9m::norm {
namespace {

template <template <class> class Rows>
std::vector<VariantDef> row_variants(const std::string& op) {
  return {{.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("a thread per row running cpu.serial's row code (bit-equal to cpu.serial)"),
           .run = typed([](const KernelArgs& a, auto tag) { map::cuda::run_all<decltype(tag), Rows>(a); }),
           .bit_equal_to = "cpu.serial"}};
}

template <class T>
__global__ void moments_kernel(Geometry g, const T* x, Moments<Acc<T>>* moments) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r < g.rows) moments[r] = row_moments(g, x, r);
}

// cpu.ordered's first pass: a thread per (block, column).
template <class T>
__global__ void block_sums_kernel(ParamTerms<T> terms, Acc<T>* partial) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= terms.g.blocks() * terms.g.dim) return;
  partial[i] = block_sum(terms, i / terms.g.dim, i % terms.g.dim);
}

template <class T>
__global__ void blocks_total_kernel(Geometry g, const Acc<T>* partial, T* out) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c < g.dim) out[c] = blocks_total<T>(g, partial, c);
}

// A thread per (row, column): the term's atomicAdd into its column's accumulator.
template <class T>
__global__ void atomic_terms_kernel(ParamTerms<T> terms, Acc<T>* acc) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= terms.g.rows * terms.g.dim) return;
  accumulate::cuda::atomic_add(acc + i % terms.g.dim, terms(i / terms.g.dim, i % terms.g.dim));
}

template <class T>
__global__ void narrow_kernel(std::int64_t n, const Acc<T>* acc, T* out) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c < n) out[c] = narrow<T>(acc[c]);
}

template <class T>
void param_grad(const KernelArgs& a, bool atomic, T) {
  using A = Acc<T>;
  const cudaStream_t stream = cuda::stream_of(a);
  const Geometry g = a.problem.geom<Geometry>();
  const bool gamma = g.param == Param::gamma;
  const auto rows = static_cast<std::size_t>(g.rows), dim = static_cast<std::size_t>(g.dim);
  DeviceBuffer moments(gamma ? rows * sizeof(Moments<A>) : 0, stream);
  const T* x = gamma ? a.in<T>(1) : nullptr;
  if (gamma) {
    moments_kernel<<<blocks_for(rows), 256, 0, stream>>>(g, x, moments.get<Moments<A>>());
    D9M_CUDA_CHECK_LAUNCH();
  }
  const ParamTerms<T> terms{g, a.in<T>(0), x, moments.get<Moments<A>>()};
  T* out = a.out<T>();
  if (atomic) {
    DeviceBuffer acc(dim * sizeof(A), stream);
    D9M_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, acc.bytes(), stream));  // +0
    atomic_terms_kernel<<<blocks_for(rows * dim), 256, 0, stream>>>(terms, acc.get<A>());
    D9M_CUDA_CHECK_LAUNCH();
    narrow_kernel<T><<<blocks_for(dim), 256, 0, stream>>>(g.dim, acc.get<A>(), out);
    D9M_CUDA_CHECK_LAUNCH();
    return;
  }
  const auto partials = static_cast<std::size_t>(g.blocks()) * dim;
  DeviceBuffer partial(partials * sizeof(A), stream);
  block_sums_kernel<<<blocks_for(partials), 256, 0, stream>>>(terms, partial.get<A>());
  D9M_CUDA_CHECK_LAUNCH();
  blocks_total_kernel<T><<<blocks_for(dim), 256, 0, stream>>>(g, partial.get<A>(), out);
  D9M_CUDA_CHECK_LAUNCH();
}

std::vector<VariantDef> param_variants(const std::string& op) {
  return {
      {.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
       .claim = op::nondeterministic("a thread per (row, column) adds its term with atomicAdd in the accumulation type, "
                                     "in hardware order"),
       .run = typed([](const KernelArgs& a, auto t) { param_grad(a, true, t); })},
      {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
       .claim = op::deterministic("a thread per (64-row block, column), then a thread per column adding the block sums in "
                                  "block order (bit-equal to cpu.ordered)"),
       .run = typed([](const KernelArgs& a, auto t) { param_grad(a, false, t); }), .bit_equal_to = "cpu.ordered"},
  };
}

}  // namespace

D9M_REGISTER_VARIANTS(row_variants<ForwardRows>("layer_norm"));
D9M_REGISTER_VARIANTS(row_variants<GradInputRows>("layer_norm_grad_input"));
D9M_REGISTER_VARIANTS(param_variants("layer_norm_grad_gamma"));
D9M_REGISTER_VARIANTS(param_variants("layer_norm_grad_beta"));

}  // namespace d9m::norm
