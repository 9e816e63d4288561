#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_params.h"

namespace d9m::conv {
namespace {

std::vector<ParamSpec> conv_params() {
  std::vector<ParamSpec> p = {op::integer("n", "batch"), op::integer("h", "input height"), op::integer("w", "input width"),
                              op::integer("ci", "input channels"), op::integer("co", "output channels (filters)")};
  for (auto& spec : window_params()) p.push_back(std::move(spec));
  return p;
}

Geometry geometry(const Params& p) {
  const auto [y, x] = windows(p);
  return {p.integer("n"), p.integer("ci"), p.integer("co"), y, x};
}

void fill_floats(const Problem&, FillMode mode, std::vector<FillTarget>& in) {
  for (auto& t : in) fill::floats(t, mode);
}

Shape input_shape(const Geometry& g) { return {g.n, g.y.in, g.x.in, g.ci}; }
Shape filter_shape(const Geometry& g) { return {g.y.k, g.x.k, g.ci, g.co}; }
Shape dy_shape(const Geometry& g) { return {g.n, g.y.out, g.x.out, g.co}; }  // also conv2d's output

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "conv2d",
    .family = "conv",
    .summary = "Conv2D: 2-D convolution (cross-correlation) of an NHWC input with an HWIO filter",
    .params = conv_params(),
    .tolerance = 1e-4,
    .dtypes = {DType::f32, DType::f16, DType::bf16},
    // cuDNN's math types: CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_FMA_MATH.
    .math_modes = {"default", "tf32", "fp32-strict"},
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      op::checked_product({g.n, g.y.out, g.x.out, g.co, parts_per_output(g)}, "co");  // the split variants' threads
      return Problem{{op::f32("input", input_shape(g)), op::f32("filter", filter_shape(g))}, op::f32("output", dy_shape(g)), g};
    },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"n", {0, -1}, 0}; },
});

D9M_REGISTER_OP(OpDef{
    .name = "conv2d_bwd_data",
    .family = "conv",
    .summary = "Conv2DBackpropInput: gradient of a 2-D convolution w.r.t. its input (NHWC, HWIO)",
    .params = conv_params(),
    .tolerance = 1e-4,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      // At most every tap of every position, times ci * co.
      return op::scattering(Problem{{op::f32("filter", filter_shape(g)), op::f32("out_backprop", dy_shape(g))}, op::f32("output", input_shape(g)), g},
                            {g.n, g.y.out, g.x.out, g.y.k, g.x.k, g.ci, g.co}, "co");
    },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"n", {-1, 0}, 0}; },
});

D9M_REGISTER_OP(OpDef{
    .name = "conv2d_bwd_filter",
    .family = "conv",
    .summary = "Conv2DBackpropFilter: gradient of a 2-D convolution w.r.t. its filter (NHWC, HWIO)",
    .params = conv_params(),
    .tolerance = 1e-4,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      return op::scattering(Problem{{op::f32("input", input_shape(g)), op::f32("out_backprop", dy_shape(g))}, op::f32("output", filter_shape(g)), g},
                            {g.n, g.y.out, g.x.out, g.y.k, g.x.k, g.ci, g.co}, "co");
    },
    .fill = fill_floats,
});

}  // namespace d9m::conv
