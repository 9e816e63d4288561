// CUDA variants of the attention family, d9m's own kernels with the CPU variants' decomposition
// (attention.h), so each claims its CPU twin's bits:
//   sdpa     cuda.ordered  one thread per query row: statistics, then the weighted sum of v
//                          (bit-equal to cpu.serial: nothing is split).
//   sdpa_bwd cuda.atomic   one thread per (query, d, key block) adds its partial dQ with atomicAdd
//                          in hardware scheduling order, as flash-attention backward kernels do.
//            cuda.ordered  the same partials kept apart, then added in block order (bit-equal to
//                          cpu.ordered).
// Both backward variants run the forward row by row first, then P and dS per pair, then dK and
// dV per key element (fixed order), then dQ.
#include "kernels/attention/attention.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"

namespace d9m::attention {
namespace {

// The forward of every row: o (dim values per row), and for the backward the row's statistics
// and delta (d_out non-null).
template <class T>
__global__ void rows_kernel(Geometry g, const T* q, const T* k, const T* v, T* o, RowStats<Acc<T>>* stats, const T* d_out,
                            Acc<T>* deltas) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= g.rows()) return;
  Acc<T> acc[kMaxHeadDim];
  const std::int64_t bh = r / g.seq_q, i = r % g.seq_q;
  const RowStats<Acc<T>> st = forward_row(g, q, k, v, bh, i, acc, o + r * g.dim);
  if (!d_out) return;
  stats[r] = st;
  deltas[r] = delta(g, d_out, o + r * g.dim, bh, i);
}

template <class T>
__global__ void pairs_kernel(Geometry g, const T* q, const T* k, const T* v, const T* d_out, const RowStats<Acc<T>>* stats,
                             const Acc<T>* deltas, Acc<T>* p, Acc<T>* ds) {
  const std::int64_t x = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (x >= g.rows() * g.seq_kv) return;
  const std::int64_t r = x / g.seq_kv, j = x % g.seq_kv, bh = r / g.seq_q, i = r % g.seq_q;
  if (j >= g.keys_for(i)) return;
  pair_grad(g, q, k, v, d_out, stats[r], deltas[r], bh, i, j, p[x], ds[x]);
}

template <class T>
__global__ void keys_kernel(Geometry g, const Acc<T>* p, const Acc<T>* ds, const T* q, const T* d_out, T* out) {
  const std::int64_t x = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (x >= g.key_rows() * g.dim) return;
  const std::int64_t r = x / g.dim;
  key_grads(g, p, ds, q, d_out, r / g.seq_kv, r % g.seq_kv, x % g.dim, out);
}

// Partial dQ of key block blockIdx.y for one (query, d).
template <class T>
__global__ void dq_kernel(Geometry g, const Acc<T>* ds, const T* k, Acc<T>* acc, bool atomic) {
  const std::int64_t x = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t kb = blockIdx.y;
  if (x >= g.rows() * g.dim) return;
  const std::int64_t r = x / g.dim;
  const Acc<T> part = dq_partial(g, ds, k, r / g.seq_q, r % g.seq_q, x % g.dim, kb * kKeyBlock, (kb + 1) * kKeyBlock);
  if (atomic) atomicAdd(acc + x, part);
  else acc[x * g.key_blocks() + kb] = part;
}

template <class T>
__global__ void dq_finish_kernel(Geometry g, const Acc<T>* acc, std::int64_t per_element, T* out) {
  const std::int64_t x = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (x >= g.rows() * g.dim) return;
  Acc<T> total = 0;
  for (std::int64_t kb = 0; kb < per_element; ++kb) total = total + acc[x * per_element + kb];
  const std::int64_t r = x / g.dim;
  out[dq_at(g, r / g.seq_q, r % g.seq_q, x % g.dim)] = narrow<T>(total * static_cast<Acc<T>>(g.scale));
}

std::size_t count(std::int64_t n) { return static_cast<std::size_t>(n); }

template <class T>
void forward(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  if (g.rows() == 0) return;
  rows_kernel<T><<<blocks_for(count(g.rows()), 128), 128, 0, cuda::stream_of(a)>>>(g, a.in<T>(0), a.in<T>(1), a.in<T>(2), a.out<T>(),
                                                                                 nullptr, nullptr, nullptr);
  D9M_CUDA_CHECK_LAUNCH();
}

template <class T>
void backward(const KernelArgs& a, bool atomic) {
  using A = Acc<T>;
  const auto& g = a.problem.geom<Geometry>();
  const cudaStream_t s = cuda::stream_of(a);
  const T *q = a.in<T>(0), *k = a.in<T>(1), *v = a.in<T>(2), *d_out = a.in<T>(3);
  T* out = a.out<T>();
  DeviceBuffer o(count(g.rows() * g.dim) * sizeof(T), s), stats(count(g.rows()) * sizeof(RowStats<A>), s),
      deltas(count(g.rows()) * sizeof(A), s), p(count(g.rows() * g.seq_kv) * sizeof(A), s), ds(p.bytes(), s);
  rows_kernel<T><<<blocks_for(count(g.rows()), 128), 128, 0, s>>>(g, q, k, v, o.get<T>(), stats.get<RowStats<A>>(), d_out,
                                                                    deltas.get<A>());
  D9M_CUDA_CHECK_LAUNCH();
  pairs_kernel<T><<<blocks_for(count(g.rows() * g.seq_kv)), 256, 0, s>>>(g, q, k, v, d_out, stats.get<RowStats<A>>(),
                                                                         deltas.get<A>(), p.get<A>(), ds.get<A>());
  D9M_CUDA_CHECK_LAUNCH();
  keys_kernel<T><<<blocks_for(count(g.key_rows() * g.dim)), 256, 0, s>>>(g, p.get<A>(), ds.get<A>(), q, d_out, out);
  D9M_CUDA_CHECK_LAUNCH();
  const std::int64_t per_element = atomic ? 1 : g.key_blocks();
  DeviceBuffer acc(count(g.rows() * g.dim * per_element) * sizeof(A), s);
  if (atomic) D9M_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, acc.bytes(), s));  // +0 in f32 and f64
  const dim3 grid(blocks_for(count(g.rows() * g.dim)), static_cast<unsigned>(g.key_blocks()));
  dq_kernel<T><<<grid, 256, 0, s>>>(g, ds.get<A>(), k, acc.get<A>(), atomic);
  D9M_CUDA_CHECK_LAUNCH();
  dq_finish_kernel<T><<<blocks_for(count(g.rows() * g.dim)), 256, 0, s>>>(g, acc.get<A>(), per_element, out);
  D9M_CUDA_CHECK_LAUNCH();
}

// The kernels keep one row of head_dim values per thread, and index key blocks with blockIdx.y.
std::optional<std::string> kernel_limits(const Problem& p) {
  const auto& g = p.geom<Geometry>();
  if (g.dim > kMaxHeadDim) return "d9m's CUDA attention kernels keep a row of at most " + std::to_string(kMaxHeadDim) + " values (head_dim " + std::to_string(g.dim) + ")";
  if (g.key_blocks() > 65535) return std::string("more than 65535 blocks of 64 keys");
  return std::nullopt;
}

std::vector<VariantDef> variants() {
  const Claim row_local = op::deterministic("every sum runs over one sequence's keys or queries: no row sees the batch");
  return {{.op = "sdpa", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("one thread per query row: statistics, then the weighted sum of v in ascending key order "
                                      "(bit-equal to cpu.serial)"),
           .unsupported = kernel_limits, .run = typed([](const KernelArgs& a, auto tag) { forward<decltype(tag)>(a); }),
           .bit_equal_to = "cpu.serial", .invariance = row_local},
          {.op = "sdpa_bwd", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic("dQ's partial sums over blocks of 64 keys added with atomicAdd in hardware scheduling "
                                         "order (a flash-attention backward's dQ)"),
           .unsupported = kernel_limits, .run = typed([](const KernelArgs& a, auto tag) { backward<decltype(tag)>(a, true); })},
          {.op = "sdpa_bwd", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("dQ's partial sums over blocks of 64 keys kept apart, then added in block order "
                                      "(bit-equal to cpu.ordered)"),
           .unsupported = kernel_limits, .run = typed([](const KernelArgs& a, auto tag) { backward<decltype(tag)>(a, false); }),
           .bit_equal_to = "cpu.ordered", .invariance = row_local}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::attention
