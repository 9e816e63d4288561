// The norm family (kernels/norm/norm.h): layer_norm worked by hand, its three gradients against
// central differences of the forward in f64, the variants against cpu.serial at every dtype, the
// ordered ones on any thread count, and cpu.atomic's race.
#include <cmath>
#include <cstring>
#include <set>

#include "kernels/norm/norm.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::digest;
using test::inputs_from;
using test::run_variant;
using test::values;

const char* const kOps[] = {"layer_norm", "layer_norm_grad_input", "layer_norm_grad_gamma", "layer_norm_grad_beta"};

void expect_cpu_variants(const std::string& op, const CatalogConfig& cc, const std::vector<HostTensor>& in,
                         const std::vector<double>& want) {
  for (const auto* v : Registry::global().variants_of(op))
    if (v->backend == Backend::cpu) {
      EXPECT_EQ(values(run_variant(op, v->name, cc.problem, in)), want) << op << " " << v->name;
    }
}

TEST(Norm, LayerNormNormalisesEachRowWithTheBiasedVarianceThenScalesAndShifts) {
  // Rows (1, 3) and (0, 4): means 2 and 2, biased variances 1 and 4 (the unbiased ones would be 2
  // and 8), so with epsilon 0 rstd is 1 and 1/2 and both rows normalise to (-1, 1); then
  // gamma (2, 3) and beta (0.5, -1) give (-1.5, 2). Every value is exact in every dtype.
  for (const char* dtype : {"f32", "f16", "bf16", "f64"}) {
    const auto cc = config("layer_norm", {{"rows", 2}, {"dim", 2}, {"epsilon", 0.0}}, dtype);
    expect_cpu_variants("layer_norm", cc, inputs_from(cc.problem, {{1, 3, 0, 4}, {2, 3}, {0.5, -1}}), {-1.5, 2, -1.5, 2});
  }
  // epsilon goes under the square root: (0, 2) has variance 1, and 1 / sqrt(1 + 3) = 1/2.
  const auto cc = config("layer_norm", {{"rows", 1}, {"dim", 2}, {"epsilon", 3.0}});
  expect_cpu_variants("layer_norm", cc, inputs_from(cc.problem, {{0, 2}, {1, 1}, {0, 0}}), {-0.5, 0.5});
  EXPECT_EQ(cc.problem.geom<norm::Geometry>().epsilon, 3.0);
}

TEST(Norm, ParameterGradientsSumOverRowsAndDefaultEpsilonIsPyTorchs) {
  // dy rows (1, 2), (3, 4), (5, 6); x rows (1, 3), (0, 4), (5, 5) with epsilon 0 would make the
  // last row's rstd infinite, so x's third row is (4, 6): every row's xhat is (-1, 1).
  // dgamma = sum dy xhat = (-1 - 3 - 5, 2 + 4 + 6) = (-9, 12); dbeta = sum dy = (9, 12).
  const std::vector<double> dy = {1, 2, 3, 4, 5, 6}, x = {1, 3, 0, 4, 4, 6};
  for (const char* dtype : {"f32", "f16", "bf16", "f64"}) {
    const auto g = config("layer_norm_grad_gamma", {{"rows", 3}, {"dim", 2}, {"epsilon", 0.0}}, dtype);
    expect_cpu_variants("layer_norm_grad_gamma", g, inputs_from(g.problem, {dy, x}), {-9, 12});
    const auto b = config("layer_norm_grad_beta", {{"rows", 3}, {"dim", 2}}, dtype);
    expect_cpu_variants("layer_norm_grad_beta", b, inputs_from(b.problem, {dy}), {9, 12});
  }
  EXPECT_EQ(config("layer_norm", {{"rows", 1}, {"dim", 1}}).problem.geom<norm::Geometry>().epsilon, 1e-5);
}

// Copies of the tensors, in the order given.
std::vector<HostTensor> copies(std::initializer_list<const HostTensor*> ts) {
  std::vector<HostTensor> out;
  for (const HostTensor* t : ts) {
    out.emplace_back(t->desc());
    std::memcpy(out.back().data(), t->data(), t->desc().bytes());
  }
  return out;
}

// L = sum_i w_i y_i with y = layer_norm(x, gamma, beta) in f64 (cpu.serial), so dL/dy = w.
double weighted_forward(const CatalogConfig& fwd, const std::vector<HostTensor>& in, const std::vector<double>& w) {
  const auto y = values(run_variant("layer_norm", "cpu.serial", fwd.problem, in));
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
  return s;
}

TEST(Norm, GradientsMatchCentralDifferencesOfTheForwardInF64) {
  // Truncation about h^2 and cancellation about 1e-16 / h: both far below 1e-7 at h = 1e-5.
  constexpr double h = 1e-5;
  const nlohmann::json p = {{"rows", 3}, {"dim", 5}, {"epsilon", 1e-3}};
  const auto fwd = config("layer_norm", p, "f64");
  const auto in = make_inputs(*fwd.op, fwd.problem, 7);  // x, gamma, beta
  const auto dyc = config("layer_norm_grad_beta", {{"rows", 3}, {"dim", 5}}, "f64");
  const auto dy_inputs = make_inputs(*dyc.op, dyc.problem, 8);
  const HostTensor& dy = dy_inputs.at(0);
  const auto w = values(dy);

  const auto gi = config("layer_norm_grad_input", p, "f64");
  const auto gg = config("layer_norm_grad_gamma", p, "f64");
  const auto gb = config("layer_norm_grad_beta", {{"rows", 3}, {"dim", 5}}, "f64");
  const auto dx = values(run_variant(gi.op->name, "cpu.serial", gi.problem, copies({&dy, &in[0], &in[1]})));
  const auto dgamma = values(run_variant(gg.op->name, "cpu.serial", gg.problem, copies({&dy, &in[0]})));
  const auto dbeta = values(run_variant(gb.op->name, "cpu.serial", gb.problem, copies({&dy})));
  const std::vector<double>* want[] = {&dx, &dgamma, &dbeta};
  for (std::size_t arg = 0; arg < 3; ++arg)
    for (std::int64_t i = 0; i < in[arg].desc().numel(); ++i) {
      auto moved = copies({&in[0], &in[1], &in[2]});
      moved[arg].as<double>()[i] += h;
      const double up = weighted_forward(fwd, moved, w);
      moved[arg].as<double>()[i] -= 2 * h;
      const double down = weighted_forward(fwd, moved, w);
      EXPECT_NEAR((*want[arg])[static_cast<std::size_t>(i)], (up - down) / (2 * h), 1e-7) << "input " << arg << " element " << i;
    }
}

// Random inputs: every CPU variant within the op's allowed difference of cpu.serial at every
// dtype; the row-by-row ops and cpu.ordered of a single 64-row block bit for bit; cpu.ordered's
// bits the same on any thread count.
TEST(Norm, VariantsAgreeWithTheSerialReferenceAndOrderedKeepsItsBitsOnAnyThreadCount) {
  for (const char* op : kOps)
    for (const char* dtype : {"f32", "f16", "bf16", "f64"})
      for (const nlohmann::json& p : {nlohmann::json{{"rows", 64}, {"dim", 48}}, nlohmann::json{{"rows", 1000}, {"dim", 100}}}) {
        const auto cc = config(op, p, dtype);
        SCOPED_TRACE(std::string(op) + " " + dtype + " " + p.dump());
        const auto in = make_inputs(*cc.op, cc.problem, 11);
        const auto serial = run_variant(op, "cpu.serial", cc.problem, in);
        const auto ref = values(serial);
        double max_ref = 0;
        for (double v : ref) max_ref = std::max(max_ref, std::fabs(v));
        const double allowed = allowed_difference(*cc.op, cc.problem, max_ref);
        const bool rows_only = cc.op->batch != nullptr;  // the row-by-row ops: no sum across rows
        for (const auto* v : Registry::global().variants_of(op)) {
          if (v->backend != Backend::cpu) continue;
          const auto got = run_variant(op, v->name, cc.problem, in);
          const auto vals = values(got);
          for (std::size_t i = 0; i < ref.size(); ++i) {
            ASSERT_LE(std::fabs(vals[i] - ref[i]), allowed) << v->name << " " << i;
          }
          if (rows_only || (v->name == "cpu.ordered" && p["rows"] == 64)) {
            EXPECT_EQ(digest(got), digest(serial)) << v->name;
          }
        }
        const std::string ordered = digest(run_variant(op, "cpu.ordered", cc.problem, in, 1));
        for (unsigned t : {2u, 3u, 8u}) EXPECT_EQ(digest(run_variant(op, "cpu.ordered", cc.problem, in, t)), ordered) << t << " threads";
      }
}

TEST(Norm, OnlyTheParameterGradientsHaveAtomicVariantsAndTheirsRace) {
  for (const char* op : kOps) {
    const VariantDef* atomic = Registry::global().find_variant(op, "cpu.atomic");
    const bool sums_rows = std::string(op).find("_grad_gamma") != std::string::npos || std::string(op).find("_grad_beta") != std::string::npos;
    ASSERT_EQ(atomic != nullptr, sums_rows) << op;
    if (!atomic) continue;
    EXPECT_EQ(atomic->claim.determinism, Determinism::nondeterministic) << op;
    EXPECT_EQ(atomic->role, Role::atomic) << op;
    // 65536 rows into 8 columns from 4 threads: thousands of adds race for each address. A quiet
    // scheduler may still serialise a run, so it gets a few.
    const auto cc = config(op, {{"rows", 65536}, {"dim", 8}});
    const auto in = make_inputs(*cc.op, cc.problem, 5);
    std::set<std::string> seen;
    for (int run = 0; run < 30 && seen.size() < 2; ++run) seen.insert(digest(run_variant(op, "cpu.atomic", cc.problem, in, 4)));
    EXPECT_GE(seen.size(), 2u) << op << ": cpu.atomic gave one digest in 30 runs on 4 threads";
  }
}

}  // namespace
}  // namespace d9m
