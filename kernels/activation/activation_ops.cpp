// The activation family: parameters, tensors and inputs (activation.h has the semantics).
#include "kernels/activation/activation.h"
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"

namespace d9m::activation {
namespace {

Geometry geometry(const Shape& s) { return {numel(s)}; }

void fill_floats(const Problem&, FillMode mode, std::vector<FillTarget>& in) {
  for (auto& t : in) fill::floats(t, mode);  // [-1, 1): about half the features are <= 0
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "relu",
    .family = "activation",
    .summary = "TensorFlow Relu: output = max(features, 0), NaN in NaN out",
    .params = op::elementwise_params(),
    .tolerance = 0.0,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Shape s = op::elementwise_shape(p);
      return Problem{{op::f32("features", s)}, op::f32("output", s), geometry(s)};
    },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"n", {0}, 0}; },
});

D9M_REGISTER_OP(OpDef{
    .name = "relu_grad",
    .family = "activation",
    .summary = "TensorFlow ReluGrad: output = gradients * (features > 0)",
    .params = op::elementwise_params(),
    .tolerance = 0.0,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Shape s = op::elementwise_shape(p);
      return Problem{{op::f32("gradients", s), op::f32("features", s)}, op::f32("output", s), geometry(s)};
    },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"n", {0, 0}, 0}; },
});

}  // namespace d9m::activation
