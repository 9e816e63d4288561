// The depthwise gradients: parameters, tensors and inputs (depthwise.h has the semantics).
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/conv/conv_params.h"
#include "kernels/depthwise/depthwise.h"

namespace d9m::depthwise {
namespace {

std::vector<ParamSpec> params() {
  std::vector<ParamSpec> p = {op::integer("n", "batch"), op::integer("h", "input height"), op::integer("w", "input width"),
                              op::integer("c", "input channels (in_depth)"),
                              op::integer_or("multiplier", 1, "channel multiplier M: C * M output channels")};
  for (auto& spec : conv::window_params()) p.push_back(std::move(spec));
  return p;
}

Geometry geometry(const Params& p) {
  const auto [y, x] = conv::windows(p);
  Geometry g{p.integer("n"), p.integer("c"), p.integer("multiplier"), y, x};
  op::checked_product({g.n, g.y.in, g.x.in, g.c}, "h");
  op::checked_product({g.n, g.y.out, g.x.out, g.c, g.m, g.y.k, g.x.k}, "multiplier");  // the split atomic sources
  return g;
}

Shape input_shape(const Geometry& g) { return {g.n, g.y.in, g.x.in, g.c}; }
Shape filter_shape(const Geometry& g) { return {g.y.k, g.x.k, g.c, g.m}; }
Shape dy_shape(const Geometry& g) { return {g.n, g.y.out, g.x.out, out_channels(g)}; }

void fill_floats(const Problem&, FillMode mode, std::vector<FillTarget>& in) {
  for (auto& t : in) fill::floats(t, mode);
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "depthwise_conv2d_bwd_data",
    .family = "depthwise",
    .summary = "DepthwiseConv2dNativeBackpropInput: gradient of a depthwise convolution w.r.t. its input (NHWC, "
               "filter [KH, KW, C, M], out channel c*M+m)",
    .params = params(),
    .tolerance = 1e-4,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      return Problem{{op::f32("filter", filter_shape(g)), op::f32("out_backprop", dy_shape(g))}, op::f32("in_backprop", input_shape(g)), g};
    },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"n", {-1, 0}, 0}; },
});

// The filter gradient sums over the batch: no batch axis.
D9M_REGISTER_OP(OpDef{
    .name = "depthwise_conv2d_bwd_filter",
    .family = "depthwise",
    .summary = "DepthwiseConv2dNativeBackpropFilter: gradient of a depthwise convolution w.r.t. its filter [KH, KW, C, M] "
               "(NHWC, out channel c*M+m)",
    .params = params(),
    .tolerance = 1e-4,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      return Problem{{op::f32("input", input_shape(g)), op::f32("out_backprop", dy_shape(g))}, op::f32("filter_backprop", filter_shape(g)), g};
    },
    .fill = fill_floats,
});

}  // namespace d9m::depthwise
