// The attention ops: parameters, tensors and inputs (attention.h has the semantics).
#include <cmath>
#include <cstring>

#include "kernels/attention/attention.h"
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"

namespace d9m::attention {
namespace {

std::vector<ParamSpec> params() {
  return {op::integer("batch", "sequences (B)"), op::integer("heads", "attention heads (H)"),
          op::integer("seq_q", "queries per sequence (S)"), op::integer("seq_kv", "keys and values per sequence (Skv)"),
          op::integer("head_dim", "elements per head (D); scale = 1/sqrt(D)"),
          op::boolean_or("causal", false, "mask key j from query i when j > i (top-left aligned, as PyTorch's is_causal)")};
}

Problem plan(const Params& p, bool backward) {
  Geometry g;
  g.batch = p.integer("batch");
  g.heads = p.integer("heads");
  g.seq_q = p.integer("seq_q");
  g.seq_kv = p.integer("seq_kv");
  g.dim = p.integer("head_dim");
  g.causal = p.boolean("causal");
  g.scale = 1.0 / std::sqrt(static_cast<double>(g.dim));
  op::checked_product({g.batch, g.heads, g.seq_q, g.dim}, "seq_q");
  op::checked_product({g.batch, g.heads, g.seq_kv, g.dim}, "seq_kv");
  // The backward's P and dS matrices (one score per query and key), and dQ's block partials.
  op::checked_product({g.batch, g.heads, g.seq_q, g.seq_kv}, "seq_kv");
  op::checked_product({g.batch, g.heads, g.seq_q, g.dim, g.key_blocks()}, "seq_kv");
  const Shape q{g.batch, g.heads, g.seq_q, g.dim}, kv{g.batch, g.heads, g.seq_kv, g.dim};
  if (!backward) return Problem{{op::f32("q", q), op::f32("k", kv), op::f32("v", kv)}, op::f32("o", q), g};
  return Problem{{op::f32("q", q), op::f32("k", kv), op::f32("v", kv), op::f32("d_o", q)},
                 op::f32("dq_dk_dv", {g.batch, g.heads, g.packed_rows(), g.dim}), g};
}

// Random inputs in [-1, 1). Exact inputs make every sum exact, as the other families' do, so all
// variants agree bit for bit whatever their order: q = 0 makes every score 0 and softmax 1/Skv,
// a power of two in the exact configs (suites/unit/kernels_agreement_test.cpp), and the rest are
// small integers.
void fill(const Problem&, FillMode mode, std::vector<FillTarget>& in) {
  for (auto& t : in) {
    if (mode == FillMode::exact && t.stream == 0) std::memset(t.data, 0, static_cast<std::size_t>(t.desc.numel()) * sizeof(float));
    else fill::floats(t, mode);
  }
}

// Scores, softmax and the backward's sums over S keys or queries differ by association only, a
// few units of roundoff times sqrt(S) on random inputs; 2e-5 relative holds to S of several
// thousand in f32 (and x 2^-29 in f64).
constexpr double kTolerance = 2e-5;

// At f16 and bf16 the f32 rule scaled by the unit roundoff u (x 2^13, x 2^16) would be 335 u,
// as large as the outputs (averages of v, mostly well under 1): it would pass a wrong kernel.
// d9m's variants sum in f32 and round each output once. cuDNN rounds P (and the backward's dS)
// to the dtype before its products, as FlashAttention does: u per term, and since P's rows sum
// to 1, at most u max|v| on o, and about sqrt(D)/3 u on dQ and dK with d9m's inputs (2.7 u at
// D = 64, 3.8 u at D = 128). So 8 u (1 + max|serial|): 0.004 at f16 and 0.031 at bf16.
double agreement(const Problem& p, double max_ref) {
  switch (p.output.dtype) {
    case DType::f16: return 8 * 0x1p-11 * (1 + max_ref);
    case DType::bf16: return 8 * 0x1p-8 * (1 + max_ref);
    case DType::f64: return kTolerance * 0x1p-29 * (1 + max_ref);
    default: return kTolerance * (1 + max_ref);
  }
}

BatchAxes batch_axes(std::size_t inputs) { return BatchAxes{"batch", std::vector<int>(inputs, 0), 0}; }

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "sdpa", .family = "attention",
    .summary = "scaled dot-product attention: o = softmax(q k^T / sqrt(D)) v per head, optionally causal",
    .params = params(),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) { return plan(p, false); },
    .fill = fill,
    .batch = [](const Params&) { return batch_axes(3); },
    .agreement = agreement});

D9M_REGISTER_OP(OpDef{
    .name = "sdpa_bwd", .family = "attention",
    .summary = "attention backward: dQ, dK, dV of sdpa from dO (forward recomputed), stacked along the sequence axis",
    .params = params(),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) { return plan(p, true); },
    .fill = fill,
    .batch = [](const Params&) { return batch_axes(4); },
    .agreement = agreement});

}  // namespace d9m::attention
