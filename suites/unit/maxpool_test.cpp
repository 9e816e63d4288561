// maxpool2d, TensorFlow's MaxPool forward (kernels/maxpool/maxpool.h): worked by hand, and equal
// to the orig_output that maxpool2d_bwd's fill computes for the same config and seed.
#include <limits>

#include "suites/unit/kernel_harness.h"
#include "suites/unit/same_values.h"

namespace d9m {
namespace {

using test::config;
using test::digest;
using test::inputs_from;
using test::run_variant;
using test::values;

nlohmann::json pool(int h, int w, int k, int stride, const char* padding) {
  return {{"n", 1}, {"h", h}, {"w", w}, {"c", 1}, {"ksize_h", k}, {"ksize_w", k}, {"stride_h", stride}, {"stride_w", stride}, {"padding", padding}};
}

// Every CPU variant's output, value and sign (NaN equal to NaN).
void expect_pool(const CatalogConfig& cc, const std::vector<double>& input, const std::vector<double>& want) {
  for (const auto* v : Registry::global().variants_of("maxpool2d")) {
    if (v->backend != Backend::cpu) continue;
    test::expect_same_values(values(run_variant("maxpool2d", v->name, cc.problem, inputs_from(cc.problem, {input}))), want,
                             v->name);
  }
}

TEST(MaxPool, ForwardTakesEachWindowsMaximum) {
  // [[1, 2, 3], [4, 9, 5], [6, 7, 8]], 2x2 windows, stride 1, VALID: all four hold the centre 9.
  expect_pool(config("maxpool2d", pool(3, 3, 2, 1, "VALID")), {1, 2, 3, 4, 9, 5, 6, 7, 8}, {9, 9, 9, 9});
  // The same negated, 2x2 windows, stride 2, SAME: out 2x2, one row and one column of padding
  // after (before 0). Windows {-1, -2, -4, -9}, {-3, -5}, {-6, -7}, {-8}: padding never wins (it
  // would give 0).
  expect_pool(config("maxpool2d", pool(3, 3, 2, 2, "SAME")), {-1, -2, -3, -4, -9, -5, -6, -7, -8}, {-1, -3, -6, -8});
}

TEST(MaxPool, ForwardTiesAndNaNFollowTheFirstMaximumInScanOrder) {
  // A tie shows in the bits only between -0 and +0: the first in scan order (row-major) wins,
  // since +0 > -0 is false. One 2x2 window each.
  const auto cc = config("maxpool2d", pool(2, 2, 2, 2, "VALID"));
  expect_pool(cc, {-0.0, 0, 0, 0}, {-0.0});
  expect_pool(cc, {0, -0.0, -0.0, -0.0}, {0});
  // A NaN wins only as the window's first element (every comparison with it is false).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_pool(cc, {nan, 1, 2, 3}, {nan});
  expect_pool(cc, {1, nan, 2, 3}, {3});
}

TEST(MaxPool, ForwardIsTheOrigOutputOfTheBackwardsFill) {
  // Same parameters, same seed: maxpool2d's input is maxpool2d_bwd's orig_input, and its output is
  // maxpool2d_bwd's orig_output bit for bit, at every dtype, with ties (levels) or without.
  const nlohmann::json configs[] = {
      {{"n", 2}, {"h", 9}, {"w", 8}, {"c", 3}, {"ksize_h", 3}, {"ksize_w", 3}, {"stride_h", 1}, {"stride_w", 1}, {"padding", "SAME"}},
      {{"n", 2}, {"h", 11}, {"w", 11}, {"c", 2}, {"ksize_h", 3}, {"ksize_w", 2}, {"stride_h", 2}, {"stride_w", 3}},
      {{"n", 2}, {"h", 8}, {"w", 8}, {"c", 4}, {"ksize_h", 2}, {"ksize_w", 2}, {"stride_h", 2}, {"stride_w", 2}, {"levels", 3}}};
  for (const auto& p : configs)
    for (const char* dtype : {"f32", "f16", "bf16", "f64"}) {
      const auto fwd = config("maxpool2d", p, dtype), bwd = config("maxpool2d_bwd", p, dtype);
      const auto bwd_in = make_inputs(*bwd.op, bwd.problem, 11);
      const auto fwd_in = make_inputs(*fwd.op, fwd.problem, 11);
      ASSERT_EQ(digest(fwd_in[0]), digest(bwd_in[0])) << p.dump() << " " << dtype;
      ASSERT_EQ(fwd.problem.output.shape, bwd.problem.inputs[1].shape);
      for (const auto* v : Registry::global().variants_of("maxpool2d")) {
        if (v->backend != Backend::cpu) continue;
        EXPECT_EQ(digest(run_variant("maxpool2d", v->name, fwd.problem, fwd_in)), digest(bwd_in[1]))
            << v->name << " " << p.dump() << " " << dtype;
      }
    }
}

TEST(MaxPool, ForwardAndBackwardTakeTheSameParameters) {
  const OpDef* fwd = Registry::global().find_op("maxpool2d");
  const OpDef* bwd = Registry::global().find_op("maxpool2d_bwd");
  ASSERT_TRUE(fwd && bwd);
  ASSERT_EQ(fwd->params.size(), bwd->params.size());
  for (std::size_t i = 0; i < fwd->params.size(); ++i) {
    EXPECT_EQ(fwd->params[i].name, bwd->params[i].name);
    EXPECT_EQ(fwd->params[i].kind, bwd->params[i].kind);
    EXPECT_EQ(fwd->params[i].default_value, bwd->params[i].default_value) << fwd->params[i].name;
    EXPECT_EQ(fwd->params[i].min, bwd->params[i].min) << fwd->params[i].name;
  }
  EXPECT_EQ(batch_param(*fwd), "n");
}

}  // namespace
}  // namespace d9m
