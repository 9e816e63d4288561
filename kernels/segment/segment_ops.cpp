#include <algorithm>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/segment/segment.h"

namespace d9m::segment {
namespace {

// Ids: drawn in [0, S), sorted, the last set to S - 1 (so the output has S rows, as TensorFlow's
// would). Lengths vary around R / S; with R / S small some segments are empty.
void fill_ids(FillTarget& t, std::int64_t segments) {
  fill::integers(t, 0, static_cast<std::int32_t>(segments));
  auto* ids = static_cast<std::int32_t*>(t.data);
  const auto n = static_cast<std::size_t>(t.desc.numel());
  std::sort(ids, ids + n);
  if (n) ids[n - 1] = static_cast<std::int32_t>(segments - 1);
}

// prod's data: in random mode values in [0.75, 1.25), so that products of a segment's rows stay
// far inside every dtype's range (an overflow would make the order show as inf, not as rounding);
// in exact mode +-1, whose products are exact in any order.
void fill_prod_data(FillTarget& t, FillMode mode) {
  const CounterRng rng(t.seed, t.stream);
  auto* p = static_cast<float*>(t.data);
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(t.desc.numel()); ++i)
    p[i] = mode == FillMode::random ? 1.0f + 0.25f * rng.unit_symmetric(i) : (rng.below(i, 2) ? 1.0f : -1.0f);
}

OpDef segment_op(const char* name, Reduction r, const char* summary, double tolerance) {
  return OpDef{
      .name = name,
      .family = "segment",
      .summary = summary,
      .params = {op::integer("rows", "rows of data"), op::integer("depth", "elements per row"),
                 op::integer("num_segments", "number of segments (the output's rows)")},
      .tolerance = tolerance,
      .dtypes = op::all_float_dtypes(),
      .plan = [r](const Params& p) {
        const std::int64_t rows = p.integer("rows"), depth = p.integer("depth"), s = p.integer("num_segments");
        return Problem{{op::f32("data", {rows, depth}), op::i32("segment_ids", {rows})}, op::f32("output", {s, depth}),
                       Geometry{rows, depth, s, r}};
      },
      .fill = [r](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
        if (r == Reduction::prod) fill_prod_data(in[0], mode);
        else fill::floats(in[0], mode);
        fill_ids(in[1], pr.geom<Geometry>().segments);
      },
      // A sum or mean adds at most every row into one segment (registry.h long_sum_tolerance). A
      // product keeps the op's fixed tolerance (not yet measured at long segments), a max is exact.
      .sum_terms = r == Reduction::sum || r == Reduction::mean
                       ? std::function<std::int64_t(const Problem&)>([](const Problem& p) { return p.geom<Geometry>().rows; })
                       : nullptr,
  };
}

}  // namespace

D9M_REGISTER_OP(segment_op("segment_sum", Reduction::sum,
                           "SegmentSum: out[s, :] = sum of data[r, :] over the sorted segment_ids[r] == s", 1e-5));
D9M_REGISTER_OP(segment_op("segment_mean", Reduction::mean,
                           "SegmentMean: out[s, :] = mean of data[r, :] over the sorted segment_ids[r] == s (0 if empty)", 1e-5));
D9M_REGISTER_OP(segment_op("segment_prod", Reduction::prod,
                           "SegmentProd: out[s, :] = product of data[r, :] over the sorted segment_ids[r] == s (1 if empty)", 1e-5));
D9M_REGISTER_OP(segment_op("segment_max", Reduction::max,
                           "SegmentMax: out[s, :] = max of data[r, :] over the sorted segment_ids[r] == s (0 if empty)", 0.0));

}  // namespace d9m::segment
