// The dilation gradients: parameters, tensors and inputs (dilation.h has the semantics).
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/dilation/dilation.h"

namespace d9m::dilation {
namespace {

std::vector<ParamSpec> params() {
  return {op::integer("n", "batch"), op::integer("h", "input height"), op::integer("w", "input width"),
          op::integer("c", "channels (depth)"), op::integer("filter_h", "filter height"),
          op::integer("filter_w", "filter width"), op::integer_or("stride_h", 1, "vertical stride"),
          op::integer_or("stride_w", 1, "horizontal stride"), op::integer_or("rate_h", 1, "vertical rate (dilation)"),
          op::integer_or("rate_w", 1, "horizontal rate (dilation)"),
          op::choice_or("padding", "SAME", {"VALID", "SAME"}, "TensorFlow padding")};
}

Geometry geometry(const Params& p) {
  const auto& pad = p.choice("padding");
  return {p.integer("n"), p.integer("c"),
          make_window(p.integer("h"), p.integer("filter_h"), p.integer("stride_h"), p.integer("rate_h"), pad, "filter_h"),
          make_window(p.integer("w"), p.integer("filter_w"), p.integer("stride_w"), p.integer("rate_w"), pad, "filter_w")};
}

Problem plan(const Params& p, bool to_filter) {
  const Geometry g = geometry(p);
  op::checked_product({g.n, g.y.in, g.x.in, g.c}, "h");
  op::checked_product({g.n, g.y.out, g.x.out, g.c}, "h");
  const Shape in{g.n, g.y.in, g.x.in, g.c}, filter{g.y.k, g.x.k, g.c}, out{g.n, g.y.out, g.x.out, g.c};
  // One contribution per out_backprop element, at its maximum's input position or filter tap.
  return op::scattering(Problem{{op::f32("input", in), op::f32("filter", filter), op::f32("out_backprop", out)},
                                op::f32(to_filter ? "filter_backprop" : "in_backprop", to_filter ? filter : in), g},
                        {g.n, g.y.out, g.x.out, g.c}, "h");
}

// input and filter stay random in both modes (the maxima, as max-pool's orig_input: ties rare,
// and broken alike by every variant); exactness concerns the sums of out_backprop only.
void fill(const Problem&, FillMode mode, std::vector<FillTarget>& in) {
  fill::floats(in[0], FillMode::random);
  fill::floats(in[1], FillMode::random);
  fill::floats(in[2], mode);
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "dilation2d_bwd_input", .family = "dilation",
    .summary = "Dilation2DBackpropInput: each output's gradient added at the input position of its max of input + filter (NHWC)",
    .params = params(),
    .tolerance = 1e-5,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) { return plan(p, false); },
    .fill = fill,
    .batch = [](const Params&) { return BatchAxes{"n", {0, -1, 0}, 0}; }});

D9M_REGISTER_OP(OpDef{
    .name = "dilation2d_bwd_filter", .family = "dilation",
    .summary = "Dilation2DBackpropFilter: each output's gradient added at the filter tap of its max of input + filter",
    .params = params(),
    .tolerance = 1e-5,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) { return plan(p, true); },
    .fill = fill});

}  // namespace d9m::dilation
