// The upsample gradients: parameters, tensors and inputs (upsample.h has the semantics).
#include <string>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/upsample/upsample.h"

namespace d9m::upsample {
namespace {

std::vector<ParamSpec> params(bool three_d) {
  std::vector<ParamSpec> p = {op::integer("n", "batch"), op::integer("c", "channels")};
  if (three_d) p.push_back(op::integer("d", "input depth"));
  p.push_back(op::integer("h", "input height"));
  p.push_back(op::integer("w", "input width"));
  if (three_d) p.push_back(op::integer("out_d", "output depth"));
  p.push_back(op::integer("out_h", "output height"));
  p.push_back(op::integer("out_w", "output width"));
  p.push_back(op::boolean_or("align_corners", false, "PyTorch's align_corners (interpolate's default: false)"));
  return p;
}

Geometry geometry(const Params& p, bool three_d) {
  Geometry g;
  g.n = p.integer("n");
  g.c = p.integer("c");
  g.h = p.integer("h");
  g.w = p.integer("w");
  g.oh = p.integer("out_h");
  g.ow = p.integer("out_w");
  if (three_d) {
    g.d = p.integer("d");
    g.od = p.integer("out_d");
  }
  g.align_corners = p.boolean("align_corners");
  // PyTorch's kernels index with int: keep every tensor within 2^31 elements.
  if (op::checked_product({g.n, g.c, g.d, g.h, g.w}, "h") > kMaxIntegerParam ||
      op::checked_product({g.n, g.c, g.od, g.oh, g.ow}, "out_h") > kMaxIntegerParam)
    throw InvalidConfig("n", "PyTorch's upsample kernels index with int: tensors stay below 2^31 elements");
  return g;
}

Problem plan(const Params& p, bool three_d) {
  const Geometry g = geometry(p, three_d);
  Shape in{g.n, g.c, g.h, g.w}, out{g.n, g.c, g.oh, g.ow};
  if (three_d) {
    in = {g.n, g.c, g.d, g.h, g.w};
    out = {g.n, g.c, g.od, g.oh, g.ow};
  }
  return Problem{{op::f32("grad_output", out)}, op::f32("grad_input", in), g};
}

void fill(const Problem&, FillMode mode, std::vector<FillTarget>& in) { fill::floats(in[0], mode); }

// Sums of weighted gradients (bicubic weights reach -0.1 and 1.0): rounding only.
OpDef interp_op(std::string name, std::string summary, bool three_d) {
  return OpDef{.name = std::move(name), .family = "upsample", .summary = std::move(summary), .params = params(three_d),
               .tolerance = 1e-5,
               .dtypes = op::all_float_dtypes(),
               .plan = [three_d](const Params& p) { return plan(p, three_d); },
               .fill = fill,
               .batch = [](const Params&) { return BatchAxes{"n", {0}, 0}; }};
}

}  // namespace

D9M_REGISTER_OP(interp_op("resize_bicubic_grad",
                          "PyTorch upsample_bicubic2d backward (NCHW, A = -0.75, border taps clamped, align_corners)", false));
D9M_REGISTER_OP(interp_op("resize_trilinear_grad", "PyTorch upsample_trilinear3d backward (NCDHW, align_corners)", true));

}  // namespace d9m::upsample
