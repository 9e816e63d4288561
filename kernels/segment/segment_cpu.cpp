// CPU variants of the segment family:
//   cpu.serial   one thread walks the rows in increasing r and folds each into its segment's
//                output row: the definition
//   cpu.ordered  each output element gathers its segment's rows in increasing r (segment.h),
//                elements in fixed blocks on all threads: serial's bits, memory of the output only
//   cpu.atomic   tasks of a few rows on all threads fold into shared outputs with atomic
//                read-modify-writes (compare-and-swap), in the order the threads get there
#include <algorithm>
#include <atomic>
#include <type_traits>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/segment/segment.h"

namespace d9m::segment {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

template <class T>
void fill_identity(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  std::fill(a.out<T>(), a.out<T>() + g.segments * g.depth, identity<T>(g.reduction));
}

// Every output row's last step (mean's division, max's empty segments) by its segment's row count.
template <class T>
void finish_segments(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const auto* ids = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  for (std::int64_t s = 0; s < g.segments; ++s) {
    const std::int64_t count = segment_start(ids, g.rows, s + 1) - segment_start(ids, g.rows, s);
    for (std::int64_t k = 0; k < g.depth; ++k) out[s * g.depth + k] = last_step(g.reduction, out[s * g.depth + k], count);
  }
}

template <class T>
void serial(const KernelArgs& a, T) {
  const auto& g = a.problem.geom<Geometry>();
  const T* data = a.in<T>(0);
  const auto* ids = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  fill_identity<T>(a);
  for (std::int64_t r = 0; r < g.rows; ++r)
    for (std::int64_t k = 0; k < g.depth; ++k) {
      T& o = out[ids[r] * g.depth + k];
      o = combine(g.reduction, o, data[r * g.depth + k]);
    }
  if (has_last_step(g.reduction)) finish_segments<T>(a);
}

template <class T>
void ordered(const KernelArgs& a, T) {
  const auto& g = a.problem.geom<Geometry>();
  const T* data = a.in<T>(0);
  const auto* ids = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  parallel_blocks(*a.exec.pool, sz(g.segments * g.depth), 256, [&](std::size_t begin, std::size_t end) {
    for (std::size_t e = begin; e < end; ++e) {
      const auto i = static_cast<std::int64_t>(e);
      out[e] = gather(g, data, ids, i / g.depth, i % g.depth);
    }
  });
}

// One atomic read-modify-write of *p with f: compare-and-swap on the value (float, double) or
// on the bits (the 16-bit types).
template <class T, class F>
void atomic_update(T* p, F f) {
  if constexpr (std::is_floating_point_v<T>) {
    std::atomic_ref<T> ref(*p);
    T seen = ref.load(std::memory_order_relaxed);
    while (!ref.compare_exchange_weak(seen, f(seen), std::memory_order_relaxed)) {
    }
  } else {
    std::atomic_ref<std::uint16_t> bits(p->bits);
    std::uint16_t seen = bits.load(std::memory_order_relaxed);
    while (!bits.compare_exchange_weak(seen, f(T{seen}).bits, std::memory_order_relaxed)) {
    }
  }
}

template <class T>
void atomic(const KernelArgs& a, T) {
  const auto& g = a.problem.geom<Geometry>();
  const T* data = a.in<T>(0);
  const auto* ids = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  fill_identity<T>(a);
  parallel_blocks(*a.exec.pool, sz(g.rows), accumulate::kAtomicGrain, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r)
      for (std::int64_t k = 0; k < g.depth; ++k) {
        const T v = data[static_cast<std::int64_t>(r) * g.depth + k];
        atomic_update(&out[ids[r] * g.depth + k], [&](T acc) { return combine(g.reduction, acc, v); });
      }
  });
  if (has_last_step(g.reduction)) finish_segments<T>(a);
}

std::vector<VariantDef> variants(const std::string& op, Reduction r) {
  const Claim atomic_claim = r == Reduction::max
                                 ? op::deterministic("atomic max from worker threads: a maximum (without NaN or a tie of -0 "
                                                     "and +0) is the same in any order")
                                 : op::nondeterministic(std::string("atomic ") + (r == Reduction::prod ? "multiplies" : "adds") +
                                                        " (compare-and-swap) from worker threads in scheduler order");
  return {
      {.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
       .claim = op::deterministic("one thread folds the rows into their segments in increasing row order"),
       .run = typed([](const KernelArgs& a, auto t) { serial(a, t); })},
      {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
       .claim = op::deterministic("each output gathers its segment's rows in increasing row order (binary search of the "
                                  "sorted ids): the reference order"),
       .run = typed([](const KernelArgs& a, auto t) { ordered(a, t); }), .bit_equal_to = "cpu.serial"},
      {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic, .claim = atomic_claim,
       .run = typed([](const KernelArgs& a, auto t) { atomic(a, t); })},
  };
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("segment_sum", Reduction::sum));
D9M_REGISTER_VARIANTS(variants("segment_mean", Reduction::mean));
D9M_REGISTER_VARIANTS(variants("segment_prod", Reduction::prod));
D9M_REGISTER_VARIANTS(variants("segment_max", Reduction::max));

}  // namespace d9m::segment
