#include "kernels/bias_add/bias_add.h"
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"

namespace d9m::bias_add {
namespace {

std::vector<ParamSpec> nhwc_params() {
  return {op::integer("n", "batch"), op::integer("h", "height"), op::integer("w", "width"),
          op::integer("c", "channels")};
}

Geometry geometry(const Params& p) {
  return {op::checked_product({p.integer("n"), p.integer("h"), p.integer("w"), p.integer("c")}, "n") / p.integer("c"),
          p.integer("c")};
}

Shape nhwc(const Params& p) { return {p.integer("n"), p.integer("h"), p.integer("w"), p.integer("c")}; }

void fill_floats(const Problem&, FillMode mode, std::vector<FillTarget>& in) {
  for (auto& t : in) fill::floats(t, mode);
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "bias_add",
    .family = "bias_add",
    .summary = "output[n,h,w,c] = value[n,h,w,c] + bias[c] (NHWC)",
    .params = nhwc_params(),
    .tolerance = 0.0,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      return Problem{{op::f32("value", nhwc(p)), op::f32("bias", {p.integer("c")})},
                     op::f32("output", nhwc(p)), geometry(p)};
    },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"n", {0, -1}, 0}; },
});

D9M_REGISTER_OP(OpDef{
    .name = "bias_add_grad",
    .family = "bias_add",
    .summary = "output[c] = sum over n,h,w of out_backprop[n,h,w,c] (NHWC)",
    .params = nhwc_params(),
    .tolerance = 1e-4,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      return Problem{{op::f32("out_backprop", nhwc(p))}, op::f32("output", {p.integer("c")}),
                     geometry(p)};
    },
    .fill = fill_floats,
});

}  // namespace d9m::bias_add
