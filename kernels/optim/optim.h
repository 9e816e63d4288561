// optim family: parameter updates of an optimizer step, elementwise on a tensor of any shape.
//   sgd_update(param, grad; lr) -> output = param - lr * grad
// TensorFlow's ApplyGradientDescent (var -= grad * lr) and torch.optim.SGD without momentum,
// weight decay or dampening (param.add_(grad, alpha=-lr)), written to a new tensor instead of in
// place. Arithmetic: lr is the config's real rounded to Acc<T> (float for f32, f16 and bf16, double
// for f64); the product lr * g and the difference p - lr g are each rounded in Acc<T> (no fma: the
// build turns contraction off); at f16 and bf16 the inputs are widened exactly to float, the update
// is computed in float as at f32 and rounded once to the 16-bit type at the end, as PyTorch's
// opmath does (TensorFlow's Eigen half arithmetic would round the product to half first).
// No sums across elements: every variant gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/registry.h"

namespace d9m::optim {

struct Geometry {
  std::int64_t elements = 0;
  double lr = 0.01;
};

template <class T>
D9M_HD inline T sgd_step(T param, T grad, Acc<T> lr) {
  return narrow<T>(widen(param) - lr * widen(grad));
}

// In map form (kernels/common/map_variants.h): one item per element.
template <class T>
struct SgdMap {
  std::size_t n;
  Acc<T> lr;
  const T* param;
  const T* grad;
  explicit SgdMap(const KernelArgs& a)
      : n(static_cast<std::size_t>(a.problem.geom<Geometry>().elements)),
        lr(static_cast<Acc<T>>(a.problem.geom<Geometry>().lr)),
        param(a.in<T>(0)),
        grad(a.in<T>(1)) {}
  std::size_t items() const { return n; }
  D9M_HD void operator()(std::size_t i, T* out) const { out[i] = sgd_step(param[i], grad[i], lr); }
};

}  // namespace d9m::optim
