#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/resize/resize.h"

namespace d9m::resize {
namespace {

std::vector<ParamSpec> resize_params() {
  return {op::integer("n", "batch"), op::integer("h", "original height"), op::integer("w", "original width"),
          op::integer("c", "channels"), op::integer("out_h", "resized height"),
          op::integer("out_w", "resized width"),
          op::boolean_or("align_corners", false, "align the corner pixels of input and output"),
          op::boolean_or("half_pixel_centers", true, "sample at pixel centres (TF2 default)")};
}

Geometry geometry(const Params& p) {
  const bool ac = p.boolean("align_corners"), hp = p.boolean("half_pixel_centers");
  if (ac && hp)
    throw InvalidConfig("half_pixel_centers", "half_pixel_centers cannot be true with align_corners");
  Geometry g{p.integer("n"), p.integer("c"), p.integer("h"), p.integer("w"), p.integer("out_h"),
             p.integer("out_w"), ac, hp, 0, 0};
  g.y_scale = resize_scale(g.h, g.oh, ac);
  g.x_scale = resize_scale(g.w, g.ow, ac);
  return g;
}

Shape small(const Geometry& g) { return {g.n, g.h, g.w, g.c}; }
Shape large(const Geometry& g) { return {g.n, g.oh, g.ow, g.c}; }

void fill_floats(const Problem&, FillMode mode, std::vector<FillTarget>& in) {
  for (auto& t : in) fill::floats(t, mode);
}

// The forward ops: images at the small size in, the resized images out.
OpDef forward_op(std::string name, std::string summary) {
  return OpDef{.name = std::move(name), .family = "resize", .summary = std::move(summary),
               .params = resize_params(), .tolerance = 0.0, .dtypes = op::all_float_dtypes(),
               .plan = [](const Params& p) {
                 const Geometry g = geometry(p);
                 return Problem{{op::f32("images", small(g))}, op::f32("output", large(g)), g};
               },
               .fill = fill_floats,
               .batch = [](const Params&) { return BatchAxes{"n", {0}, 0}; }};
}

}  // namespace

D9M_REGISTER_OP(forward_op("resize_bilinear", "ResizeBilinear (NHWC, TF coordinate rules)"));
D9M_REGISTER_OP(forward_op("resize_nearest", "ResizeNearestNeighbor (NHWC, TF coordinate rules)"));

D9M_REGISTER_OP(OpDef{
    .name = "resize_bilinear_grad", .family = "resize",
    .summary = "ResizeBilinearGrad: each grads element split over 4 pixels with the bilinear weights",
    .params = resize_params(), .tolerance = 1e-5, .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      // Four taps per grads element.
      return op::scattering(Problem{{op::f32("grads", large(g)), op::f32("original_image", small(g))}, op::f32("output", small(g)), g},
                            {4, g.n, g.oh, g.ow, g.c}, "out_h");
    },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"n", {0, 0}, 0}; }});

D9M_REGISTER_OP(OpDef{
    .name = "resize_nearest_grad", .family = "resize",
    .summary = "ResizeNearestNeighborGrad: each grads element added to its nearest source pixel",
    .params = resize_params(), .tolerance = 1e-5, .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      return op::scattering(Problem{{op::f32("grads", large(g))}, op::f32("output", small(g)), g}, {g.n, g.oh, g.ow, g.c}, "out_h");
    },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"n", {0}, 0}; }});

}  // namespace d9m::resize
