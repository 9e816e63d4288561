// The gather forms (cpu.gather, kernels/common/map_variants.h) claim cpu.serial's bits: each
// output element must enumerate exactly the contributions the scatter form sends it, in the same
// order. The catalogue's configs check that at their few shapes; here, random geometries at every
// precision reach what they do not: downsampling and upsampling by odd factors, align_corners,
// extents of 1, windows wider than their stride, SAME padding, tied maxima.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::digest;
using test::run_variant;

// cpu.gather and cpu.serial give the same bits on config (op, params) at every dtype the op has.
void expect_serial_bits(const std::string& op, const nlohmann::json& params, int& checked) {
  for (const char* dtype : {"f32", "f64", "f16", "bf16"}) {
    const auto& dtypes = config(op, params).op->dtypes;
    if (std::none_of(dtypes.begin(), dtypes.end(), [&](DType t) { return dtype_short_name(t) == dtype; })) continue;
    const CatalogConfig cc = config(op, params, dtype);
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    ASSERT_EQ(digest(run_variant(op, "cpu.gather", cc.problem, inputs, 3)), digest(run_variant(op, "cpu.serial", cc.problem, inputs)))
        << op << " " << dtype << " " << params.dump();
    ++checked;
  }
}

TEST(Gather, ResizeGradsHaveTheScatterFormsBitsOnRandomGeometries) {
  std::mt19937 rng(11);
  auto extent = [&](int hi) { return std::uniform_int_distribution<int>(1, hi)(rng); };
  int checked = 0;
  for (int i = 0; i < 60; ++i) {
    const bool align = i % 3 == 1, half = i % 3 == 0;  // the three coordinate rules TF allows
    const nlohmann::json params = {{"n", extent(2)},       {"h", extent(9)},      {"w", extent(9)},
                                   {"c", extent(3)},       {"out_h", extent(23)}, {"out_w", extent(23)},
                                   {"align_corners", align}, {"half_pixel_centers", half}};
    expect_serial_bits("resize_bilinear_grad", params, checked);
    expect_serial_bits("resize_nearest_grad", params, checked);
  }
  EXPECT_EQ(checked, 60 * 2 * 4);
}

TEST(Gather, MaxPoolGradHasTheScatterFormsBitsOnRandomGeometries) {
  std::mt19937 rng(12);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (int i = 0; i < 60; ++i) {
    const int kh = pick(1, 4), kw = pick(1, 4);
    const nlohmann::json params = {{"n", pick(1, 2)},       {"h", pick(kh, 11)},        {"w", pick(kw, 11)},
                                   {"c", pick(1, 3)},       {"ksize_h", kh},            {"ksize_w", kw},
                                   {"stride_h", pick(1, 3)}, {"stride_w", pick(1, 3)},   {"padding", i % 2 ? "SAME" : "VALID"},
                                   {"levels", i % 3 == 0 ? 3 : 0}};  // few levels: many tied maxima
    expect_serial_bits("maxpool2d_bwd", params, checked);
  }
  EXPECT_EQ(checked, 60 * 4);
}

TEST(Gather, ConvBackpropsHaveTheScatterFormsBitsOnRandomGeometries) {
  std::mt19937 rng(13);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (int i = 0; i < 40; ++i) {
    const int kh = pick(1, 3), kw = pick(1, 3), dh = pick(1, 2), dw = pick(1, 2);
    const nlohmann::json params = {{"n", pick(1, 2)},        {"h", pick((kh - 1) * dh + 1, 9)}, {"w", pick((kw - 1) * dw + 1, 9)},
                                   {"ci", pick(1, 3)},       {"co", pick(1, 3)},                {"kh", kh},
                                   {"kw", kw},               {"stride_h", pick(1, 3)},          {"stride_w", pick(1, 3)},
                                   {"dilation_h", dh},       {"dilation_w", dw},                {"padding", i % 2 ? "SAME" : "VALID"}};
    expect_serial_bits("conv2d_bwd_data", params, checked);
    expect_serial_bits("conv2d_bwd_filter", params, checked);
  }
  EXPECT_EQ(checked, 40 * 2 * 4);
}

// Every op with a gather form is one of those above: a new one needs its geometries here.
TEST(Gather, EveryGatherVariantIsCoveredByTheseTests) {
  std::set<std::string> with_gather;
  for (const auto& op : Registry::global().ops())
    if (Registry::global().find_variant(op.name, "cpu.gather")) with_gather.insert(op.name);
  EXPECT_EQ(with_gather, (std::set<std::string>{"conv2d_bwd_data", "conv2d_bwd_filter", "maxpool2d_bwd", "resize_bilinear_grad",
                                                "resize_nearest_grad"}));
}

}  // namespace
}  // namespace d9m
