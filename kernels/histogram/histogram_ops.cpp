#include <algorithm>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/histogram/histogram.h"

namespace d9m::histogram {
namespace {

std::vector<ParamSpec> params() {
  return {op::integer("n", "elements of arr"), op::integer("bins", "bins (minlength = maxlength)")};
}

Geometry geometry(const Params& p) { return {p.integer("n"), p.integer("bins")}; }

// arr in [0, bins + bins / 8): about one value in nine lands past the last bin and is ignored.
void fill_arr(FillTarget& t, std::int64_t bins) {
  fill::integers(t, 0, static_cast<std::int32_t>(bins + std::max<std::int64_t>(bins / 8, 1)));
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "bincount",
    .family = "histogram",
    .summary = "Bincount: counts[b] = number of i with arr[i] == b (int32; values >= bins ignored)",
    .params = params(),
    .tolerance = 0.0,
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      return op::scattering(Problem{{op::i32("arr", {g.n})}, op::i32("counts", {g.bins}), g}, {g.n}, "n");
    },
    .fill = [](const Problem& pr, FillMode, std::vector<FillTarget>& in) { fill_arr(in[0], pr.geom<Geometry>().bins); },
});

D9M_REGISTER_OP(OpDef{
    .name = "bincount_weighted",
    .family = "histogram",
    .summary = "Bincount with weights: sums[b] = sum of weights[i] with arr[i] == b (values >= bins ignored)",
    .params = params(),
    .tolerance = 1e-5,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      return op::scattering(Problem{{op::i32("arr", {g.n}), op::f32("weights", {g.n})}, op::f32("sums", {g.bins}), g}, {g.n}, "n");
    },
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      fill_arr(in[0], pr.geom<Geometry>().bins);
      fill::floats(in[1], mode);
    },
});

}  // namespace d9m::histogram
