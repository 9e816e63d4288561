// The gather forms (cpu.gather: kernels/common/map_variants.h, maxpool.h, conv.h) claim
// cpu.serial's bits: each output element must enumerate exactly the contributions the scatter
// form sends it, in the same order. The catalogue's configs check that at their few shapes; here,
// random geometries (gather_geometries.h) at every precision the op has.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "suites/unit/gather_geometries.h"
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
                                                 {"resize_bilinear_grad", 240}, {"resize_nearest_grad", 240}}));
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
