// The optim family (kernels/optim/optim.h): sgd_update worked by hand, and its one rounding at the
// 16-bit dtypes.
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::inputs_from;
using test::run_variant;
using test::values;

void expect_every_variant(const CatalogConfig& cc, const std::vector<HostTensor>& in, const std::vector<double>& want) {
  for (const auto* v : Registry::global().variants_of("sgd_update"))
    if (v->backend == Backend::cpu) {
      EXPECT_EQ(values(run_variant("sgd_update", v->name, cc.problem, in)), want) << v->name;
    }
}

TEST(Optim, SgdUpdateSubtractsTheScaledGradient) {
  // lr 0.5: 1 - 0.5 * 10 = -4, -2 - 0.5 * -4 = 0, 0.5 - 0.5 * 0.25 = 0.375, 0 - 0.5 * 1 = -0.5.
  // Every value is exact in every dtype. [2, 2] and flat [4]: the same elements.
  for (const char* dtype : {"f32", "f16", "bf16", "f64"})
    for (const nlohmann::json& p : {nlohmann::json{{"n", 4}, {"lr", 0.5}}, nlohmann::json{{"n", 2}, {"h", 2}, {"lr", 0.5}}}) {
      const auto cc = config("sgd_update", p, dtype);
      expect_every_variant(cc, inputs_from(cc.problem, {{1, -2, 0.5, 0}, {10, -4, 0.25, 1}}), {-4, 0, 0.375, -0.5});
    }
}

TEST(Optim, SgdUpdateDefaultsToLearningRateOneHundredth) {
  // 1 - 0.01f * 100: 0.01f is 0.00999999977648258, times 100 rounds to 1 in float, so 0 exactly.
  const auto cc = config("sgd_update", {{"n", 1}});
  expect_every_variant(cc, inputs_from(cc.problem, {{1}, {100}}), {0});
  EXPECT_EQ(batch_param(*Registry::global().find_op("sgd_update")), std::nullopt) << "a parameter has no batch axis";
}

TEST(Optim, SgdUpdateRoundsOnceToTheSixteenBitType) {
  // f16, lr 2^-12: 1 - 3 * 2^-12 = 0.999267578125 is computed exactly in float; f16's spacing
  // below 1 is 2^-11, so it lies halfway between 2046 and 2047 * 2^-11 and ties to the even
  // 2046 * 2^-11 = 0.9990234375. And 1 - 2^-12 ties to 1.
  const auto cc = config("sgd_update", {{"n", 2}, {"lr", 1.0 / 4096}}, "f16");
  expect_every_variant(cc, inputs_from(cc.problem, {{1, 1}, {3, 1}}), {0.9990234375, 1});
  // bf16 keeps 8 significant bits: 256 - 0.75 * 1 = 255.25 rounds to 255; 1 - 0.75 * 2^-8 =
  // 0.9970703125 lies between 255/256 = 0.99609375 and 1 (bf16's spacing below 1 is 2^-8), nearer
  // the first.
  const auto bf = config("sgd_update", {{"n", 2}, {"lr", 0.75}}, "bf16");
  expect_every_variant(bf, inputs_from(bf.problem, {{256, 1}, {1, 1.0 / 256}}), {255, 0.99609375});
}

}  // namespace
}  // namespace d9m
