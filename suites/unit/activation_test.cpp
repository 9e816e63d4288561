// The activation family (kernels/activation/activation.h): TensorFlow's Relu and ReluGrad worked
// by hand, with the NaN, infinity and signed-zero cases the semantics name, at every dtype.
#include <cstdint>
#include <cstring>
#include <limits>

#include "suites/unit/kernel_harness.h"
#include "suites/unit/same_values.h"

namespace d9m {
namespace {

using test::config;
using test::expect_same_values;
using test::inputs_from;
using test::run_variant;
using test::values;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const char* const kDtypes[] = {"f32", "f16", "bf16", "f64"};

// The CPU variants of an op (the CUDA ones run in the certification tests on a GPU).
std::vector<const VariantDef*> on_cpu(const std::string& op) {
  auto all = Registry::global().variants_of(op);
  std::erase_if(all, [](const VariantDef* v) { return v->backend != Backend::cpu; });
  return all;
}

TEST(Activation, ReluIsMaxWithZeroAndPassesNaNThrough) {
  // max(x, 0): -2 -> 0, -0 -> +0 (d9m fixes +0), 0 -> 0, 0.5 and 3 kept, NaN -> NaN (TF's
  // cwiseMax<PropagateNaN>), -inf -> 0, inf kept. Shapes [n] and [n, h]: only the layout differs.
  const std::vector<double> x = {-2, -0.0, 0, 0.5, 3, kNaN, -kInf, kInf};
  const std::vector<double> want = {0, 0, 0, 0.5, 3, kNaN, 0, kInf};
  for (const nlohmann::json& p : {nlohmann::json{{"n", 8}}, nlohmann::json{{"n", 2}, {"h", 4}}})
    for (const char* dtype : kDtypes) {
      const auto cc = config("relu", p, dtype);
      for (const auto* v : on_cpu("relu"))
        expect_same_values(values(run_variant("relu", v->name, cc.problem, inputs_from(cc.problem, {x}))), want,
                    std::string("relu/") + v->name + " " + dtype);
    }
}

TEST(Activation, ReluKeepsTheBitsOfANaN) {
  // A NaN with a payload comes out with its own bits: no arithmetic touches it.
  const auto cc = config("relu", {{"n", 2}});
  auto in = inputs_from(cc.problem, {{1, 1}});
  const std::uint32_t payload = 0xffc01234u;  // negative quiet NaN with a payload
  std::memcpy(in[0].as<float>(), &payload, sizeof payload);
  for (const auto* v : on_cpu("relu")) {
    const HostTensor out = run_variant("relu", v->name, cc.problem, in);
    std::uint32_t bits;
    std::memcpy(&bits, out.as<float>(), sizeof bits);
    EXPECT_EQ(bits, payload) << v->name;
    EXPECT_EQ(out.as<float>()[1], 1.0f) << v->name;
  }
}

TEST(Activation, ReluGradIsTheGradientTimesTheMaskFeaturesAboveZero) {
  // gradients * T(features > 0): features 1 pass 5, -5 and NaN through; features 0, -1, -0 and
  // NaN (not > 0) give gradient * 0: +0 for 5, 7 and 2, -0 for -5, and NaN for inf and NaN.
  const std::vector<double> g = {5, -5, kNaN, 5, -5, kInf, kNaN, 7, 2};
  const std::vector<double> f = {1, 1, 1, 0, -1, -2, -3, kNaN, -0.0};
  const std::vector<double> want = {5, -5, kNaN, 0, -0.0, kNaN, kNaN, 0, 0};
  for (const char* dtype : kDtypes) {
    const auto cc = config("relu_grad", {{"n", 9}}, dtype);
    for (const auto* v : on_cpu("relu_grad"))
      expect_same_values(values(run_variant("relu_grad", v->name, cc.problem, inputs_from(cc.problem, {g, f}))), want,
                  std::string("relu_grad/") + v->name + " " + dtype);
  }
}

TEST(Activation, ReluGradWritesOneCanonicalNaNForInfTimesZero) {
  // inf * 0: x86 would give its negative "indefinite" NaN, a GPU 0x7fffffff; d9m writes 0x7fc00000.
  const auto cc = config("relu_grad", {{"n", 1}});
  const auto in = inputs_from(cc.problem, {{-kInf}, {-1}});
  for (const auto* v : on_cpu("relu_grad")) {
    std::uint32_t bits;
    std::memcpy(&bits, run_variant("relu_grad", v->name, cc.problem, in).as<float>(), sizeof bits);
    EXPECT_EQ(bits, 0x7fc00000u) << v->name;
  }
}

TEST(Activation, ShapesAreNhwcOrFlatWithTheBatchOnN) {
  // An NHWC conv output, a matrix and a flat vector; trailing extra dims of 1 are dropped.
  EXPECT_EQ(config("relu", {{"n", 2}, {"h", 3}, {"w", 4}, {"c", 5}}).problem.output.shape, (Shape{2, 3, 4, 5}));
  EXPECT_EQ(config("relu", {{"n", 2}, {"c", 5}}).problem.output.shape, (Shape{2, 1, 1, 5}));
  EXPECT_EQ(config("relu_grad", {{"n", 7}, {"h", 3}}).problem.inputs[1].shape, (Shape{7, 3}));
  EXPECT_EQ(config("relu", {{"n", 7}}).problem.output.shape, (Shape{7}));
  for (const char* op : {"relu", "relu_grad"}) EXPECT_EQ(batch_param(*Registry::global().find_op(op)), "n") << op;
}

}  // namespace
}  // namespace d9m
