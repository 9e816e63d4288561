// The resampler gradients: parameters, tensors and inputs (resampler.h has the semantics).
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/resampler/resampler.h"

namespace d9m::resampler {
namespace {

std::vector<ParamSpec> params(bool with_semantics) {
  std::vector<ParamSpec> p = {op::integer("batch", "images (B, N)"), op::integer("h", "image height"),
                              op::integer("w", "image width"), op::integer("c", "channels"),
                              op::integer("points", "sampling points per image")};
  if (with_semantics) {
    p.push_back(op::choice_or("semantics", "tensorflow", {"tensorflow", "grid_sample"},
                              "tensorflow: ResamplerGrad, NHWC, pixel coordinates; grid_sample: PyTorch, NCHW, coordinates in [-1, 1]"));
    p.push_back(op::boolean_or("align_corners", false, "grid_sample's align_corners"));
  }
  return p;
}

Geometry geometry(const Params& p, bool with_semantics) {
  Geometry g;
  g.batch = p.integer("batch");
  g.h = p.integer("h");
  g.w = p.integer("w");
  g.c = p.integer("c");
  g.points = p.integer("points");
  if (with_semantics) {
    g.semantics = p.choice("semantics") == "grid_sample" ? Semantics::grid_sample : Semantics::tensorflow;
    g.align_corners = p.boolean("align_corners");
    if (g.align_corners && g.semantics == Semantics::tensorflow)
      throw InvalidConfig("align_corners", "only the grid_sample semantics has align_corners");
  }
  op::checked_product({g.batch, g.h, g.w, g.c}, "h");
  op::checked_product({g.batch, g.points, g.c}, "points");
  return g;
}

// Coordinates (x, y) per point. Random: TensorFlow's pixel coordinates spread over
// [-1.25, extent + 0.25), so some points fall outside and some corners too; PyTorch's over
// [-1.1, 1.1). Exact: coordinates on the quarter-pixel grid, so every weight and product is a
// short dyadic and every sum exact. For grid_sample that needs the unnormalisation to be exact
// too: W and H powers of two without align_corners, W - 1 and H - 1 with it.
void fill_coords(FillTarget& t, const Geometry& g, FillMode mode) {
  const CounterRng rng(t.seed, t.stream);
  auto* xy = static_cast<float*>(t.data);
  const auto n = static_cast<std::uint64_t>(t.desc.numel());
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::int64_t extent = i % 2 == 0 ? g.w : g.h;
    if (g.semantics == Semantics::tensorflow) {
      xy[i] = mode == FillMode::random
                  ? (rng.unit_symmetric(i) + 1.0f) / 2.0f * (static_cast<float>(extent) + 1.5f) - 1.25f
                  : static_cast<float>(rng.below(i, static_cast<std::uint32_t>(4 * extent + 6))) / 4.0f - 1.25f;
    } else if (mode == FillMode::random) {
      xy[i] = rng.unit_symmetric(i) * 1.1f;
    } else {
      const double ix = static_cast<double>(rng.below(i, static_cast<std::uint32_t>(4 * extent + 3))) / 4.0 - 0.75;
      const auto size = static_cast<double>(extent);
      xy[i] = static_cast<float>(g.align_corners ? (extent > 1 ? 2 * ix / (size - 1) - 1 : 0.0) : (2 * ix + 1) / size - 1);
    }
  }
}

// Sums over the points near a pixel (grad_data) or over the channels (grad_warp): rounding only.
constexpr double kTolerance = 1e-5;

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "resampler_grad_data", .family = "resampler",
    .summary = "bilinear sampling's data gradient: TF ResamplerGrad's grad_data, or PyTorch grid_sample's grad_input",
    .params = params(true),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p, true);
      // Four corners per point and channel in either semantics.
      if (g.semantics == Semantics::tensorflow)
        return op::scattering(Problem{{op::f32("warp", {g.batch, g.points, 2}), op::f32("grad_output", {g.batch, g.points, g.c})},
                                      op::f32("grad_data", {g.batch, g.h, g.w, g.c}), g},
                              {4, g.batch, g.points, g.c}, "points");
      return op::scattering(Problem{{op::f32("grid", {g.batch, 1, g.points, 2}), op::f32("grad_output", {g.batch, g.c, 1, g.points})},
                                    op::f32("grad_input", {g.batch, g.c, g.h, g.w}), g},
                            {4, g.batch, g.points, g.c}, "points");
    },
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      fill_coords(in[0], pr.geom<Geometry>(), mode);
      fill::floats(in[1], mode);
    },
    .batch = [](const Params&) { return BatchAxes{"batch", {0, 0}, 0}; }});

D9M_REGISTER_OP(OpDef{
    .name = "resampler_grad_warp", .family = "resampler",
    .summary = "bilinear sampling's warp gradient: TF ResamplerGrad's grad_warp (atomic adds over channels)",
    .params = params(false),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p, false);
      // x and y per point and channel.
      return op::scattering(Problem{{op::f32("data", {g.batch, g.h, g.w, g.c}), op::f32("warp", {g.batch, g.points, 2}),
                                     op::f32("grad_output", {g.batch, g.points, g.c})},
                                    op::f32("grad_warp", {g.batch, g.points, 2}), g},
                            {2, g.batch, g.points, g.c}, "points");
    },
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      fill::floats(in[0], mode);
      fill_coords(in[1], pr.geom<Geometry>(), mode);
      fill::floats(in[2], mode);
    },
    .batch = [](const Params&) { return BatchAxes{"batch", {0, 0, 0}, 0}; }});

}  // namespace d9m::resampler
