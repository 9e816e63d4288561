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

#include "kernels/common/hd.h"

namespace d9m::scatter {

struct Geometry {
  std::int64_t destinations = 0;  // rows of ref (A*B for scatter_nd_add), or num_segments
  std::int64_t depth = 0;         // D: elements per row
  std::int64_t updates = 0;       // U or R
  std::int64_t index_range = 0;   // indices drawn from [0, index_range)
  std::int64_t dim1 = 1;          // B, for scatter_nd_add's 2-d index
};

enum class Indexing { rows, pairs, segments };

// Scatter form of the family: source = one update (data) row u; it adds its `depth` values into
// one destination row: indices[u] (rows), indices[u,0]*dim1 + indices[u,1] (pairs), or
// segment_ids[u], dropped when negative or out of range (segments).
template <class T>
struct UpdateRows {
  Geometry g;
  const T* updates;
  const std::int32_t* indices;
  Indexing indexing;

  template <class Emit>
  D9M_HD void operator()(std::size_t u, Emit& emit) const {
    std::int64_t dest;
    if (indexing == Indexing::pairs) dest = std::int64_t{indices[2 * u]} * g.dim1 + indices[2 * u + 1];
    else dest = indices[u];
    if (indexing == Indexing::segments && (dest < 0 || dest >= g.destinations)) return;
    const auto d = static_cast<std::size_t>(g.depth);
    for (std::size_t k = 0; k < d; ++k) emit(static_cast<std::size_t>(dest) * d + k, updates[u * d + k]);
  }
};

}  // namespace d9m::scatter
