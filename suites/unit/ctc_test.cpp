// The CTC family's own properties (kernels/ctc/ctc.h; its log, and its exp above 0, are tested
// with the other elementary functions in elementary_test.cpp): the gradient against central
// differences of an independent forward, and the fill's promises (valid log-probabilities, feasible targets, repeats in random mode, none in exact mode).
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "kernels/common/accumulate.h"
#include "kernels/ctc/ctc.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::run_variant;
using test::values;

// -log p(target | y) of one sequence, in long double and in probability space (Graves' alpha
// recursion written out, no logarithms until the end): independent of the kernels' log space.
long double textbook_nll(const std::vector<long double>& y, const ctc::Geometry& g, std::int64_t n, const std::vector<double>& targets,
                         std::int64_t steps, std::int64_t labels) {
  std::vector<std::int64_t> ext(static_cast<std::size_t>(2 * labels + 1), 0);
  for (std::int64_t j = 0; j < labels; ++j) ext[static_cast<std::size_t>(2 * j + 1)] = static_cast<std::int64_t>(targets[n * g.max_target + j]);
  auto prob = [&](std::int64_t t, std::int64_t c) { return y[static_cast<std::size_t>((t * g.batch + n) * g.classes + c)]; };
  std::vector<long double> alpha(ext.size(), 0), next(ext.size());
  alpha[0] = prob(0, 0);
  alpha[1] = prob(0, ext[1]);
  for (std::int64_t t = 1; t < steps; ++t) {
    for (std::size_t s = 0; s < ext.size(); ++s) {
      long double a = alpha[s] + (s > 0 ? alpha[s - 1] : 0);
      if (s > 1 && ext[s] != 0 && ext[s] != ext[s - 2]) a += alpha[s - 2];  // skip a blank between different labels
      next[s] = a * prob(t, ext[s]);
    }
    alpha.swap(next);
  }
  return -std::log(alpha[ext.size() - 1] + alpha[ext.size() - 2]);
}

// The loss sum_n grad_out[n] nll_n(log_softmax(z)) in the logits z, in long double.
long double textbook_loss(const std::vector<long double>& z, const ctc::Geometry& g, const std::vector<double>& targets,
                          const std::vector<double>& input_lengths, const std::vector<double>& target_lengths,
                          const std::vector<double>& grad_out) {
  std::vector<long double> y(z.size());
  for (std::int64_t r = 0; r < g.time * g.batch; ++r) {
    long double total = 0;
    for (std::int64_t c = 0; c < g.classes; ++c) total += std::exp(z[static_cast<std::size_t>(r * g.classes + c)]);
    for (std::int64_t c = 0; c < g.classes; ++c)
      y[static_cast<std::size_t>(r * g.classes + c)] = std::exp(z[static_cast<std::size_t>(r * g.classes + c)]) / total;
  }
  long double loss = 0;
  for (std::int64_t n = 0; n < g.batch; ++n)
    loss += grad_out[static_cast<std::size_t>(n)] *
            textbook_nll(y, g, n, targets, static_cast<std::int64_t>(input_lengths[static_cast<std::size_t>(n)]),
                         static_cast<std::int64_t>(target_lengths[static_cast<std::size_t>(n)]));
  return loss;
}

// Every CPU variant's gradient (f64) against central differences of the textbook loss in the
// logits, taken at z = log_probs (log_softmax(log_probs) = log_probs up to f64 roundoff): with repeated
// labels (C = 3), with a wider alphabet, and with varying lengths (steps past an input: 0).
TEST(Ctc, GradientIsTheLogitGradientOfTheLoss) {
  const std::vector<nlohmann::json> shapes = {
      {{"time", 9}, {"batch", 2}, {"classes", 3}, {"target_length", 4}},
      {{"time", 12}, {"batch", 3}, {"classes", 6}, {"target_length", 5}, {"lengths", "varying"}}};
  for (const auto& shape : shapes)
    for (const char* variant : {"cpu.serial", "cpu.ordered", "cpu.atomic"}) {
      SCOPED_TRACE(shape.dump() + " " + variant);
      const auto cc = config("ctc_loss_bwd", shape, "f64");
      const auto& g = cc.problem.geom<ctc::Geometry>();
      auto in = make_inputs(*cc.op, cc.problem, 9);
      // The f64 fill is the f32 log_softmax plus bits below float's: normalised to about 1e-7 only.
      // The kernels take exp(lp) for softmax(lp), as PyTorch does, so renormalise in long double
      // first: the comparison is then with the gradient of this very loss.
      auto* lp_in = in[0].as<double>();
      for (std::int64_t r = 0; r < g.time * g.batch; ++r) {
        long double total = 0;
        for (std::int64_t c = 0; c < g.classes; ++c) total += std::exp(static_cast<long double>(lp_in[r * g.classes + c]));
        for (std::int64_t c = 0; c < g.classes; ++c) lp_in[r * g.classes + c] = static_cast<double>(lp_in[r * g.classes + c] - std::log(total));
      }
      const auto grad = values(run_variant("ctc_loss_bwd", variant, cc.problem, in, 3));
      const auto lp = values(in[0]), targets = values(in[1]), lengths = values(in[2]), labels = values(in[3]), gr = values(in[4]);
      std::vector<long double> z(lp.begin(), lp.end());
      const long double h = 1e-6L;
      double worst = 0;
      int past_input = 0;
      for (std::size_t x = 0; x < z.size(); ++x) {
        const long double keep = z[x];
        z[x] = keep + h;
        const long double up = textbook_loss(z, g, targets, lengths, labels, gr);
        z[x] = keep - h;
        const long double down = textbook_loss(z, g, targets, lengths, labels, gr);
        z[x] = keep;
        const double numeric = static_cast<double>((up - down) / (2 * h));
        worst = std::max(worst, std::fabs(numeric - grad[x]));
        EXPECT_NEAR(grad[x], numeric, 1e-10) << "element " << x;
        const std::int64_t t = static_cast<std::int64_t>(x) / (g.batch * g.classes), n = static_cast<std::int64_t>(x) / g.classes % g.batch;
        if (t >= static_cast<std::int64_t>(lengths[static_cast<std::size_t>(n)])) {
          EXPECT_EQ(grad[x], 0.0) << "element " << x << " is past its input";
          ++past_input;
        }
      }
      EXPECT_LT(worst, 1e-10);  // about 2e-12 measured
      if (shape.value("lengths", "fixed") == "varying") {
        EXPECT_GT(past_input, 0) << "no sequence shorter than T";
      }
    }
}

// The fill: valid log-probabilities and feasible targets in both modes; in random mode classes
// recur in a target (the collisions the atomic variants race on), in exact mode none does.
TEST(Ctc, FillsGiveFeasibleTargetsWithRepeatsOnlyInRandomMode) {
  const Catalog cat = default_catalog(Registry::global());
  int configs = 0;
  for (const auto& cc : cat.configs) {
    if (cc.op->name != "ctc_loss_bwd" || cc.dtype != DType::f32) continue;
    ++configs;
    const auto& g = cc.problem.geom<ctc::Geometry>();
    for (FillMode mode : {FillMode::random, FillMode::exact}) {
      SCOPED_TRACE(cc.name + (mode == FillMode::exact ? " exact" : " random"));
      const auto in = make_inputs(*cc.op, cc.problem, cc.seed, mode);
      const auto lp = values(in[0]), targets = values(in[1]), lengths = values(in[2]), labels = values(in[3]);
      for (std::int64_t r = 0; r < g.time * g.batch; ++r) {
        double total = 0;
        for (std::int64_t c = 0; c < g.classes; ++c) total += std::exp(lp[static_cast<std::size_t>(r * g.classes + c)]);
        ASSERT_NEAR(total, 1.0, 1e-6) << "step row " << r;
      }
      bool recurs = false;
      for (std::int64_t n = 0; n < g.batch; ++n) {
        const auto u = static_cast<std::int64_t>(labels[static_cast<std::size_t>(n)]);
        ASSERT_GE(u, 1);
        ASSERT_LE(u, g.max_target);
        std::set<double> seen;
        std::int64_t adjacent = 0;
        for (std::int64_t j = 0; j < u; ++j) {
          const double l = targets[static_cast<std::size_t>(n * g.max_target + j)];
          ASSERT_GE(l, 1);
          ASSERT_LT(l, g.classes);
          recurs |= !seen.insert(l).second;
          adjacent += j > 0 && l == targets[static_cast<std::size_t>(n * g.max_target + j - 1)];
        }
        const auto steps = static_cast<std::int64_t>(lengths[static_cast<std::size_t>(n)]);
        EXPECT_GE(steps, u + adjacent) << "sequence " << n << " cannot emit its target";
        EXPECT_LE(steps, g.time);
        if (!g.varying) {
          EXPECT_EQ(steps, g.time);
          if (mode == FillMode::random) {
            EXPECT_EQ(u, g.max_target);
          }
        }
      }
      EXPECT_EQ(recurs, mode == FillMode::random);
    }
  }
  EXPECT_GE(configs, 3);
}

// How far f32 arithmetic takes the gradient from the f64 one on the same inputs (the f32 inputs
// converted exactly): the yardstick for implementations that round differently (cuDNN's, PyTorch's
// libm exp and log). The recursions carry log-probabilities of whole prefixes (hundreds in
// magnitude), and each occupancy exp(alpha + beta + nll - lp) cancels them back to O(1), so the
// error grows with T.
TEST(Ctc, FloatGradientIsNearTheDoubleOne) {
  const Catalog cat = default_catalog(Registry::global());
  for (const auto& cc : cat.configs) {
    if (cc.op->name != "ctc_loss_bwd" || cc.dtype != DType::f32) continue;
    const auto in32 = make_inputs(*cc.op, cc.problem, cc.seed);
    const auto wide = config("ctc_loss_bwd", cc.params_json, "f64");
    std::vector<HostTensor> in64;
    for (std::size_t i = 0; i < in32.size(); ++i) {
      in64.emplace_back(wide.problem.inputs[i]);
      const auto v = values(in32[i]);
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (in64.back().desc().dtype == DType::f64) in64.back().as<double>()[k] = v[k];
        else in64.back().as<std::int32_t>()[k] = static_cast<std::int32_t>(v[k]);
      }
    }
    const auto g32 = values(run_variant("ctc_loss_bwd", "cpu.serial", cc.problem, in32));
    const auto g64 = values(run_variant("ctc_loss_bwd", "cpu.serial", wide.problem, in64));
    double worst = 0, max_ref = 0;
    for (std::size_t i = 0; i < g32.size(); ++i) {
      worst = std::max(worst, std::fabs(g32[i] - g64[i]));
      max_ref = std::max(max_ref, std::fabs(g64[i]));
    }
    // Measured: 3.2e-6 (T = 64), 4.0e-5 (T = 256), 2.1e-4 (T = 300, varying lengths) with max|grad|
    // 0.6 to 1.0. Two f32 implementations each this far from f64 stay within the GPU suite's
    // rule for library variants, 1e-3 (1 + max|reference|) (suites/gpu/gpu_test.cpp), with room.
    EXPECT_LE(worst, 2e-4 * (1 + max_ref)) << cc.name;
    EXPECT_GT(worst, 0) << cc.name << ": f32 and f64 cannot agree to the bit on random inputs";
  }
}

// cuda.atomic's enumerator (a source per (n, j) walking t, PyTorch's nonblank threads) runs only on
// a GPU there; here, in source order on the host after init_row, it must give exactly the bits of
// the rows gathered in ascending j (cpu.serial's): the same terms, to the same outputs.
TEST(Ctc, PositionSourcesEmitTheRowsTerms) {
  const Catalog cat = default_catalog(Registry::global());
  int configs = 0;
  for (const auto& cc : cat.configs) {
    if (cc.op->name != "ctc_loss_bwd") continue;
    ++configs;
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    const auto& g = cc.problem.geom<ctc::Geometry>();
    auto check = [&](auto tag) {
      using T = decltype(tag);
      const ctc::Inputs<T> in{g, inputs[0].as<T>(), inputs[1].as<std::int32_t>(), inputs[2].as<std::int32_t>(),
                              inputs[3].as<std::int32_t>(), inputs[4].as<T>()};
      std::vector<T> alpha(static_cast<std::size_t>(g.batch * g.time * g.states())), beta(alpha.size()),
          nll(static_cast<std::size_t>(g.batch));
      const ctc::Lattice<T> lat{alpha.data(), beta.data(), nll.data()};
      for (std::int64_t n = 0; n < g.batch; ++n) ctc::sequence_lattice(in, lat, n);
      const auto elements = static_cast<std::size_t>(g.time * g.batch * g.classes);
      std::vector<T> by_rows(elements), by_positions(elements);
      for (std::int64_t r = 0; r < g.time * g.batch; ++r) {
        ctc::gather_row(in, lat, r % g.batch, r / g.batch, by_rows.data());
        ctc::init_row(in, lat, r % g.batch, r / g.batch, by_positions.data());
      }
      const ctc::LabelTerms<T> terms{in, lat};
      accumulate::serial(terms.sources(), by_positions.data(), terms);
      EXPECT_EQ(std::memcmp(by_rows.data(), by_positions.data(), elements * sizeof(T)), 0) << cc.name;
    };
    if (cc.problem.dtype == DType::f64) check(double{});
    else check(float{});
  }
  EXPECT_GE(configs, 4);
}

}  // namespace
}  // namespace d9m
