// CPU variants of the reduce family: the serial references, and the family's fixed arrangement
// of the adds (reduce.h) run over worker threads, combined in a fixed order (ordered) or with
// atomic adds in the order the threads get there (atomic).
//
// The atomic variants add per lane, not per chunk: their tasks are (chunk, lane) pairs of 16
// elements each, as a kernel whose every thread calls atomicAdd. With a few CPU threads, tasks of
// a whole chunk finish in nearly index order, so their adds would rarely reorder; lane-sized
// tasks interleave between threads at every trial in which the threads run at once.
#include <atomic>
#include <vector>

#include "kernels/common/op_helpers.h"
#include "kernels/common/thread_pool.h"
#include "kernels/reduce/reduce.h"

namespace d9m::reduce {
namespace {

template <class T>
void atomic_add(T& target, T v) {
  std::atomic_ref<T>(target).fetch_add(v, std::memory_order_relaxed);
}

template <class F>
std::function<void(const KernelArgs&)> typed(F f) {
  return [f](const KernelArgs& a) {
    if (a.problem.dtype == DType::f64) f(a, double{});
    else f(a, float{});
  };
}

// ---- reduce_sum -----------------------------------------------------------------------------

template <class T>
void sum_serial(const KernelArgs& a) {
  const std::int64_t n = a.problem.geom<Geometry>().n;
  const T* x = a.in<T>(0);
  T acc = T(0);
  for (std::int64_t i = 0; i < n; ++i) acc = acc + x[i];
  *a.out<T>() = acc;
}

// The chunk sums of x[0..count) into sums[0..chunks_of(count)), one task per chunk.
template <class T>
void chunk_sums(ThreadPool& pool, const T* x, std::int64_t count, T* sums) {
  pool.parallel_for(static_cast<std::size_t>(chunks_of(count)), [&](std::size_t c) {
    const auto b = static_cast<std::int64_t>(c) * kChunk;
    sums[c] = chunk_sum(x + b, std::min(kChunk, count - b));
  });
}

// Levels of chunk sums until one value is left (reduce.h "levels").
template <class T>
T tree_sum(ThreadPool& pool, const T* x, std::int64_t count) {
  if (count <= kChunk) return chunk_sum(x, count);
  std::vector<T> level(static_cast<std::size_t>(chunks_of(count)));
  chunk_sums(pool, x, count, level.data());
  while (level.size() > 1) {
    std::vector<T> next(static_cast<std::size_t>(chunks_of(static_cast<std::int64_t>(level.size()))));
    chunk_sums(pool, level.data(), static_cast<std::int64_t>(level.size()), next.data());
    level = std::move(next);
  }
  return level[0];
}

template <class T>
void sum_ordered(const KernelArgs& a) {
  *a.out<T>() = tree_sum(*a.exec.pool, a.in<T>(0), a.problem.geom<Geometry>().n);
}

// Calls fn(chunk, lane, chunk's first element, chunk's length) for every lane that holds at
// least one element of x[0..n): the atomic variants' tasks.
template <class F>
void for_lanes(ThreadPool& pool, std::int64_t n, F&& fn) {
  pool.parallel_for(static_cast<std::size_t>(chunks_of(n) * kThreads), [&](std::size_t task) {
    const auto c = static_cast<std::int64_t>(task / kThreads);
    const int lane = static_cast<int>(task % kThreads);
    const std::int64_t b = c * kChunk, len = std::min(kChunk, n - b);
    if (lane < len) fn(c, lane, b, len);
  });
}

template <class T>
void sum_atomic(const KernelArgs& a) {
  const std::int64_t n = a.problem.geom<Geometry>().n;
  const T* x = a.in<T>(0);
  T acc = T(0);
  for_lanes(*a.exec.pool, n, [&](std::int64_t, int lane, std::int64_t b, std::int64_t len) {
    atomic_add(acc, lane_sum(x + b, len, lane));
  });
  *a.out<T>() = acc;
}

// ---- cumsum ---------------------------------------------------------------------------------

template <class T>
void scan_serial(const KernelArgs& a) {
  const std::int64_t n = a.problem.geom<Geometry>().n;
  const T* x = a.in<T>(0);
  T* out = a.out<T>();
  T acc = T(0);
  for (std::int64_t i = 0; i < n; ++i) out[i] = acc = acc + x[i];
}

template <class T>
void scan_chunked(const KernelArgs& a, bool atomic) {
  const std::int64_t n = a.problem.geom<Geometry>().n, chunks = chunks_of(n);
  const T* x = a.in<T>(0);
  T* out = a.out<T>();
  ThreadPool& pool = *a.exec.pool;
  // Lane totals, turned into lane prefixes (in lane order) once a chunk's are all known.
  std::vector<T> lanes(static_cast<std::size_t>(chunks * kThreads), T(0)), totals(static_cast<std::size_t>(chunks), T(0)),
      carry(static_cast<std::size_t>(chunks), T(0));
  auto lane_slot = [&](std::int64_t c, int lane) -> T& { return lanes[static_cast<std::size_t>(c * kThreads + lane)]; };
  if (atomic) {
    // Each lane adds its total into its chunk's total, then each chunk its total into the carry
    // of every later chunk: both in scheduler order.
    for_lanes(pool, n, [&](std::int64_t c, int lane, std::int64_t b, std::int64_t len) {
      lane_slot(c, lane) = lane_total(x + b, len, lane);
      atomic_add(totals[static_cast<std::size_t>(c)], lane_slot(c, lane));
    });
    pool.parallel_for(static_cast<std::size_t>(chunks), [&](std::size_t c) {
      lane_prefixes(&lane_slot(static_cast<std::int64_t>(c), 0));
      for (std::size_t d = c + 1; d < carry.size(); ++d) atomic_add(carry[d], totals[c]);
    });
  } else {
    pool.parallel_for(static_cast<std::size_t>(chunks), [&](std::size_t c) {
      const std::int64_t b = static_cast<std::int64_t>(c) * kChunk, len = std::min(kChunk, n - b);
      for (int t = 0; t < kThreads; ++t) lane_slot(static_cast<std::int64_t>(c), t) = lane_total(x + b, len, t);
      totals[c] = lane_prefixes(&lane_slot(static_cast<std::int64_t>(c), 0));
    });
    for (std::size_t c = 1; c < carry.size(); ++c) carry[c] = carry[c - 1] + totals[c - 1];
  }
  pool.parallel_for(static_cast<std::size_t>(chunks), [&](std::size_t c) {
    const std::int64_t b = static_cast<std::int64_t>(c) * kChunk, len = std::min(kChunk, n - b);
    for (int t = 0; t < kThreads; ++t) lane_outputs(x + b, out + b, len, t, carry[c], lane_slot(static_cast<std::int64_t>(c), t));
  });
}

// ---- segmented_reduce -----------------------------------------------------------------------

template <class T>
void segments_serial(const KernelArgs& a) {
  const std::int64_t s_count = a.problem.geom<Geometry>().segments;
  const T* x = a.in<T>(0);
  const auto* off = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  for (std::int64_t s = 0; s < s_count; ++s) {
    T acc = T(0);
    for (std::int64_t i = off[s]; i < off[s + 1]; ++i) acc = acc + x[i];
    out[s] = acc;
  }
}

// Levels of chunk sums over one segment, on the calling thread (the segments are the tasks).
template <class T>
T segment_tree_sum(const T* x, std::int64_t count) {
  if (count <= kChunk) return chunk_sum(x, count);
  std::vector<T> level(static_cast<std::size_t>(chunks_of(count)));
  for (std::size_t c = 0; c < level.size(); ++c) {
    const auto b = static_cast<std::int64_t>(c) * kChunk;
    level[c] = chunk_sum(x + b, std::min(kChunk, count - b));
  }
  while (level.size() > 1) {
    const auto m = static_cast<std::int64_t>(level.size());
    std::vector<T> next(static_cast<std::size_t>(chunks_of(m)));
    for (std::size_t c = 0; c < next.size(); ++c) {
      const auto b = static_cast<std::int64_t>(c) * kChunk;
      next[c] = chunk_sum(level.data() + b, std::min(kChunk, m - b));
    }
    level = std::move(next);
  }
  return level[0];
}

template <class T>
void segments_ordered(const KernelArgs& a) {
  const T* x = a.in<T>(0);
  const auto* off = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  a.exec.pool->parallel_for(static_cast<std::size_t>(a.problem.geom<Geometry>().segments), [&](std::size_t s) {
    out[s] = segment_tree_sum(x + off[s], std::int64_t{off[s + 1]} - off[s]);
  });
}

template <class T>
void segments_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const T* x = a.in<T>(0);
  const auto* off = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  for (std::int64_t s = 0; s < g.segments; ++s) out[s] = T(0);
  // Lane t of global chunk c: its partial of each segment's piece inside the chunk, added
  // atomically into the segment's sum.
  for_lanes(*a.exec.pool, g.n, [&](std::int64_t, int lane, std::int64_t b, std::int64_t len) {
    const std::int64_t e = b + len;
    for (std::int64_t s = segment_of(off, g.segments, b); s < g.segments && off[s] < e; ++s) {
      const std::int64_t pb = std::max<std::int64_t>(b, off[s]), pe = std::min<std::int64_t>(e, off[s + 1]);
      if (lane < pe - pb) atomic_add(out[s], lane_sum(x + pb, pe - pb, lane));
    }
  });
}

std::vector<VariantDef> sum_variants() {
  return {{.op = "reduce_sum", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
           .claim = op::deterministic("one thread adds x in ascending index"),
           .run = typed([](const KernelArgs& a, auto tag) { sum_serial<decltype(tag)>(a); })},
          {.op = "reduce_sum", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
           .claim = op::nondeterministic("lane partials (16 strided elements of a 4096-element chunk) added into one "
                                         "accumulator with atomic adds from worker threads in scheduler order"),
           .run = typed([](const KernelArgs& a, auto tag) { sum_atomic<decltype(tag)>(a); })},
          {.op = "reduce_sum", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("fixed tree: chunk sums of 4096 elements (256 strided lanes halved pairwise), level "
                                      "after level; not cpu.serial's bits (another association)"),
           .run = typed([](const KernelArgs& a, auto tag) { sum_ordered<decltype(tag)>(a); })}};
}

std::vector<VariantDef> scan_variants() {
  return {{.op = "cumsum", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
           .claim = op::deterministic("one thread keeps a running sum in ascending index"),
           .run = typed([](const KernelArgs& a, auto tag) { scan_serial<decltype(tag)>(a); })},
          {.op = "cumsum", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
           .claim = op::nondeterministic("chunk scan: lane totals added into their chunk's total, chunk totals into the "
                                         "carries of all later chunks, with atomic adds in scheduler order"),
           .run = typed([](const KernelArgs& a, auto tag) { scan_chunked<decltype(tag)>(a, true); })},
          {.op = "cumsum", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("chunk scan: chunk totals carried in chunk order, lanes of 16 in lane order; not "
                                      "cpu.serial's bits (another association)"),
           .run = typed([](const KernelArgs& a, auto tag) { scan_chunked<decltype(tag)>(a, false); })}};
}

std::vector<VariantDef> segment_variants() {
  return {{.op = "segmented_reduce", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
           .claim = op::deterministic("one thread adds each segment in ascending index"),
           .run = typed([](const KernelArgs& a, auto tag) { segments_serial<decltype(tag)>(a); })},
          {.op = "segmented_reduce", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
           .claim = op::nondeterministic("lane partials of each segment's pieces of the 4096-element chunks of x added into "
                                         "the segment's sum with atomic adds from worker threads in scheduler order"),
           .run = typed([](const KernelArgs& a, auto tag) { segments_atomic<decltype(tag)>(a); })},
          {.op = "segmented_reduce", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic("one task per segment, the fixed tree of chunk sums over it; not cpu.serial's bits on "
                                      "segments of 3 elements or more (another association)"),
           .run = typed([](const KernelArgs& a, auto tag) { segments_ordered<decltype(tag)>(a); })}};
}

}  // namespace

D9M_REGISTER_VARIANTS(sum_variants());
D9M_REGISTER_VARIANTS(scan_variants());
D9M_REGISTER_VARIANTS(segment_variants());

}  // namespace d9m::reduce
