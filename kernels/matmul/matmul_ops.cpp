// The matmul ops: parameters, tensors and inputs.
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/matmul/matmul.h"

namespace d9m::matmul {
namespace {

std::vector<ParamSpec> params(bool batched) {
  std::vector<ParamSpec> p;
  if (batched) p.push_back(op::integer("batch", "batch elements (B)"));
  for (ParamSpec s : {op::integer("m", "rows of the output (M)"), op::integer("n", "columns of the output (N)"),
                      op::integer("k", "the summed dimension (K)"),
                      op::choice_or("layout", "NN", {"NN", "TN", "NT"},
                                    "NN: a[M,K] b[K,N]; TN: a stored [K,M] (transpose_a); NT: b stored [N,K] (transpose_b)")})
    p.push_back(std::move(s));
  return p;
}

Problem plan(const Params& p, bool batched) {
  Geometry g;
  g.batch = batched ? p.integer("batch") : 1;
  g.m = p.integer("m");
  g.n = p.integer("n");
  g.k = p.integer("k");
  g.trans_a = p.choice("layout") == "TN";
  g.trans_b = p.choice("layout") == "NT";
  op::checked_product({g.batch, g.m, g.k}, "k");
  op::checked_product({g.batch, g.k, g.n}, "k");
  op::checked_product({g.batch, g.m, g.n, g.chunks()}, "m");  // the ordered variants' chunk sums
  Shape a = g.trans_a ? Shape{g.k, g.m} : Shape{g.m, g.k};
  Shape b = g.trans_b ? Shape{g.n, g.k} : Shape{g.k, g.n};
  Shape c{g.m, g.n};
  if (batched) {
    a.insert(a.begin(), g.batch);
    b.insert(b.begin(), g.batch);
    c.insert(c.begin(), g.batch);
  }
  return Problem{{op::f32("a", a), op::f32("b", b)}, op::f32("product", c), g};
}

void fill_floats(const Problem&, FillMode mode, std::vector<FillTarget>& in) {
  for (auto& t : in) fill::floats(t, mode);
}

// Summation order shows in the last bits only; 1e-5 relative covers K up to a few thousand at
// f32 (the bound grows with K times the unit roundoff).
constexpr double kTolerance = 1e-5;

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "matmul", .family = "matmul",
    .summary = "MatMul: product[M,N] = op(a) op(b), op per layout (NN, TN, NT); every linear layer",
    .params = params(false),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .math_modes = {"default", "tf32", "fp32-strict"},
    .plan = [](const Params& p) { return plan(p, false); },
    .fill = fill_floats,
    // M is the batch of a linear layer (tokens, or samples): the rows of a, stored transposed
    // under TN; b is the weight every row shares. (Thinking Machines' test: mm(a[:1], b) against
    // mm(a, b)[:1].)
    .batch = [](const Params& p) { return BatchAxes{"m", {p.choice("layout") == "TN" ? 1 : 0, -1}, 0}; }});

D9M_REGISTER_OP(OpDef{
    .name = "matmul_batched", .family = "matmul",
    .summary = "BatchMatMul: product[B,M,N] = op(a[B]) op(b[B]), each batch element independent",
    .params = params(true),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .math_modes = {"default", "tf32", "fp32-strict"},
    .plan = [](const Params& p) { return plan(p, true); },
    .fill = fill_floats,
    .batch = [](const Params&) { return BatchAxes{"batch", {0, 0}, 0}; }});

}  // namespace d9m::matmul
