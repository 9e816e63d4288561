// The gather forms (cpu.gather: kernels/common/map_variants.h, maxpool.h, conv.h, scatter.h,
// crop_and_resize.h) claim cpu.serial's bits: each output element must enumerate exactly the
// contributions the scatter form sends it, in the same order. The catalogue's configs check that at their few shapes; here,
// random geometries (gather_geometries.h) at every precision the op has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "suites/unit/gather_geometries.h"
#include "kernels/resize/resize.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

TEST(Gather, GatherFormsHaveTheScatterFormsBitsOnRandomGeometries) {
  std::map<std::string, int> checked;  // per op, configs times dtypes
  for (const auto& [op, params] : test::gather_geometries())
    for (DType dtype : test::config(op, params).op->dtypes) {
      const CatalogConfig cc = test::config(op, params, std::string(dtype_short_name(dtype)));
      const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
      ASSERT_EQ(test::digest(test::run_variant(op, "cpu.gather", cc.problem, inputs, 3)),
                test::digest(test::run_variant(op, "cpu.serial", cc.problem, inputs)))
          << op << " " << dtype_short_name(dtype) << " " << params.dump();
      ++checked[op];
    }
  // Every float dtype of each op, on every geometry.
  EXPECT_EQ(checked, (std::map<std::string, int>{{"conv2d_bwd_data", 160}, {"conv2d_bwd_filter", 160}, {"maxpool2d_bwd", 240},
                                                 {"resize_bilinear_grad", 240}, {"resize_nearest_grad", 240},
                                                 {"scatter_add", 120}, {"scatter_nd_add", 120}, {"unsorted_segment_sum", 120},
                                                 {"crop_and_resize_grad_image", 160}}));
}

// Where float rounds a bilinear coordinate up to the extent itself (extents near 2^24), the tap
// still lies inside the image: lower once came out as `in`, so serial wrote a row past the image
// and the gather, which relies on lower <= upper <= in - 1, dropped that contribution.
TEST(Gather, BilinearTapsStayInsideTheImageWhereTheCoordinateRoundsUp) {
  struct Axis {
    std::int64_t in, out;
    bool align, half;
  };
  int rounded_up = 0;
  for (const Axis& a : {Axis{1, 16777207, false, false}, Axis{16777220, 2, true, false}, Axis{5, 16777215, false, true},
                        Axis{3, 16777216, false, false}, Axis{16777216, 3, false, true}}) {
    const float scale = resize::resize_scale(a.in, a.out, a.align);
    for (std::int64_t i = std::max<std::int64_t>(0, a.out - 64); i < a.out; ++i) {
      const float fi = static_cast<float>(i);
      const float c = a.half ? (fi + 0.5f) * scale - 0.5f : fi * scale;
      rounded_up += std::floor(c) >= static_cast<float>(a.in);
      const resize::BilinearTap t = resize::bilinear_tap(i, a.in, scale, a.half);
      ASSERT_LE(0, t.lower) << a.in << " " << a.out << " " << i;
      ASSERT_LE(t.lower, t.upper) << a.in << " " << a.out << " " << i;
      ASSERT_LE(t.upper, a.in - 1) << a.in << " " << a.out << " " << i;
    }
  }
  EXPECT_GT(rounded_up, 0);  // the cases above do reach the rounding they are about
}

// Every op with a gather form has geometries above: a new one needs its own there.
TEST(Gather, EveryGatherVariantIsCoveredByTheseTests) {
  std::set<std::string> with_gather, covered;
  for (const auto& op : Registry::global().ops())
    if (Registry::global().find_variant(op.name, "cpu.gather")) with_gather.insert(op.name);
  for (const auto& [op, params] : test::gather_geometries()) covered.insert(op);
  EXPECT_EQ(with_gather, covered);
}

}  // namespace
}  // namespace d9m
