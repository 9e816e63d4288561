// CPU variants of the scatter family. Source = one update row (data row); it adds its D values
// into one destination row, in the config's dtype.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/parallel.h"
#include "kernels/scatter/scatter.h"

namespace d9m::scatter {
namespace {

// Adds the update rows (input `updates`, indices input `indices`) onto the initialised output.
void add_rows(const KernelArgs& a, accumulate::Order order, std::size_t updates, std::size_t indices, Indexing indexing) {
  const auto& g = a.problem.geom<Geometry>();
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<T>(order, a, static_cast<std::size_t>(g.updates),
                         UpdateRows<T>{g, a.in<T>(updates), a.in<std::int32_t>(indices), indexing});
  });
}

void scatter_add(const KernelArgs& a, accumulate::Order order) {
  std::memcpy(a.output, a.inputs[0], a.problem.output.bytes());  // starts from ref
  add_rows(a, order, 2, 1, Indexing::rows);
}

void scatter_nd_add(const KernelArgs& a, accumulate::Order order) {
  std::memcpy(a.output, a.inputs[0], a.problem.output.bytes());
  add_rows(a, order, 2, 1, Indexing::pairs);
}

void unsorted_segment_sum(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0.0 in every float type
  add_rows(a, order, 0, 1, Indexing::segments);
}

// The gather form (scatter.h): the rows sorted by destination, stably, then each output element
// sums its own rows. The sort is a counting sort in two levels, so that no buffer grows with the
// destinations times the workers: fixed chunks of rows count into at most 256 fixed destination
// ranges, each chunk moves its rows into its ranges' buckets (chunks in row order), and each range
// sorts its bucket by destination with row_start as its histogram. Chunks and ranges are fixed by
// the shapes, not the thread count, and a stable sort has one result anyway.
constexpr std::size_t kSortChunk = 16384;
constexpr std::size_t kSortRanges = 256;

struct GatherBuffers {
  std::vector<std::int32_t> bucketed, sorted, row_start;
  std::vector<std::size_t> counts;
};

void sort_by_destination(ThreadPool& pool, const Geometry& g, const std::int32_t* indices, Indexing indexing, GatherBuffers& b) {
  const auto rows = static_cast<std::size_t>(g.updates), dests = static_cast<std::size_t>(g.destinations);
  b.row_start[0] = 0;
  if (dests == 0) return;
  const std::size_t ranges = std::min(dests, kSortRanges), width = (dests + ranges - 1) / ranges;
  const std::size_t chunks = (rows + kSortChunk - 1) / kSortChunk;
  b.counts.assign(chunks * ranges, 0);
  pool.parallel_for(chunks, [&](std::size_t c) {
    for (std::size_t u = c * kSortChunk, end = std::min(rows, u + kSortChunk); u < end; ++u)
      if (const std::int64_t d = destination(g, indices, indexing, u); d >= 0) ++b.counts[c * ranges + static_cast<std::size_t>(d) / width];
  });
  // Exclusive offsets in (range, chunk) order; counts becomes each chunk's cursor per range.
  std::vector<std::size_t> range_begin(ranges + 1);
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranges; ++r) {
    range_begin[r] = total;
    for (std::size_t c = 0; c < chunks; ++c) total += std::exchange(b.counts[c * ranges + r], total);
  }
  range_begin[ranges] = total;
  pool.parallel_for(chunks, [&](std::size_t c) {
    for (std::size_t u = c * kSortChunk, end = std::min(rows, u + kSortChunk); u < end; ++u)
      if (const std::int64_t d = destination(g, indices, indexing, u); d >= 0)
        b.bucketed[b.counts[c * ranges + static_cast<std::size_t>(d) / width]++] = static_cast<std::int32_t>(u);
  });
  // Each range: count its destinations into row_start, turn the counts into starts, place its
  // rows (which leaves each start at the next one's), and shift the starts back.
  std::int32_t* start = b.row_start.data();
  pool.parallel_for(ranges, [&](std::size_t r) {
    const std::size_t first = r * width, last = std::min(dests, first + width);
    if (first >= last) return;  // past the end: ranges of `width` cover the destinations sooner
    std::fill(start + first, start + last, 0);
    for (std::size_t i = range_begin[r]; i < range_begin[r + 1]; ++i) ++start[destination(g, indices, indexing, static_cast<std::size_t>(b.bucketed[i]))];
    auto at = static_cast<std::int32_t>(range_begin[r]);
    for (std::size_t d = first; d < last; ++d) at += std::exchange(start[d], at);
    for (std::size_t i = range_begin[r]; i < range_begin[r + 1]; ++i) {
      const std::int32_t u = b.bucketed[i];
      b.sorted[static_cast<std::size_t>(start[destination(g, indices, indexing, static_cast<std::size_t>(u))]++)] = u;
    }
    for (std::size_t d = last; d-- > first + 1;) start[d] = start[d - 1];
    start[first] = static_cast<std::int32_t>(range_begin[r]);
  });
  start[dests] = static_cast<std::int32_t>(total);
}

// init_from_ref: scatter_add's output starts from ref (input 0), a segment sum's from +0.
void add_rows_gathered(const KernelArgs& a, std::size_t updates, std::size_t indices, Indexing indexing, bool init_from_ref) {
  const auto& g = a.problem.geom<Geometry>();
  auto& b = *static_cast<GatherBuffers*>(a.state);
  sort_by_destination(*a.exec.pool, g, a.in<std::int32_t>(indices), indexing, b);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* upd = a.in<T>(updates);
    const T* ref = init_from_ref ? a.in<T>(0) : nullptr;
    T* out = a.out<T>();
    // Row by row, the depth innermost: each element still adds its rows in increasing u
    // (gathered_element's order), and each update row is read once, contiguously.
    const auto depth = static_cast<std::size_t>(g.depth);
    const std::size_t grain = std::max<std::size_t>(1, 1024 / std::max<std::size_t>(1, depth));
    parallel_blocks(*a.exec.pool, static_cast<std::size_t>(g.destinations), grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t d = begin; d < end; ++d) {
        T* row = out + d * depth;
        for (std::size_t k = 0; k < depth; ++k) row[k] = ref ? ref[d * depth + k] : T{0};
        for (std::int32_t i = b.row_start[d]; i < b.row_start[d + 1]; ++i) {
          const T* from = upd + static_cast<std::size_t>(b.sorted[static_cast<std::size_t>(i)]) * depth;
          for (std::size_t k = 0; k < depth; ++k) row[k] = add(row[k], from[k]);
        }
      }
    });
  });
}

std::vector<VariantDef> cpu_gather_variant(const std::string& op, std::size_t updates, Indexing indexing, bool init_from_ref) {
  return {{.op = op, .name = "cpu.gather", .backend = Backend::cpu, .role = Role::ordered,
           .claim = gather_claim(),
           .unsupported = [](const Problem& p) { return gather_unsupported(p, false); },
           .run = [=](const KernelArgs& a) { add_rows_gathered(a, updates, 1, indexing, init_from_ref); },
           .prepare = [](const Problem& p, const ExecContext&) {
             const auto& g = p.geom<Geometry>();
             auto b = std::make_shared<GatherBuffers>();
             b->bucketed.resize(static_cast<std::size_t>(g.updates));
             b->sorted.resize(static_cast<std::size_t>(g.updates));
             b->row_start.resize(static_cast<std::size_t>(g.destinations) + 1);
             return Prepared{b, std::nullopt};
           },
           .bit_equal_to = "cpu.serial",
           .memory = [](const Problem& p) {
             return std::optional<WorkingMemory>{{gather_bytes(p.geom<Geometry>(), false), "the update rows sorted by destination"}};
           }}};
}

}  // namespace

D9M_REGISTER_VARIANTS(cpu_gather_variant("scatter_add", 2, Indexing::rows, true));
D9M_REGISTER_VARIANTS(cpu_gather_variant("scatter_nd_add", 2, Indexing::pairs, true));
D9M_REGISTER_VARIANTS(cpu_gather_variant("unsorted_segment_sum", 0, Indexing::segments, false));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("unsorted_segment_sum", unsorted_segment_sum));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("scatter_add", scatter_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("scatter_nd_add", scatter_nd_add));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("unsorted_segment_sum", unsorted_segment_sum));

}  // namespace d9m::scatter
