// The reduce family's own properties: the segment offsets it draws, its inputs' magnitudes, and
// what its tolerance does and does not catch (kernels/reduce/reduce.h).
#include <algorithm>
#include <cmath>

#include "kernels/reduce/reduce.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::values;

const CatalogConfig& default_config(const std::string& op, const std::string& name) {
  static const Catalog cat = default_catalog(Registry::global());
  for (const auto& cc : cat.configs)
    if (cc.op->name == op && cc.name == name) return cc;
  throw std::runtime_error("no default config " + op + "/" + name);
}

TEST(ReduceFamily, OffsetsAreCsrWithEmptySegmentsAndLengthsOverOrdersOfMagnitude) {
  for (const char* name : {"n_1000003_40_segments", "n_4194304_1000_segments"}) {
    const auto& cc = default_config("segmented_reduce", name);
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    const auto& g = cc.problem.geom<reduce::Geometry>();
    const auto* off = inputs[1].as<std::int32_t>();
    EXPECT_EQ(off[0], 0) << name;
    EXPECT_EQ(off[g.segments], g.n) << name;
    std::int64_t empty = 0, shortest = g.n, longest = 0, crossing = 0;
    for (std::int64_t s = 0; s < g.segments; ++s) {
      const std::int64_t len = std::int64_t{off[s + 1]} - off[s];
      ASSERT_GE(len, 0) << name << " segment " << s;
      if (len == 0) ++empty;
      else shortest = std::min(shortest, len);
      longest = std::max(longest, len);
      crossing += off[s] / reduce::kChunk != (off[s + 1] - 1) / reduce::kChunk && len > 0;
    }
    EXPECT_GT(empty, 0) << name;
    EXPECT_GE(longest, 100 * shortest) << name;
    // Segments across chunk boundaries are where the atomic variants race.
    EXPECT_GE(crossing, 3) << name;
  }
}

TEST(ReduceFamily, RandomInputsSpanManyBinadesAndExactOnesAreSmallIntegers) {
  const auto& cc = default_config("reduce_sum", "n_1000003");
  const auto random = make_inputs(*cc.op, cc.problem, cc.seed);
  int smallest = 0, largest = -200;
  for (std::int64_t i = 0; i < cc.problem.inputs[0].numel(); ++i) {
    const float v = random[0].as<float>()[i];
    if (v == 0) continue;
    const int e = std::ilogb(v);
    smallest = std::min(smallest, e), largest = std::max(largest, e);
  }
  EXPECT_EQ(largest, -1);                                              // |x| < 1
  EXPECT_LE(smallest, -static_cast<int>(reduce::kInputBinades));  // 32 binades below, and the grid's own
  const auto exact = make_inputs(*cc.op, cc.problem, cc.seed, FillMode::exact);
  for (std::int64_t i = 0; i < cc.problem.inputs[0].numel(); ++i) {
    const float v = exact[0].as<float>()[i];
    ASSERT_EQ(v, std::round(v));
    ASSERT_LE(std::fabs(v), 4.0f);
  }
}

// The tolerance lets the family's reorderings through on its largest configs, and it rejects a
// sum that lost one 4096-element chunk unless that chunk's own sum is below the bound: at
// N = 2^22 the inputs cancel, so a few chunks in a hundred sum that close to zero.
TEST(ReduceFamily, ToleranceAcceptsReorderingsAndRejectsMostDroppedChunks) {
  for (const char* name : {"n_4194304", "n_4194304_f64"}) {
    const auto& cc = default_config("reduce_sum", name);
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    const double serial = values(test::run_variant("reduce_sum", "cpu.serial", cc.problem, inputs))[0];
    const double ordered = values(test::run_variant("reduce_sum", "cpu.ordered", cc.problem, inputs))[0];
    const double bound = tolerance_for(*cc.op, cc.problem) * (1 + std::fabs(serial));
    EXPECT_LE(std::fabs(ordered - serial), bound / 2) << name << ": a reordering needs less than half the bound";
    EXPECT_NE(ordered, serial) << name << ": the tree and the serial sum should round differently";
    RecordProperty(std::string("reordering_over_bound_") + name, std::to_string(std::fabs(ordered - serial) / bound));
    const std::vector<double> x = values(inputs[0]);
    const std::int64_t chunks = cc.problem.geom<reduce::Geometry>().chunks();
    std::int64_t caught = 0;
    for (std::int64_t c = 0; c < chunks; ++c) {
      double chunk = 0;
      for (std::int64_t i = c * reduce::kChunk; i < std::min<std::int64_t>((c + 1) * reduce::kChunk, x.size()); ++i) chunk += x[i];
      caught += std::fabs((ordered - chunk) - serial) > bound;
    }
    EXPECT_GE(static_cast<double>(caught) / static_cast<double>(chunks), 0.9) << name << ": " << caught << " of " << chunks;
    RecordProperty(std::string("dropped_chunks_caught_") + name, std::to_string(caught) + "/" + std::to_string(chunks));
  }
}

}  // namespace
}  // namespace d9m
