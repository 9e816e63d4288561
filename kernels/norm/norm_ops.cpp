// The norm family: parameters, tensors and inputs (norm.h has the semantics).
#include <cmath>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/norm/norm.h"

namespace d9m::norm {
namespace {

std::vector<ParamSpec> params(bool with_epsilon) {
  std::vector<ParamSpec> p = {op::integer("rows", "rows normalised independently (R: tokens, or batch x positions)"),
                              op::integer("dim", "the normalised last dim (D)")};
  if (with_epsilon) p.push_back(op::real_or("epsilon", 1e-5, "added to the variance before the square root (PyTorch's default 1e-5)"));
  return p;
}

Geometry geometry(const Params& p, bool with_epsilon, Param param = Param::gamma) {
  Geometry g;
  g.rows = p.integer("rows");
  g.dim = p.integer("dim");
  op::checked_product({g.rows, g.dim}, "dim");
  // D as a float divisor is exact below 2^24; beyond, the mean would divide by a rounded D.
  if (g.dim > (std::int64_t{1} << 24)) throw InvalidConfig("dim", "at most 2^24 (D is a float divisor)");
  if (with_epsilon) {
    g.epsilon = p.real("epsilon");
    if (!std::isfinite(g.epsilon) || g.epsilon < 0) throw InvalidConfig("epsilon", "a finite number >= 0");
  }
  g.param = param;
  return g;
}

// Random: [-1, 1) for x, gamma, beta and dy alike. Exact: small integers, but x's rows are pairs
// (+2^k, -2^k) in a drawn order, k in [0, 4) drawn per row (an odd dim's last element 0), so
// each row's mean is 0 and its variance 4^k (times (D - 1) / D for an odd D): with epsilon 0
// and an even D, rstd = 2^-k and (x - mean) rstd = +-1 exactly, every dgamma term is +-dy, and
// the parameter gradients' sums are exact in any order, as the other families' exact inputs make
// theirs.
void fill_inputs(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  for (auto& t : in) {
    if (mode == FillMode::random || t.desc.name != "x") {
      fill::floats(t, mode);
      continue;
    }
    const Geometry& g = pr.geom<Geometry>();
    const CounterRng rng(t.seed, t.stream), signs(t.seed ^ 0x5eedu, t.stream);
    auto* x = static_cast<float*>(t.data);
    for (std::int64_t r = 0; r < g.rows; ++r) {
      const auto scale = static_cast<float>(1u << rng.below(static_cast<std::uint64_t>(r), 4));
      for (std::int64_t c = 0; c + 1 < g.dim; c += 2) {
        const std::int64_t i = r * g.dim + c;
        const float first = (signs.bits(static_cast<std::uint64_t>(i)) & 1u) ? scale : -scale;
        x[i] = first;
        x[i + 1] = -first;
      }
      if (g.dim % 2) x[r * g.dim + g.dim - 1] = 0.0f;
    }
  }
}

// The row-by-row ops compute each row with the same code in every variant: the tolerance is
// never used. The parameter gradients reorder a sum of R terms of either sign; as for bias_add_grad,
// 1e-4 of (1 + max|serial|) in f32 leaves room to R of several thousand (x 2^-29 in f64).
constexpr double kTolerance = 1e-4;

// At f16 and bf16 the sums are in f32 and each output is rounded once: two orders differ by the
// f32 rule before that rounding, and the rounding may then fall either side, one unit of T. The
// default rule scaled by T's unit roundoff (x 2^13, x 2^16) would be as large as the outputs.
double agreement(const Problem& p, double max_ref) {
  switch (p.output.dtype) {
    case DType::f16: return (kTolerance + 2 * 0x1p-11) * (1 + max_ref);
    case DType::bf16: return (kTolerance + 2 * 0x1p-8) * (1 + max_ref);
    case DType::f64: return kTolerance * 0x1p-29 * (1 + max_ref);
    default: return kTolerance * (1 + max_ref);
  }
}

OpDef param_grad_op(const char* name, Param param, const char* summary) {
  const bool gamma = param == Param::gamma;
  return OpDef{
      .name = name, .family = "norm", .summary = summary, .params = params(gamma), .tolerance = kTolerance,
      .dtypes = op::all_float_dtypes(),
      .plan = [gamma, param](const Params& p) {
        const Geometry g = geometry(p, gamma, param);
        const Shape rows{g.rows, g.dim};
        std::vector<TensorDesc> in = {op::f32("dy", rows)};
        if (gamma) in.push_back(op::f32("x", rows));
        return Problem{std::move(in), op::f32(gamma ? "dgamma" : "dbeta", {g.dim}), g};
      },
      .fill = fill_inputs,
      // No batch: every output sums over all the rows.
      .agreement = agreement};
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "layer_norm", .family = "norm",
    .summary = "PyTorch layer_norm over the last dim: y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance",
    .params = params(true), .tolerance = kTolerance, .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p, true);
      const Shape rows{g.rows, g.dim};
      return Problem{{op::f32("x", rows), op::f32("gamma", {g.dim}), op::f32("beta", {g.dim})}, op::f32("y", rows), g};
    },
    .fill = fill_inputs,
    .batch = [](const Params&) { return BatchAxes{"rows", {0, -1, -1}, 0}; },
    .agreement = agreement});

D9M_REGISTER_OP(OpDef{
    .name = "layer_norm_grad_input", .family = "norm",
    .summary = "layer_norm's gradient in x: rstd / D (D dy gamma - xhat sum(dy gamma xhat) - sum(dy gamma)) per row",
    .params = params(true), .tolerance = kTolerance, .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p, true);
      const Shape rows{g.rows, g.dim};
      return Problem{{op::f32("dy", rows), op::f32("x", rows), op::f32("gamma", {g.dim})}, op::f32("dx", rows), g};
    },
    .fill = fill_inputs,
    .batch = [](const Params&) { return BatchAxes{"rows", {0, 0, -1}, 0}; },
    .agreement = agreement});

D9M_REGISTER_OP(param_grad_op("layer_norm_grad_gamma", Param::gamma,
                              "layer_norm's gradient in gamma: dgamma[c] = sum over rows of dy * (x - mean) * rstd"));
D9M_REGISTER_OP(param_grad_op("layer_norm_grad_beta", Param::beta, "layer_norm's gradient in beta: dbeta[c] = sum over rows of dy"));

}  // namespace d9m::norm
