// The gather forms (cpu.gather: kernels/common/map_variants.h, maxpool.h, conv.h, scatter.h,
// crop_and_resize.h, matmul_cpu.cpp) claim cpu.serial's bits: each output element must enumerate exactly the
// contributions the scatter form sends it, in the same order. The catalogue's configs check that at their few shapes; here,
// random geometries (gather_geometries.h) at every precision the op has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>

#include "suites/unit/gather_geometries.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/crop_and_resize/crop_and_resize.h"
#include "kernels/resize/resize.h"
#include "kernels/scatter/scatter.h"
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
                                                 {"crop_and_resize_grad_image", 160}, {"matmul", 80}, {"matmul_batched", 80}, {"sdpa_bwd", 80}}));
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

// crop_and_resize's twin of the test above: a sample at float(extent - 1), which outside() lets
// in, is `extent` itself above 2^24 (2^24 + 3 rounds to 2^24 + 4). Its taps once reached a pixel
// past the image: serial and the scatter forms wrote into the next row or past the output, and
// the gather's per-row lists past their buffers (an auditor found it under ASan).
TEST(Gather, CropTapsStayInsideTheImageWhereTheCoordinateRoundsUp) {
  using crop_and_resize::I;
  const I extent = (I{1} << 24) + 4;
  const float v = static_cast<float>(extent - 1);
  ASSERT_EQ(v, static_cast<float>(extent));  // the rounding this test is about
  ASSERT_FALSE(crop_and_resize::outside(v, extent));
  const crop_and_resize::AxisTaps t = crop_and_resize::axis_taps(v, extent);
  EXPECT_LE(t.lo, t.hi);
  EXPECT_LE(t.hi, extent - 1);
  EXPECT_LE(crop_and_resize::nearest_pixel(v, extent), extent - 1);
  // End to end on a 2 x (2^24 + 4) image: boxes with x1 = x2 = 1 sample column float(w - 1) on
  // every crop pixel. Every gradient lands in the last column of its row, and gather and serial
  // agree (the reviewer's config gave different digests before).
  CatalogConfig cc = test::config("crop_and_resize_grad_image",
                                  {{"batch", 1}, {"h", 2}, {"w", extent}, {"c", 1}, {"boxes", 2}, {"crop_h", 2}, {"crop_w", 2}});
  auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
  float* boxes = inputs[1].as<float>();
  for (int k = 0; k < 2; ++k) {
    boxes[4 * k] = 0.0f, boxes[4 * k + 1] = 1.0f, boxes[4 * k + 2] = 1.0f, boxes[4 * k + 3] = 1.0f;  // y1 x1 y2 x2
    inputs[2].as<std::int32_t>()[k] = 0;
  }
  const HostTensor serial = test::run_variant("crop_and_resize_grad_image", "cpu.serial", cc.problem, inputs);
  EXPECT_EQ(test::digest(test::run_variant("crop_and_resize_grad_image", "cpu.gather", cc.problem, inputs, 3)), test::digest(serial));
  for (I row = 0; row < 2; ++row) EXPECT_NE(serial.as<float>()[row * extent + extent - 1], 0.0f) << "row " << row;
  EXPECT_EQ(serial.as<float>()[extent], 0.0f) << "a gradient of row 0 went into row 1";
}

// A scatter index out of range (never made by the fill) is dropped by every form alike: the
// gather's sort once indexed its ranges with it, and the others wrote outside the output.
TEST(Gather, ScatterIndicesOutOfRangeAreDroppedByEveryForm) {
  for (const auto& [op, params] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"scatter_add", {{"rows", 300}, {"depth", 3}, {"updates", 20000}}},
           {"scatter_nd_add", {{"dim0", 5}, {"dim1", 7}, {"depth", 2}, {"updates", 500}}},
           {"unsorted_segment_sum", {{"rows", 500}, {"depth", 2}, {"num_segments", 9}}}}) {
    const CatalogConfig cc = test::config(op, params);
    auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    auto* idx = inputs[1].as<std::int32_t>();
    const bool pairs = op == "scatter_nd_add";
    // The extent itself: dim1 for the pairs' second index, rows or num_segments otherwise.
    const std::int32_t extent = pairs ? 7 : op == "scatter_add" ? 300 : 9;
    for (std::int32_t bad : {-5, 1 << 20, extent, -1}) {
      idx[pairs ? 2 * 3 + 1 : 3] = bad;
      const std::string serial = test::digest(test::run_variant(op, "cpu.serial", cc.problem, inputs));
      for (const char* v : {"cpu.gather", "cpu.ordered"})
        EXPECT_EQ(test::digest(test::run_variant(op, v, cc.problem, inputs, 3)), serial) << op << " " << v << " index " << bad;
      // And the same bits as row 3 sending zeros to a valid destination: it contributes nothing.
      auto zeroed = make_inputs(*cc.op, cc.problem, cc.seed);
      const std::size_t values = op == "unsorted_segment_sum" ? 0 : 2, depth = op == "scatter_add" ? 3 : 2;
      std::fill_n(zeroed[values].as<float>() + 3 * depth, depth, 0.0f);
      EXPECT_EQ(test::digest(test::run_variant(op, "cpu.serial", cc.problem, zeroed)), serial) << op << " index " << bad;
    }
  }
  // On the device the sort's keys are 32-bit: destinations past them are refused, not wrapped.
  // (The catalogue's 4 GiB limit on a config keeps them out today; the guard does not rely on it.)
  Problem big = test::config("scatter_nd_add", {{"dim0", 5}, {"dim1", 7}, {"depth", 1}, {"updates", 8}}).problem;
  big.geometry = scatter::Geometry{std::int64_t{65536} * 65536, 1, 8, 100, 65536};
  EXPECT_NE(scatter::gather_unsupported(big, true), std::nullopt);
  EXPECT_EQ(scatter::gather_unsupported(big, false), std::nullopt);
}

// The resize gathers have two forms of one walk (resize.h): operator(), an element at a time (what
// each cuda.gather thread runs), and run_block, a pixel's channels at a time (what cpu.gather's
// blocks run). Both must give cpu.serial's bits, and run_block must, whatever the block edges:
// the CPU's blocks of 1024 elements cut pixels of 3, 5 or 7 channels in two, which the random
// geometries above (under 1024 elements) never do. The element form runs here on the host, as
// the only place it runs without a GPU.
template <template <class> class Gather>
void check_gather_forms(const std::string& op) {
  std::mt19937 rng(5);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int split_pixels = 0;
  for (int i = 0; i < 12; ++i) {
    const nlohmann::json params = {{"n", pick(1, 2)},       {"h", pick(1, 12)},         {"w", pick(1, 12)},
                                   {"c", pick(2, 7)},       {"out_h", pick(1, 30)},     {"out_w", pick(1, 30)},
                                   {"align_corners", i % 3 == 1}, {"half_pixel_centers", i % 3 == 0}};
    for (DType dtype : test::config(op, params).op->dtypes) {
      const CatalogConfig cc = test::config(op, params, std::string(dtype_short_name(dtype)));
      const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
      const std::string serial = test::digest(test::run_variant(op, "cpu.serial", cc.problem, inputs));
      ThreadPool pool(1);
      const ExecContext exec{&pool, nullptr};
      KernelArgs args{cc.problem, {}, nullptr, exec};
      for (const auto& t : inputs) args.inputs.push_back(t.data());
      HostTensor by_element(cc.problem.output), by_block(cc.problem.output);
      std::memset(by_element.data(), 0xA5, cc.problem.output.bytes());
      std::memset(by_block.data(), 0xA5, cc.problem.output.bytes());
      const auto channels = params["c"].get<std::size_t>();
      with_float_type(dtype, [&](auto tag) {
        using T = decltype(tag);
        const Gather<T> gather(args);
        for (std::size_t o = 0; o < gather.items(); ++o) gather(o, by_element.as<T>());
        for (std::size_t begin = 0; begin < gather.items();) {  // blocks of 1 to 2 pixels, at random edges
          const std::size_t end = std::min(gather.items(), begin + static_cast<std::size_t>(pick(1, 2 * static_cast<int>(channels))));
          split_pixels += end % channels != 0;
          gather.run_block(begin, end, by_block.as<T>());
          begin = end;
        }
      });
      EXPECT_EQ(test::digest(by_element), serial) << op << " " << dtype_short_name(dtype) << " " << params.dump();
      EXPECT_EQ(test::digest(by_block), serial) << op << " " << dtype_short_name(dtype) << " " << params.dump();
    }
  }
  EXPECT_GT(split_pixels, 100);  // the blocks did cut pixels
}

TEST(Gather, ResizeGathersElementAndBlockFormsHaveSerialsBitsWhereverABlockEnds) {
  check_gather_forms<resize::BilinearGradGather>("resize_bilinear_grad");
  check_gather_forms<resize::NearestGradGather>("resize_nearest_grad");
}

// crop_and_resize's device gather sorts 2 * boxes * crop_h (image row, crop row) pairs with 32-bit
// positions and keys: plans past those are refused before anything runs, not wrapped, and its
// working memory counts the pairs and the row starts.
TEST(Gather, CropAndResizeDeviceListsRefuseWhatTheir32BitSortCannotHold) {
  Problem p = test::config("crop_and_resize_grad_image", {{"batch", 1}, {"h", 2}, {"w", 2}, {"c", 1}, {"boxes", 2}, {"crop_h", 2}, {"crop_w", 2}}).problem;
  EXPECT_EQ(crop_and_resize::gather_unsupported(p), std::nullopt);
  const auto small = crop_and_resize::gather_list_bytes(p.geom<crop_and_resize::Geometry>());
  EXPECT_EQ(small, 16u * 8 + 4u * 3 + 9u * 8 + (1u << 20));
  p.geometry = crop_and_resize::Geometry{1, 2, 2, 1, std::int64_t{1} << 30, 1, 1};  // 2^31 pairs
  EXPECT_NE(crop_and_resize::gather_unsupported(p), std::nullopt);
  p.geometry = crop_and_resize::Geometry{1, 2, 2, 1, (std::int64_t{1} << 30) - 1, 1, 1};  // 2^31 - 2: the last that fits
  EXPECT_EQ(crop_and_resize::gather_unsupported(p), std::nullopt);
  p.geometry = crop_and_resize::Geometry{65536, 65535, 1, 1, 1, 1, 1};  // 2^32 - 65536 image rows
  EXPECT_EQ(crop_and_resize::gather_unsupported(p), std::nullopt);
  // 2^32 - 1 image rows: refused. (The unused-slot key 2^32 - 1 would still fit; the guard is one
  // row stricter than it must be, as the scatter gather's, which no real plan comes near.)
  p.geometry = crop_and_resize::Geometry{65537, 65535, 1, 1, 1, 1, 1};
  EXPECT_NE(crop_and_resize::gather_unsupported(p), std::nullopt);
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
