// scatter family, TensorFlow semantics, float32 values, int32 indices:
//   scatter_add(ref[R,D], indices[U], updates[U,D])            -> ref with ref[indices[u],:] += updates[u,:]
//   scatter_nd_add(ref[A,B,D], indices[U,2], updates[U,D])     -> ref with ref[i0,i1,:] += updates[u,:]
//   unsorted_segment_sum(data[R,D], segment_ids[R], num_segments) -> out[S,D], out[s,:] = sum of
//        data[r,:] with segment_ids[r] == s; negative ids are dropped (TensorFlow's rule).
// The reference adds updates (rows) in increasing u (r) order onto ref (zero). Indices are
// generated in range; collisions are controlled by `index_range`, the number of distinct
// destinations drawn from: small ranges make many adds race for one address.
#pragma once
#include <cstdint>

namespace d9m::scatter {

struct Geometry {
  std::int64_t destinations = 0;  // rows of ref (A*B for scatter_nd_add), or num_segments
  std::int64_t depth = 0;         // D: elements per row
  std::int64_t updates = 0;       // U or R
  std::int64_t index_range = 0;   // indices drawn from [0, index_range)
  std::int64_t dim1 = 1;          // B, for scatter_nd_add's 2-d index
};

}  // namespace d9m::scatter
