// scatter family, TensorFlow semantics, int32 indices, values in the config's dtype (f32, f16,
// bf16, f64; the adds are done in that type, one rounding each, as atomicAdd on __half does):
//   scatter_add(ref[R,D], indices[U], updates[U,D])            -> ref with ref[indices[u],:] += updates[u,:]
//   scatter_nd_add(ref[A,B,D], indices[U,2], updates[U,D])     -> ref with ref[i0,i1,:] += updates[u,:]
//   unsorted_segment_sum(data[R,D], segment_ids[R], num_segments) -> out[S,D], out[s,:] = sum of
//        data[r,:] with segment_ids[r] == s; negative ids are dropped (TensorFlow's rule).
// The reference adds updates (rows) in increasing u (r) order onto ref (zero). Indices are
// generated in range; collisions are controlled by `index_range`, the number of distinct
// destinations drawn from: small ranges make many adds race for one address.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/common/half.h"
#include "kernels/common/keyed_lists.h"
#include "kernels/registry.h"
#include "kernels/common/hd.h"

namespace d9m::scatter {

struct Geometry {
  std::int64_t destinations = 0;  // rows of ref (A*B for scatter_nd_add), or num_segments
  std::int64_t depth = 0;         // D: elements per row
  std::int64_t updates = 0;       // U or R
  std::int64_t index_range = 0;   // indices drawn from [0, index_range)
  std::int64_t dim1 = 1;          // B, for scatter_nd_add's 2-d index
  bool zipf_ids = false;          // unsorted_segment_sum's "ids": zipf (fill only; no variant reads it)
};

enum class Indexing { rows, pairs, segments };

// The destination row of update (data) row u: indices[u] (rows), indices[u,0]*dim1 +
// indices[u,1] (pairs), or segment_ids[u] (segments); -1 where the row is dropped: a segment id
// negative or out of range (TensorFlow's rule). The fill never makes a scatter index out of range
// (TensorFlow's CPU kernels refuse one, its GPU kernels skip it); one is dropped too, so that no
// variant writes outside its output.
D9M_HD inline std::int64_t destination(const Geometry& g, const std::int32_t* indices, Indexing indexing, std::size_t u) {
  std::int64_t dest;
  if (indexing == Indexing::pairs) {
    const std::int64_t i0 = indices[2 * u], i1 = indices[2 * u + 1];
    if (i1 < 0 || i1 >= g.dim1) return -1;
    dest = i0 * g.dim1 + i1;
  } else {
    dest = indices[u];
  }
  return dest < 0 || dest >= g.destinations ? -1 : dest;
}

// Scatter form of the family: source = one update (data) row u; it adds its `depth` values into
// its destination row.
template <class T>
struct UpdateRows {
  Geometry g;
  const T* updates;
  const std::int32_t* indices;
  Indexing indexing;

  template <class Emit>
  D9M_HD void operator()(std::size_t u, Emit& emit) const {
    const std::int64_t dest = destination(g, indices, indexing, u);
    if (dest < 0) return;
    const auto d = static_cast<std::size_t>(g.depth);
    for (std::size_t k = 0; k < d; ++k) emit(static_cast<std::size_t>(dest) * d + k, updates[u * d + k]);
  }
};

// The gather form (cpu.gather, cuda.gather). Every call sorts the update rows by destination,
// stably: the indices only (4 bytes a row), never the D values a row adds, as XLA's scatter
// expander and TensorFlow's deterministic segment sums sort indices, every call; so does this,
// and the sort is timed with the op. `row_start[dest]..row_start[dest + 1]` then spans the update
// rows of `dest` in `sorted`, in increasing u, and each output element sums its own rows in that
// order onto its initial value: the reference order, so cpu.serial's bits, with no atomics and
// memory that grows with the number of rows, not with their depth. gathered_element is one
// element's sum (the device's thread per element); the CPU sums a whole row at a time in the same
// order per element (scatter_cpu.cpp), reading each update row once.
template <class T>
D9M_HD inline T gathered_element(const Geometry& g, const T* updates, const std::int32_t* sorted, const std::int32_t* row_start,
                                 std::size_t e, T init) {
  const auto d = static_cast<std::size_t>(g.depth);
  const std::size_t dest = e / d, k = e % d;
  T acc = init;
  for (std::int32_t i = row_start[dest]; i < row_start[dest + 1]; ++i) acc = add(acc, updates[static_cast<std::size_t>(sorted[i]) * d + k]);
  return acc;
}

inline Claim gather_claim() {
  return {Determinism::deterministic, ClaimSource::design,
          "the update rows' indices sorted by destination in every call (stable; timed with the op), then each output "
          "sums its own rows in the reference order: no atomics, memory of the indices only"};
}
// The sort's positions are 32-bit on both backends; on the device its keys are too, with one key
// past the last destination for the dropped rows (keyed_lists.h).
inline std::optional<std::string> gather_unsupported(const Problem& p, bool device) {
  const auto& g = p.geom<Geometry>();
  const auto u = static_cast<std::uint64_t>(g.updates), r = static_cast<std::uint64_t>(g.destinations);
  if (device) return keyed_lists::unsupported(u, r, "update rows", "destination rows");
  if (u > 0x7fffffff) return "more than 2^31 - 1 update rows: the gather form's sort keeps 32-bit positions";
  return std::nullopt;
}

// The gather form's buffers, from the plan: on the device the keyed lists (keyed_lists.h); on the
// CPU the sorted rows, the row starts and the counting sort's ranges per chunk.
inline std::uint64_t gather_bytes(const Geometry& g, bool device) {
  const auto u = static_cast<std::uint64_t>(g.updates), r = static_cast<std::uint64_t>(g.destinations);
  return device ? keyed_lists::bytes(u, r) : 4 * (r + 1) + 8 * u + 8 * 256 * (u / 16384 + 1);
}

}  // namespace d9m::scatter
