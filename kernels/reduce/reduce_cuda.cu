// CUDA variants of the reduce family, d9m's own kernels in the family's fixed arrangement
// (reduce.h): one thread block of kThreads threads per chunk, each thread one lane.
//   cuda.ordered  reduce_sum: a kernel per level of chunk sums; cumsum: lane prefixes and chunk
//                 totals, the carries added in chunk order by one thread, then the outputs;
//                 segmented_reduce: one block per segment runs the levels over its segment.
//                 cpu.ordered's bits.
//   cuda.atomic   the same chunk sums, combined with atomicAdd in hardware scheduling order:
//                 block sums into the one output (reduce_sum), each chunk's total into the carry
//                 of every later chunk (cumsum), each global chunk's piece of a segment into the
//                 segment's sum (segmented_reduce).
// Scratch buffers are allocated in prepare(), sized from the config, so a trial only launches.
#include <memory>

#include "kernels/common/cuda_check.h"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/reduce/reduce.h"

namespace d9m::reduce {
namespace {

// The chunk sum of x[0..len) by the whole block (blockDim.x == kThreads), on every thread.
template <class T>
__device__ T block_chunk_sum(const T* x, std::int64_t len, T* lanes) {
  const int t = static_cast<int>(threadIdx.x);
  lanes[t] = lane_sum(x, len, t);
  __syncthreads();
  for (int h = kThreads / 2; h > 0; h /= 2) {
    if (t < h) lanes[t] = lanes[t] + lanes[t + h];
    __syncthreads();
  }
  const T sum = lanes[0];
  __syncthreads();  // lanes is reused by the caller's next chunk
  return sum;
}

// Block c: the sum of chunk c of x[0..count); stored at sums[c], or added atomically to *sums.
template <class T>
__global__ void chunk_sums_kernel(const T* x, std::int64_t count, T* sums, bool atomic) {
  __shared__ T lanes[kThreads];
  const std::int64_t c = blockIdx.x, b = c * kChunk;
  const T s = block_chunk_sum(x + b, count - b < kChunk ? count - b : kChunk, lanes);
  if (threadIdx.x != 0) return;
  if (atomic) atomicAdd(sums, s);
  else sums[c] = s;
}

// Block c: lane totals of chunk c -> lane prefixes (kept for the output kernel), and the chunk's
// total: stored at totals[c] (ordered) or added atomically to carry[d] for every d > c (atomic).
template <class T>
__global__ void scan_totals_kernel(const T* x, std::int64_t n, T* prefixes, T* totals, T* carry, std::int64_t chunks) {
  __shared__ T lanes[kThreads];
  __shared__ T total;
  const std::int64_t c = blockIdx.x, b = c * kChunk, len = n - b < kChunk ? n - b : kChunk;
  const int t = static_cast<int>(threadIdx.x);
  lanes[t] = lane_total(x + b, len, t);
  __syncthreads();
  if (t == 0) total = lane_prefixes(lanes);
  __syncthreads();
  prefixes[c * kThreads + t] = lanes[t];
  if (totals) {
    if (t == 0) totals[c] = total;
  } else {
    for (std::int64_t d = c + 1 + t; d < chunks; d += kThreads) atomicAdd(carry + d, total);
  }
}

// One block: carry[c] = totals[0] + ... + totals[c-1], added in chunk order by thread 0; the
// other threads only stage the totals through shared memory, kThreads at a time, so the serial
// adds do not wait on one global load each.
template <class T>
__global__ void scan_carries_kernel(const T* totals, std::int64_t chunks, T* carry) {
  __shared__ T staged[kThreads];
  T run = T(0);  // thread 0's
  const int t = static_cast<int>(threadIdx.x);
  for (std::int64_t b = 0; b < chunks; b += kThreads) {
    const std::int64_t len = chunks - b < kThreads ? chunks - b : kThreads;
    if (t < len) staged[t] = totals[b + t];
    __syncthreads();
    if (t == 0)
      for (int k = 0; k < len; ++k) {
        const T total = staged[k];
        staged[k] = run;
        run = run + total;
      }
    __syncthreads();
    if (t < len) carry[b + t] = staged[t];
    __syncthreads();
  }
}

template <class T>
__global__ void scan_outputs_kernel(const T* x, std::int64_t n, const T* carry, const T* prefixes, T* out) {
  const std::int64_t c = blockIdx.x, b = c * kChunk, len = n - b < kChunk ? n - b : kChunk;
  const int t = static_cast<int>(threadIdx.x);
  lane_outputs(x + b, out + b, len, t, carry[c], prefixes[c * kThreads + t]);
}

// Block s: the levels of chunk sums over segment s; levels beyond the first live in scratch at
// offsets[s] / kChunk + s, a region no other segment's reaches (reduce.h, Scratch below).
template <class T>
__global__ void segments_ordered_kernel(const T* x, const std::int32_t* off, T* scratch, T* out) {
  __shared__ T lanes[kThreads];
  const std::int64_t s = blockIdx.x, b = off[s], len = std::int64_t{off[s + 1]} - b;
  if (len <= kChunk) {
    const T r = block_chunk_sum(x + b, len, lanes);
    if (threadIdx.x == 0) out[s] = r;
    return;
  }
  T* level = scratch + b / kChunk + s;
  std::int64_t count = chunks_of(len);
  for (std::int64_t c = 0; c < count; ++c) {
    const std::int64_t cb = c * kChunk;
    const T r = block_chunk_sum(x + b + cb, len - cb < kChunk ? len - cb : kChunk, lanes);
    if (threadIdx.x == 0) level[c] = r;
  }
  __syncthreads();
  // In place: chunk c of a level reads level[c kChunk ...] and writes level[c] afterwards, and
  // c <= c kChunk, so no later chunk reads what an earlier one wrote.
  while (count > 1) {
    const std::int64_t next = chunks_of(count);
    for (std::int64_t c = 0; c < next; ++c) {
      const std::int64_t cb = c * kChunk;
      const T r = block_chunk_sum(level + cb, count - cb < kChunk ? count - cb : kChunk, lanes);
      if (threadIdx.x == 0) level[c] = r;
    }
    count = next;
    __syncthreads();
  }
  if (threadIdx.x == 0) out[s] = level[0];
}

// Block g: global chunk g of x; each segment's piece of it is summed as a chunk and added
// atomically into the segment's sum.
template <class T>
__global__ void segments_atomic_kernel(const T* x, std::int64_t n, const std::int32_t* off, std::int64_t segments, T* out) {
  __shared__ T lanes[kThreads];
  __shared__ std::int64_t first;
  const std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * kChunk, e = n - b < kChunk ? n : b + kChunk;
  if (threadIdx.x == 0) first = segment_of(off, segments, b);
  __syncthreads();
  for (std::int64_t s = first; s < segments && off[s] < e; ++s) {
    const std::int64_t pb = off[s] > b ? off[s] : b, pe = off[s + 1] < e ? off[s + 1] : e;
    if (pe <= pb) continue;
    const T r = block_chunk_sum(x + pb, pe - pb, lanes);
    if (threadIdx.x == 0) atomicAdd(out + s, r);
  }
}

unsigned grid_of(std::int64_t blocks) {
  if (blocks > 0x7fffffff) throw Unsupported("more than 2^31-1 thread blocks");
  return static_cast<unsigned>(blocks);
}

// Scratch of one case, allocated in prepare() from the config's sizes.
struct Scratch {
  DeviceBuffer a, b, c, d;
};

template <class T>
Prepared prepare_scratch(const Problem& p, const ExecContext& exec) {
  const auto& g = p.geom<Geometry>();
  const auto s = static_cast<cudaStream_t>(exec.stream);
  auto st = std::make_shared<Scratch>();
  const auto bytes = [](std::int64_t count) { return static_cast<std::size_t>(count) * sizeof(T); };
  if (p.inputs.size() == 2) {  // segmented_reduce: the levels of long segments
    st->a = DeviceBuffer(bytes(g.n / kChunk + g.segments + 1), s);
  } else if (p.output.numel() == 1) {  // reduce_sum: two levels to ping-pong between
    st->a = DeviceBuffer(bytes(g.chunks()), s);
    st->b = DeviceBuffer(bytes(chunks_of(g.chunks())), s);
  } else {  // cumsum: lane prefixes, chunk totals, carries
    st->a = DeviceBuffer(bytes(g.chunks() * kThreads), s);
    st->b = DeviceBuffer(bytes(g.chunks()), s);
    st->c = DeviceBuffer(bytes(g.chunks()), s);
  }
  return {st, std::nullopt};
}

template <class T>
void sum(const KernelArgs& a, bool atomic) {
  auto& st = *static_cast<Scratch*>(a.state);
  const std::int64_t n = a.problem.geom<Geometry>().n;
  const cudaStream_t s = cuda::stream_of(a);
  T* out = a.out<T>();
  if (atomic) {
    D9M_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(T), s));  // +0 in f32 and f64
    chunk_sums_kernel<T><<<grid_of(chunks_of(n)), kThreads, 0, s>>>(a.in<T>(0), n, out, true);
    D9M_CUDA_CHECK_LAUNCH();
    return;
  }
  const T* src = a.in<T>(0);
  T *level = st.a.get<T>(), *spare = st.b.get<T>();
  std::int64_t count = n;
  while (count > kChunk) {
    chunk_sums_kernel<T><<<grid_of(chunks_of(count)), kThreads, 0, s>>>(src, count, level, false);
    D9M_CUDA_CHECK_LAUNCH();
    count = chunks_of(count);
    src = level;
    std::swap(level, spare);
  }
  chunk_sums_kernel<T><<<1, kThreads, 0, s>>>(src, count, out, false);
  D9M_CUDA_CHECK_LAUNCH();
}

template <class T>
void scan(const KernelArgs& a, bool atomic) {
  auto& st = *static_cast<Scratch*>(a.state);
  const std::int64_t n = a.problem.geom<Geometry>().n, chunks = chunks_of(n);
  const cudaStream_t s = cuda::stream_of(a);
  T *prefixes = st.a.get<T>(), *totals = st.b.get<T>(), *carry = st.c.get<T>();
  if (atomic) {
    D9M_CUDA_CHECK(cudaMemsetAsync(carry, 0, static_cast<std::size_t>(chunks) * sizeof(T), s));
    scan_totals_kernel<T><<<grid_of(chunks), kThreads, 0, s>>>(a.in<T>(0), n, prefixes, nullptr, carry, chunks);
    D9M_CUDA_CHECK_LAUNCH();
  } else {
    scan_totals_kernel<T><<<grid_of(chunks), kThreads, 0, s>>>(a.in<T>(0), n, prefixes, totals, nullptr, chunks);
    D9M_CUDA_CHECK_LAUNCH();
    scan_carries_kernel<T><<<1, kThreads, 0, s>>>(totals, chunks, carry);
    D9M_CUDA_CHECK_LAUNCH();
  }
  scan_outputs_kernel<T><<<grid_of(chunks), kThreads, 0, s>>>(a.in<T>(0), n, carry, prefixes, a.out<T>());
  D9M_CUDA_CHECK_LAUNCH();
}

template <class T>
void segments(const KernelArgs& a, bool atomic) {
  auto& st = *static_cast<Scratch*>(a.state);
  const auto& g = a.problem.geom<Geometry>();
  const cudaStream_t s = cuda::stream_of(a);
  const auto* off = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  if (atomic) {
    D9M_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(g.segments) * sizeof(T), s));
    segments_atomic_kernel<T><<<grid_of(g.chunks()), kThreads, 0, s>>>(a.in<T>(0), g.n, off, g.segments, out);
  } else {
    segments_ordered_kernel<T><<<grid_of(g.segments), kThreads, 0, s>>>(a.in<T>(0), off, st.a.get<T>(), out);
  }
  D9M_CUDA_CHECK_LAUNCH();
}

// The variant's run and prepare at the config's dtype (f32 or f64).
template <class F>
std::function<void(const KernelArgs&)> typed(F f) {
  return [f](const KernelArgs& a) {
    if (a.problem.dtype == DType::f64) f(a, double{});
    else f(a, float{});
  };
}

Prepared prepare(const Problem& p, const ExecContext& exec) {
  return p.dtype == DType::f64 ? prepare_scratch<double>(p, exec) : prepare_scratch<float>(p, exec);
}

std::vector<VariantDef> variants() {
  return {
      {.op = "reduce_sum", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
       .claim = op::nondeterministic("block sums of 4096-element chunks added into the output with atomicAdd in hardware "
                                     "scheduling order"),
       .run = typed([](const KernelArgs& a, auto tag) { sum<decltype(tag)>(a, true); }), .prepare = prepare},
      {.op = "reduce_sum", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
       .claim = op::deterministic("fixed tree: a kernel per level of 4096-element chunk sums (bit-equal to cpu.ordered)"),
       .run = typed([](const KernelArgs& a, auto tag) { sum<decltype(tag)>(a, false); }), .prepare = prepare,
       .bit_equal_to = "cpu.ordered"},
      {.op = "cumsum", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
       .claim = op::nondeterministic("chunk scan: each block adds its chunk total into the carries of all later chunks "
                                     "with atomicAdd, in hardware scheduling order"),
       .run = typed([](const KernelArgs& a, auto tag) { scan<decltype(tag)>(a, true); }), .prepare = prepare},
      {.op = "cumsum", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
       .claim = op::deterministic("chunk scan: chunk totals carried in chunk order by one thread, lanes of 16 in lane "
                                  "order (bit-equal to cpu.ordered)"),
       .run = typed([](const KernelArgs& a, auto tag) { scan<decltype(tag)>(a, false); }), .prepare = prepare,
       .bit_equal_to = "cpu.ordered"},
      {.op = "segmented_reduce", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
       .claim = op::nondeterministic("a block per 4096-element chunk of x adds its piece of every segment with atomicAdd: "
                                     "segments crossing chunks get their pieces in hardware scheduling order"),
       .run = typed([](const KernelArgs& a, auto tag) { segments<decltype(tag)>(a, true); }), .prepare = prepare},
      {.op = "segmented_reduce", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
       .claim = op::deterministic("one block per segment runs the fixed tree of chunk sums over it (bit-equal to "
                                  "cpu.ordered)"),
       .run = typed([](const KernelArgs& a, auto tag) { segments<decltype(tag)>(a, false); }), .prepare = prepare,
       .bit_equal_to = "cpu.ordered"}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::reduce
