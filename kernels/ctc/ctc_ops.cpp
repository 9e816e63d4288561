// ctc_loss_bwd: parameters, tensors and inputs (ctc.h has the semantics).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/counter_rng.h"
#include "kernels/common/elementary.h"
#include "kernels/common/op_helpers.h"
#include "kernels/ctc/ctc.h"

namespace d9m::ctc {
namespace {

std::vector<ParamSpec> params() {
  return {op::integer("time", "time steps T of log_probs [T, N, C]"), op::integer("batch", "sequences N"),
          op::integer("classes", "classes C, the blank (0) included", 2),
          op::integer("target_length", "S: the longest target; targets are [N, S], padded"),
          op::choice_or("lengths", "fixed", {"fixed", "varying"},
                        "fixed: every input length T and target length S; varying: drawn per sequence "
                        "(targets of S/2 to S labels, inputs from the shortest that fits to T)")};
}

Geometry geometry(const Params& p) {
  Geometry g;
  g.time = p.integer("time");
  g.batch = p.integer("batch");
  g.classes = p.integer("classes");
  g.max_target = p.integer("target_length");
  g.varying = p.choice("lengths") == "varying";
  // A target of S labels needs S steps, and one more per label repeated next to itself (a blank
  // must separate them): S + (S - 1) at worst, which the fill may draw.
  if (g.time < 2 * g.max_target - 1)
    throw InvalidConfig("time", "time must be at least 2 target_length - 1, so that any target of that length fits "
                                "(a label repeated next to itself needs a blank between)");
  op::checked_product({g.time, g.batch, g.classes}, "classes");
  op::checked_product({g.batch, g.time, g.states()}, "target_length");
  return g;
}

// log_softmax of one step's logits z[0..C), in double with elementary.h's exp and log (IEEE
// arithmetic only: the same bits from every libm), rounded to float.
void log_softmax_row(const double* z, std::int64_t classes, float* out) {
  double m = z[0];
  for (std::int64_t c = 1; c < classes; ++c) m = std::max(m, z[c]);
  double sum = 0;
  for (std::int64_t c = 0; c < classes; ++c) sum += exp_nonpositive(z[c] - m);
  const double lse = m + log_positive(sum);
  for (std::int64_t c = 0; c < classes; ++c) out[c] = static_cast<float>(z[c] - lse);
}

// Inputs, in argument order log_probs, targets, input_lengths, target_lengths, grad_out (each
// input's own generator stream; lengths and labels of a sequence depend on that sequence's draws
// only, so a sub-batch cut from the batch is a valid batch).
//   random: logits in [-1, 1) on the 2^-23 grid (an untrained model's outputs, whose broad
//           alignment posteriors give each output several terms that move its sum), log_probs
//           their log_softmax; labels uniform in [1, C), so a class recurs at several positions of
//           a target once S reaches C - 1 (the collisions of the atomic collection); grad_out in
//           [0.5, 1.5).
//   exact:  there is no order-free arithmetic in log space, so exact mode removes the race
//           instead: the labels of a target are distinct (a cyclic run of classes from a random
//           start, the target cut to C - 1 labels), so no output receives two label terms and every
//           variant must give the same bits. Logits are integers in [-4, 4]; grad_out is 1.
void fill(const Problem& p, FillMode mode, std::vector<FillTarget>& in) {
  const auto& g = p.geom<Geometry>();
  const bool exact = mode == FillMode::exact;
  auto* targets = static_cast<std::int32_t*>(in[1].data);
  auto* input_lengths = static_cast<std::int32_t*>(in[2].data);
  auto* target_lengths = static_cast<std::int32_t*>(in[3].data);
  const CounterRng label_rng(in[1].seed, in[1].stream), input_rng(in[2].seed, in[2].stream),
      target_rng(in[3].seed, in[3].stream);
  const auto labels = static_cast<std::uint32_t>(g.classes - 1);
  for (std::int64_t n = 0; n < g.batch; ++n) {
    const auto un = static_cast<std::uint64_t>(n);
    const std::int64_t shortest = std::max<std::int64_t>(1, (g.max_target + 1) / 2);
    std::int64_t u = g.varying ? shortest + target_rng.below(un, static_cast<std::uint32_t>(g.max_target - shortest + 1)) : g.max_target;
    if (exact) u = std::min<std::int64_t>(u, labels);
    std::int32_t* row = targets + n * g.max_target;
    const std::uint32_t start = label_rng.below(un * static_cast<std::uint64_t>(g.max_target), labels);
    std::int64_t repeats = 0;
    for (std::int64_t j = 0; j < g.max_target; ++j) {
      if (j >= u) {
        row[j] = 0;  // padding, never read
        continue;
      }
      const auto at = un * static_cast<std::uint64_t>(g.max_target) + static_cast<std::uint64_t>(j);
      row[j] = 1 + static_cast<std::int32_t>(exact ? (start + static_cast<std::uint32_t>(j)) % labels : label_rng.below(at, labels));
      repeats += j > 0 && row[j] == row[j - 1];
    }
    const std::int64_t needed = u + repeats;  // <= 2S - 1 <= T
    target_lengths[n] = static_cast<std::int32_t>(u);
    input_lengths[n] = static_cast<std::int32_t>(
        g.varying ? needed + input_rng.below(un, static_cast<std::uint32_t>(g.time - needed + 1)) : g.time);
  }

  const CounterRng logit_rng(in[0].seed, in[0].stream);
  auto* lp = static_cast<float*>(in[0].data);
  std::vector<double> z(static_cast<std::size_t>(g.classes));
  for (std::int64_t r = 0; r < g.time * g.batch; ++r) {
    for (std::int64_t c = 0; c < g.classes; ++c) {
      const auto i = static_cast<std::uint64_t>(r * g.classes + c);
      z[static_cast<std::size_t>(c)] = exact ? static_cast<double>(static_cast<std::int32_t>(logit_rng.below(i, 9)) - 4)
                                             : logit_rng.unit_symmetric(i);
    }
    log_softmax_row(z.data(), g.classes, lp + r * g.classes);
  }

  const CounterRng grad_rng(in[4].seed, in[4].stream);
  auto* grad_out = static_cast<float*>(in[4].data);
  for (std::int64_t n = 0; n < g.batch; ++n)
    grad_out[n] = exact ? 1.0f : 1.0f + 0.5f * grad_rng.unit_symmetric(static_cast<std::uint64_t>(n));
}

// The variants differ only in the order of a few label terms per output (a few units of
// roundoff); the recursions are the same expressions everywhere.
constexpr double kTolerance = 1e-5;

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "ctc_loss_bwd", .family = "ctc",
    .summary = "CTC loss gradient (PyTorch ctc_loss backward, reduction none): exp(log_probs) - posteriors, "
               "times grad_out, [T, N, C]",
    .params = params(),
    .tolerance = kTolerance,
    .dtypes = {DType::f32, DType::f64},
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      return Problem{{op::f32("log_probs", {g.time, g.batch, g.classes}), op::i32("targets", {g.batch, g.max_target}),
                      op::i32("input_lengths", {g.batch}), op::i32("target_lengths", {g.batch}), op::f32("grad_out", {g.batch})},
                     op::f32("grad", {g.time, g.batch, g.classes}), g};
    },
    .fill = fill,
    .batch = [](const Params&) { return BatchAxes{"batch", {1, 0, 0, 0, 0}, 1}; }});

}  // namespace d9m::ctc
