#include <algorithm>
#include <limits>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/scatter/scatter.h"

namespace d9m::scatter {
namespace {

std::int64_t index_range(const Params& p, std::int64_t destinations) {
  const std::int64_t r = p.integer("index_range");
  return r == 0 ? destinations : std::min(r, destinations);
}

ParamSpec index_range_param() {
  return op::integer_or("index_range", 0, "indices drawn from [0, index_range); 0: all destinations", 0);
}

// Every output element sums at most one contribution per update row (registry.h long_sum_tolerance).
std::int64_t sum_terms(const Problem& p) { return p.geom<Geometry>().updates; }

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "scatter_add", .family = "scatter",
    .summary = "ScatterAdd: ref[indices[u], :] += updates[u, :]",
    .params = {op::integer("rows", "rows of ref"), op::integer("depth", "elements per row"),
               op::integer("updates", "number of update rows"), index_range_param()},
    .tolerance = 1e-5,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const std::int64_t rows = p.integer("rows"), d = p.integer("depth"), u = p.integer("updates");
      return op::scattering(Problem{{op::f32("ref", {rows, d}), op::i32("indices", {u}), op::f32("updates", {u, d})},
                                    op::f32("output", {rows, d}), Geometry{rows, d, u, index_range(p, rows)}},
                            {u, d}, "updates");
    },
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      fill::floats(in[0], mode);
      fill::integers(in[1], 0, static_cast<std::int32_t>(pr.geom<Geometry>().index_range));
      fill::floats(in[2], mode);
    },
    .sum_terms = sum_terms});

D9M_REGISTER_OP(OpDef{
    .name = "scatter_nd_add", .family = "scatter",
    .summary = "ScatterNdAdd with 2-d indices: ref[i0, i1, :] += updates[u, :]",
    .params = {op::integer("dim0", "first indexed dimension of ref"),
               op::integer("dim1", "second indexed dimension of ref"),
               op::integer("depth", "elements per indexed slice"),
               op::integer("updates", "number of update slices"), index_range_param()},
    .tolerance = 1e-5,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const std::int64_t a = p.integer("dim0"), b = p.integer("dim1"), d = p.integer("depth"),
                         u = p.integer("updates");
      op::checked_product({a, b, d}, "dim0");
      return op::scattering(Problem{{op::f32("ref", {a, b, d}), op::i32("indices", {u, 2}), op::f32("updates", {u, d})},
                                    op::f32("output", {a, b, d}), Geometry{a * b, d, u, index_range(p, a * b), b}},
                            {u, d}, "updates");
    },
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      // Flat destinations in [0, index_range), stored as (i0, i1) pairs.
      const auto& g = pr.geom<Geometry>();
      fill::floats(in[0], mode);
      const CounterRng rng(in[1].seed, in[1].stream);
      auto* idx = static_cast<std::int32_t*>(in[1].data);
      for (std::int64_t u = 0; u < g.updates; ++u) {
        const auto flat = static_cast<std::int64_t>(
            rng.below(static_cast<std::uint64_t>(u), static_cast<std::uint32_t>(g.index_range)));
        idx[2 * u] = static_cast<std::int32_t>(flat / g.dim1);
        idx[2 * u + 1] = static_cast<std::int32_t>(flat % g.dim1);
      }
      fill::floats(in[2], mode);
    },
    .sum_terms = sum_terms});

D9M_REGISTER_OP(OpDef{
    .name = "unsorted_segment_sum", .family = "scatter",
    .summary = "UnsortedSegmentSum: out[s, :] = sum of data[r, :] with segment_ids[r] == s; negative ids dropped",
    .params = {op::integer("rows", "rows of data"), op::integer("depth", "elements per row"),
               op::integer("num_segments", "number of segments"),
               op::added_later(op::choice_or("ids", "uniform", {"uniform", "zipf"},
                                             "how segment_ids are drawn: uniform in [-1, num_segments) (about one row in "
                                             "num_segments + 1 dropped), or zipf in [0, num_segments), segment k about "
                                             "k + 1 times rarer than segment 0 (as token ids into a word embedding)"))},
    .tolerance = 1e-5,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const std::int64_t r = p.integer("rows"), d = p.integer("depth"), s = p.integer("num_segments");
      if (s > std::numeric_limits<std::int32_t>::max()) throw InvalidConfig("num_segments", "at most 2^31 - 1 (int32 segment ids)");
      Geometry g{s, d, r, s};
      g.zipf_ids = p.choice("ids") == "zipf";
      return op::scattering(Problem{{op::f32("data", {r, d}), op::i32("segment_ids", {r})}, op::f32("output", {s, d}), g}, {r, d}, "rows");
    },
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      const Geometry& g = pr.geom<Geometry>();
      fill::floats(in[0], mode);
      if (g.zipf_ids) fill::zipf_integers(in[1], static_cast<std::int32_t>(g.destinations));
      else fill::integers(in[1], -1, static_cast<std::int32_t>(g.destinations));
    },
    .sum_terms = sum_terms});

}  // namespace d9m::scatter
