// softmax_cross_entropy_grad (kernels/loss/loss.h): worked by hand (class weights, mean's divisor,
// ignore_index, the NCHW layout), and against central differences of softmax_cross_entropy's own
// reference in f64.
#include <cmath>
#include <cstring>

#include "kernels/loss/loss.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::digest;
using test::inputs_from;
using test::run_variant;
using test::values;

constexpr const char* kGrad = "softmax_cross_entropy_grad";

void expect_grad(const CatalogConfig& cc, const std::vector<HostTensor>& in, const std::vector<double>& want) {
  for (const auto* v : Registry::global().variants_of(kGrad))
    if (v->backend == Backend::cpu) {
      EXPECT_EQ(values(run_variant(kGrad, v->name, cc.problem, in)), want) << v->name;
    }
}

TEST(SoftmaxCrossEntropyGrad, WeightsScaleTheRowMeanDividesByTheCountedWeightsIgnoredRowsAreZero) {
  // Logits [[0, 0], [0, 0], [5, -1]], targets 0, 1 and ignored (-100), class weights (2, 3).
  // Rows 0 and 1 have softmax (1/2, 1/2) (exp(0) = 1 exactly, s = 2): row 0 gives
  // (1/2 - 1, 1/2) * w_0 = (-1, 1), row 1 (1/2, 1/2 - 1) * w_1 = (1.5, -1.5); row 2 is zero.
  // mean divides by the counted weights 2 + 3 = 5 (not by 3 rows nor 2 targets): k = 2/5 and
  // 3/5, so (-0.2, 0.2, 0.3, -0.3); in f32, -0.5 * float(0.4) is float(-0.2) exactly (halving),
  // and likewise 0.3.
  const std::vector<std::vector<double>> in = {{0, 0, 0, 0, 5, -1}, {0, 1, -100}, {2, 3}};
  nlohmann::json p = {{"n", 3}, {"classes", 2}, {"weighted", true}, {"reduction", "sum"}};
  for (const char* dtype : {"f32", "f16", "bf16", "f64"}) {
    const auto cc = config(kGrad, p, dtype);
    expect_grad(cc, inputs_from(cc.problem, in), {-1, 1, 1.5, -1.5, 0, 0});
  }
  p["reduction"] = "mean";
  auto cc = config(kGrad, p);
  expect_grad(cc, inputs_from(cc.problem, in), {-0.2f, 0.2f, 0.3f, -0.3f, 0, 0});
  cc = config(kGrad, p, "f64");
  expect_grad(cc, inputs_from(cc.problem, in), {-0.2, 0.2, 0.3, -0.3, 0, 0});
  // Without class weights every counted row weighs 1: mean divides by 2, the count of counted targets.
  p["weighted"] = false;
  cc = config(kGrad, p);
  expect_grad(cc, inputs_from(cc.problem, {in[0], in[1]}), {-0.25, 0.25, 0.25, -0.25, 0, 0});
}

TEST(SoftmaxCrossEntropyGrad, EveryTargetIgnoredGivesZerosNotNaN) {
  // mean's 0 / 0 is never formed: no counted row reads k (PyTorch's gradient is zero too).
  const auto cc = config(kGrad, {{"n", 2}, {"classes", 3}, {"ignore_index", 1}});
  expect_grad(cc, inputs_from(cc.problem, {{1, 2, 3, 4, 5, 6}, {1, 1}}), std::vector<double>(6, 0.0));
}

TEST(SoftmaxCrossEntropyGrad, ReadsNchwAndFollowsTheSoftmax) {
  // [1, 2, 1, 2] is NCHW: class 0 holds (0, 5), class 1 (0, -1000); both targets class 0. Position
  // 0 has softmax (1/2, 1/2): (-1/2, 1/2); position 1 (5, -1000): exp(-1005) is 0, softmax (1, 0):
  // (0, 0). In memory [c0p0, c0p1, c1p0, c1p1] = [-0.5, 0, 0.5, 0].
  auto cc = config(kGrad, {{"n", 1}, {"classes", 2}, {"h", 1}, {"w", 2}, {"reduction", "sum"}});
  expect_grad(cc, inputs_from(cc.problem, {{0, 5, 0, -1000}, {0, 0}}), {-0.5, 0, 0.5, 0});
  // Logits (1, 2, 3), target 2: softmax(x) - e_2, softmax_c = e^(c - 2) / (e^-2 + e^-1 + 1).
  cc = config(kGrad, {{"n", 1}, {"classes", 3}});
  const auto got = values(run_variant(kGrad, "cpu.serial", cc.problem, inputs_from(cc.problem, {{1, 2, 3}, {2}})));
  const long double s = std::exp(-2.0L) + std::exp(-1.0L) + 1;
  const long double want[] = {std::exp(-2.0L) / s, std::exp(-1.0L) / s, 1 / s - 1};
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[static_cast<std::size_t>(c)], static_cast<double>(want[c]), 2e-7) << c;
}

std::vector<HostTensor> copy_of(const std::vector<HostTensor>& in) {
  std::vector<HostTensor> out;
  for (const auto& t : in) {
    out.emplace_back(t.desc());
    std::memcpy(out.back().data(), t.data(), t.desc().bytes());
  }
  return out;
}

TEST(SoftmaxCrossEntropyGrad, MatchesCentralDifferencesOfTheLossInF64) {
  // d loss / d x_i ~ (loss(x + h e_i) - loss(x - h e_i)) / 2h with softmax_cross_entropy's
  // cpu.serial: truncation error about h^2 and cancellation about 1e-16 / h, both far below 1e-7
  // at h = 1e-5. Random logits in [-4, 4), random class weights, one target set to ignore_index.
  const nlohmann::json configs[] = {
      {{"n", 5}, {"classes", 4}, {"weighted", true}, {"reduction", "sum"}},
      {{"n", 5}, {"classes", 4}, {"weighted", true}, {"reduction", "mean"}},
      {{"n", 6}, {"classes", 3}, {"reduction", "mean"}},
      {{"n", 2}, {"classes", 3}, {"h", 2}, {"w", 3}, {"weighted", true}, {"reduction", "mean"}}};
  constexpr double h = 1e-5;
  for (const auto& p : configs) {
    const auto loss = config("softmax_cross_entropy", p, "f64"), grad = config(kGrad, p, "f64");
    auto in = make_inputs(*loss.op, loss.problem, 3);
    auto grad_in = make_inputs(*grad.op, grad.problem, 3);
    for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(digest(in[i]), digest(grad_in[i])) << "the same inputs " << p.dump();
    in[1].as<std::int32_t>()[1] = -100;  // position 1 ignored: a zero row
    const auto g = values(run_variant(kGrad, "cpu.serial", grad.problem, in));
    const auto& gm = grad.problem.geom<loss::Geometry>();
    for (std::int64_t c = 0; c < gm.classes; ++c) EXPECT_EQ(g[static_cast<std::size_t>(gm.at(1, c))], 0.0) << p.dump();
    for (std::int64_t i = 0; i < in[0].desc().numel(); ++i) {
      auto moved = copy_of(in);
      moved[0].as<double>()[i] += h;
      const double up = values(run_variant("softmax_cross_entropy", "cpu.serial", loss.problem, moved))[0];
      moved[0].as<double>()[i] -= 2 * h;
      const double down = values(run_variant("softmax_cross_entropy", "cpu.serial", loss.problem, moved))[0];
      EXPECT_NEAR(g[static_cast<std::size_t>(i)], (up - down) / (2 * h), 1e-7) << p.dump() << " logit " << i;
    }
  }
}

}  // namespace
}  // namespace d9m
