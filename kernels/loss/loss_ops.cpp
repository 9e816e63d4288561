// The loss family: parameters, tensors and inputs (loss.h has the semantics).
#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/loss/loss.h"

namespace d9m::loss {
namespace {

std::vector<ParamSpec> params() {
  return {op::integer("n", "examples (N)"),
          op::integer("classes", "classes (C)"),
          op::integer_or("h", 0,
                         "spatial height H: 0 for an input [N, C] (PyTorch's nll_loss kernel), > 0 for [N, C, H, W] (nll_loss2d)",
                         0),
          op::integer_or("w", 0, "spatial width W (0 with h = 0)", 0),
          op::choice_or("reduction", "mean", {"mean", "sum"},
                        "mean: the terms' sum over the sum of the weights of the non-ignored targets; sum"),
          op::boolean_or("weighted", false, "with a class-weight input weight[C]"),
          op::integer_or("ignore_index", -100, "targets equal to it contribute nothing (PyTorch's default -100)",
                         -kMaxIntegerParam),
          op::integer_or("ignored_percent", 0, "percent of the targets the fill sets to ignore_index", 0)};
}

Geometry geometry(const Params& p, bool logits) {
  Geometry g;
  g.n = p.integer("n");
  g.classes = p.integer("classes");
  g.h = p.integer("h");
  g.w = p.integer("w");
  if ((g.h == 0) != (g.w == 0)) throw InvalidConfig("w", "h and w are both 0 (input [N, C]) or both positive ([N, C, H, W])");
  g.reduction = p.choice("reduction") == "sum" ? Reduction::sum : Reduction::mean;
  g.weighted = p.boolean("weighted");
  g.ignore_index = static_cast<std::int32_t>(p.integer("ignore_index"));
  g.logits = logits;
  g.ignored_percent = p.integer("ignored_percent");
  if (g.ignored_percent > 100) throw InvalidConfig("ignored_percent", "a percentage: at most 100");
  op::checked_product({g.n, g.classes, g.spatial() ? g.h : 1, g.spatial() ? g.w : 1}, "classes");
  // PyTorch's nll_loss2d indexes a sample's positions and the block count in int.
  if (g.map() > kMaxIntegerParam || g.blocks() > kMaxIntegerParam)
    throw InvalidConfig("h", "more than 2^31 positions per example or blocks");
  return g;
}

Problem plan(const Params& p, bool logits) {
  const Geometry g = geometry(p, logits);
  Shape in = {g.n, g.classes}, tgt = {g.n};
  if (g.spatial()) {
    in = {g.n, g.classes, g.h, g.w};
    tgt = {g.n, g.h, g.w};
  }
  std::vector<TensorDesc> inputs = {op::f32(logits ? "logits" : "input", in), op::i32("target", tgt)};
  if (g.weighted) inputs.push_back(op::f32("weight", {g.classes}));
  return Problem{std::move(inputs), op::f32("loss", {1}), g};
}

// Targets in [0, C); `ignored_percent` of them (decided by the draw's low 16 bits, independent of
// the class, which takes the high 32) set to ignore_index.
void fill_targets(FillTarget& t, const Geometry& g, std::int64_t ignored_percent) {
  const CounterRng rng(t.seed, t.stream);
  auto* out = static_cast<std::int32_t*>(t.data);
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(t.desc.numel()); ++i) {
    const bool ignored = static_cast<std::int64_t>(((rng.bits(i) & 0xffffu) * 100) >> 16) < ignored_percent;
    out[i] = ignored ? g.ignore_index : static_cast<std::int32_t>(rng.below(i, static_cast<std::uint32_t>(g.classes)));
  }
}

// Class weights, positive as the frameworks' users give them (a zero weight sum would make the
// mean 0/0): [0.25, 2) on the 2^-23 grid, or the integers 1 to 4 in exact mode.
void fill_weights(FillTarget& t, FillMode mode) {
  const CounterRng rng(t.seed, t.stream);
  auto* w = static_cast<float*>(t.data);
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(t.desc.numel()); ++i)
    w[i] = mode == FillMode::random ? 0.25f + 0.875f * (rng.unit_symmetric(i) + 1.0f) : static_cast<float>(1 + rng.below(i, 4));
}

// nll_loss's input: log-probabilities in (-2, 0] (so 16-bit sums of a few thousand terms stay far
// below 65504), or the exact integers of fill::floats.
void fill_log_probs(FillTarget& t, FillMode mode) {
  fill::floats(t, mode);
  if (mode == FillMode::exact) return;
  auto* x = static_cast<float*>(t.data);
  for (std::int64_t i = 0; i < t.desc.numel(); ++i) x[i] = -(1.0f + x[i]);
}

// softmax_cross_entropy's logits: [-4, 4) on the 2^-21 grid. Exact mode makes log_softmax exact
// in f32: at each position one class (drawn) has logit 0 and the others -128 k, k in 1..4, whose
// exp underflows to 0 (exp_nonpositive flushes below 2^-126), so the denominator is exactly 1,
// its log exactly 0, and log_softmax is the logit itself.
void fill_logits(FillTarget& t, const Geometry& g, FillMode mode) {
  const CounterRng rng(t.seed, t.stream), hot(t.seed ^ 0x5eedu, t.stream);
  auto* x = static_cast<float*>(t.data);
  for (std::int64_t p = 0; p < g.positions(); ++p)
    for (std::int64_t c = 0; c < g.classes; ++c) {
      const auto i = static_cast<std::uint64_t>(g.at(p, c));
      if (mode == FillMode::random) x[i] = 4.0f * rng.unit_symmetric(i);
      else if (c == hot.below(static_cast<std::uint64_t>(p), static_cast<std::uint32_t>(g.classes))) x[i] = 0.0f;
      else x[i] = -128.0f * static_cast<float>(1 + rng.below(i, 4));
    }
}

// The reference and the atomic variants sum the same terms in different orders: the serial sum
// of n terms of one sign drifts by about u sqrt(n) of it in a random walk, 1.5e-5 at n = 2^16 in
// f32; 1e-4 of (1 + |loss|) leaves room to 2^20 positions (the catalogue's are below 2^15).
constexpr double kTolerance = 1e-4;

// The inputs of every op of the family: softmax_cross_entropy_grad gets the loss's own tensors.
void fill_inputs(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  const auto& g = pr.geom<Geometry>();
  if (g.logits) fill_logits(in[0], g, mode);
  else fill_log_probs(in[0], mode);
  fill_targets(in[1], g, g.ignored_percent);
  if (g.weighted) fill_weights(in[2], mode);
}

OpDef loss_op(const char* name, bool logits, const char* summary) {
  return OpDef{
      .name = name, .family = "loss", .summary = summary, .params = params(), .tolerance = kTolerance,
      .dtypes = op::all_float_dtypes(),
      .plan = [logits](const Params& p) { return plan(p, logits); },
      .fill = fill_inputs};
}

}  // namespace

D9M_REGISTER_OP(loss_op("nll_loss", false,
                        "PyTorch's nll_loss forward, reduction mean or sum, class weights, ignore_index; input [N, C] or "
                        "[N, C, H, W] (nll_loss2d)"));
D9M_REGISTER_OP(loss_op("softmax_cross_entropy", true,
                        "PyTorch's cross_entropy: nll_loss of log_softmax(logits, dim 1), reduction mean or sum, class "
                        "weights, ignore_index"));

// Every variant computes each row with grad_row after one fixed-order sum of the weights: the same
// bits; the tolerance is the default one, never used.
D9M_REGISTER_OP(OpDef{
    .name = "softmax_cross_entropy_grad",
    .family = "loss",
    .summary = "d softmax_cross_entropy / d logits for grad_output 1: (softmax - onehot(target)) * w_t, / weight sum for mean",
    .params = params(),
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      Problem pr = plan(p, true);
      pr.output = op::f32("grad", pr.inputs[0].shape);
      return pr;
    },
    .fill = fill_inputs,
    // No batch: mean divides every row by the weight sum of the whole batch.
});

}  // namespace d9m::loss
