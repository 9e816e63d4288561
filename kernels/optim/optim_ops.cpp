// The optim family: parameters, tensors and inputs (optim.h has the semantics).
#include <cmath>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/optim/optim.h"

namespace d9m::optim {

D9M_REGISTER_OP(OpDef{
    .name = "sgd_update",
    .family = "optim",
    .summary = "TensorFlow ApplyGradientDescent / torch.optim.SGD step: output = param - lr * grad",
    .params = [] {
      auto p = op::elementwise_params();
      p.push_back(op::real_or("lr", 0.01, "learning rate"));
      return p;
    }(),
    .tolerance = 0.0,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Shape s = op::elementwise_shape(p);
      const double lr = p.real("lr");
      if (!std::isfinite(lr)) throw InvalidConfig("lr", "the learning rate is a finite number");
      return Problem{{op::f32("param", s), op::f32("grad", s)}, op::f32("output", s), Geometry{numel(s), lr}};
    },
    .fill = [](const Problem&, FillMode mode, std::vector<FillTarget>& in) {
      for (auto& t : in) fill::floats(t, mode);
    },
    // No batch: a parameter tensor has no batch axis.
});

}  // namespace d9m::optim
