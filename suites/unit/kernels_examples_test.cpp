// Hand-computed examples, one or more per family, and adjoint identities that tie every
// gradient to its forward op: <forward(x), g> == <x, grad(g)> (summed in double), which holds
// only if the gradient scatters exactly where the forward op gathers.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/counter_rng.h"
#include "kernels/pool/pool.h"
#include "kernels/embedding/embedding.h"
#include "kernels/sparse/sparse.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::inputs_from;
using test::run_variant;
using test::values;

void expect_all_variants(const std::string& op, const CatalogConfig& cc, const std::vector<HostTensor>& in,
                         const std::vector<float>& expected) {
  for (const auto* v : Registry::global().variants_of(op)) {
    if (v->backend != Backend::cpu) continue;
    EXPECT_EQ(values(run_variant(op, v->name, cc.problem, in)), std::vector<double>(expected.begin(), expected.end()))
        << op << "/" << v->name;
  }
}

HostTensor copy_of(const HostTensor& t) {
  HostTensor out(t.desc());
  std::memcpy(out.data(), t.data(), t.desc().bytes());
  return out;
}

TEST(Examples, BiasAdd) {
  auto cc = config("bias_add", {{"n", 1}, {"h", 1}, {"w", 2}, {"c", 2}});
  expect_all_variants("bias_add", cc, inputs_from(cc.problem, {{1, 2, 3, 4}, {10, 20}}), {11, 22, 13, 24});
  cc = config("bias_add_grad", {{"n", 1}, {"h", 1}, {"w", 3}, {"c", 2}});
  expect_all_variants("bias_add_grad", cc, inputs_from(cc.problem, {{1, 2, 3, 4, 5, 6}}), {9, 12});
}

TEST(Examples, ConvForward) {
  // 3x3 input 0..8, 2x2 filter [[1,2],[3,4]], VALID: y[i,j] = x[i,j] + 2 x[i,j+1] + 3 x[i+1,j] + 4 x[i+1,j+1].
  auto cc = config("conv2d", {{"n", 1}, {"h", 3}, {"w", 3}, {"ci", 1}, {"co", 1}, {"kh", 2}, {"kw", 2}, {"padding", "VALID"}});
  expect_all_variants("conv2d", cc, inputs_from(cc.problem, {{0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4}}),
                      {0 + 2 + 9 + 16, 1 + 4 + 12 + 20, 3 + 8 + 18 + 28, 4 + 10 + 21 + 32});
}

TEST(Examples, ConvForwardChannelsSamePaddingAndStride) {
  // One row of 4 pixels with 2 channels (x = [(1,10), (2,20), (3,30), (4,40)]), a 1x3 filter with
  // 2 output channels: output channel 0 weighs channel 0 by the tap (1, 2, 3), output channel 1
  // takes channel 1 at the middle tap only. SAME with stride 2: out = 2, pad_total = 1, pad_left
  // = 0, so output 0 sees pixels 0, 1, 2 and output 1 pixels 2, 3 and the padding.
  auto cc = config("conv2d", {{"n", 1}, {"h", 1}, {"w", 4}, {"ci", 2}, {"co", 2}, {"kh", 1}, {"kw", 3}, {"stride_w", 2}});
  // filter[kh=0][kw][ci][co]
  const std::vector<double> filter = {1, 0, 0, 0,   // kw 0: ci 0 -> co 0 weight 1
                                      2, 0, 0, 1,   // kw 1: ci 0 -> co 0 weight 2, ci 1 -> co 1 weight 1
                                      3, 0, 0, 0};  // kw 2
  expect_all_variants("conv2d", cc, inputs_from(cc.problem, {{1, 10, 2, 20, 3, 30, 4, 40}, filter}),
                      {1 * 1 + 2 * 2 + 3 * 3, 20, 3 * 1 + 4 * 2, 40});
}

TEST(Examples, ConvBackpropToData) {
  // 3x3 input, 2x2 filter [[1,2],[3,4]], VALID, stride 1, out_backprop all ones: each input
  // pixel collects the filter taps that cover it.
  auto cc = config("conv2d_bwd_data", {{"n", 1}, {"h", 3}, {"w", 3}, {"ci", 1}, {"co", 1}, {"kh", 2}, {"kw", 2}, {"padding", "VALID"}});
  expect_all_variants("conv2d_bwd_data", cc, inputs_from(cc.problem, {{1, 2, 3, 4}, {1, 1, 1, 1}}),
                      {1, 3, 2, 4, 10, 6, 3, 7, 4});
}

TEST(Examples, ConvBackpropToFilter) {
  // input 3x3 = 0..8, out_backprop 2x2 = [[1,0],[0,2]], VALID: dw[kh,kw] = x[kh,kw] + 2 x[1+kh,1+kw].
  auto cc = config("conv2d_bwd_filter", {{"n", 1}, {"h", 3}, {"w", 3}, {"ci", 1}, {"co", 1}, {"kh", 2}, {"kw", 2}, {"padding", "VALID"}});
  expect_all_variants("conv2d_bwd_filter", cc, inputs_from(cc.problem, {{0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 0, 0, 2}}),
                      {0 + 2 * 4, 1 + 2 * 5, 3 + 2 * 7, 4 + 2 * 8});
}

TEST(Examples, ConvSamePaddingAndStride) {
  // SAME, stride 2 on 4 columns: out = 2, pad_total = max((2-1)*2 + 3 - 4, 0) = 1, pad_left = 0.
  // A 1x3 filter [1,10,100] and out_backprop [1, 1]: output 0 gets taps at cols 0,1,2; output 1
  // at cols 2,3 (col 4 is padding).
  auto cc = config("conv2d_bwd_data", {{"n", 1}, {"h", 1}, {"w", 4}, {"ci", 1}, {"co", 1}, {"kh", 1}, {"kw", 3}, {"stride_w", 2}});
  expect_all_variants("conv2d_bwd_data", cc, inputs_from(cc.problem, {{1, 10, 100}, {1, 1}}), {1, 10, 101, 10});
}

TEST(Examples, MaxPoolGradOverlappingWindows) {
  // 3x3 input with its maximum in the centre; 2x2 windows, stride 1: all four windows pick the
  // centre, so it collects the sum of the four gradients.
  auto cc = config("maxpool2d_bwd", {{"n", 1}, {"h", 3}, {"w", 3}, {"c", 1}, {"ksize_h", 2}, {"ksize_w", 2}, {"stride_h", 1}, {"stride_w", 1}});
  expect_all_variants("maxpool2d_bwd", cc,
                      inputs_from(cc.problem, {{1, 2, 3, 4, 9, 5, 6, 7, 8}, {9, 9, 9, 9}, {1, 2, 3, 4}}),
                      {0, 0, 0, 0, 10, 0, 0, 0, 0});
}

TEST(Examples, MaxPoolGradTiesGoToTheFirstMaximum) {
  // One 2x2 window whose values tie: the first in scan order (row-major) wins, as in TensorFlow.
  auto cc = config("maxpool2d_bwd", {{"n", 1}, {"h", 2}, {"w", 2}, {"c", 1}, {"ksize_h", 2}, {"ksize_w", 2}, {"stride_h", 2}, {"stride_w", 2}});
  expect_all_variants("maxpool2d_bwd", cc, inputs_from(cc.problem, {{0, 5, 5, 1}, {5}, {3}}), {0, 3, 0, 0});
}

TEST(Examples, ResizeBilinearGradHalfPixel) {
  // 2 rows up-sampled to 4 with half-pixel centres: source rows -0.25, 0.25, 0.75, 1.25, so the
  // weights are (1), (0.75, 0.25), (0.25, 0.75), (1). Grads [1,2,3,4] -> [3.25, 6.75].
  auto cc = config("resize_bilinear_grad", {{"n", 1}, {"h", 2}, {"w", 1}, {"c", 1}, {"out_h", 4}, {"out_w", 1}});
  expect_all_variants("resize_bilinear_grad", cc, inputs_from(cc.problem, {{1, 2, 3, 4}, {0, 0}}), {3.25f, 6.75f});
  cc = config("resize_bilinear", {{"n", 1}, {"h", 2}, {"w", 1}, {"c", 1}, {"out_h", 4}, {"out_w", 1}});
  expect_all_variants("resize_bilinear", cc, inputs_from(cc.problem, {{0, 8}}), {0, 2, 6, 8});
}

TEST(Examples, ResizeBilinearAlignCorners) {
  // align_corners: scale (3-1)/(5-1) = 0.5, source rows 0, 0.5, 1, 1.5, 2.
  auto cc = config("resize_bilinear", {{"n", 1}, {"h", 3}, {"w", 1}, {"c", 1}, {"out_h", 5}, {"out_w", 1}, {"align_corners", true}, {"half_pixel_centers", false}});
  expect_all_variants("resize_bilinear", cc, inputs_from(cc.problem, {{0, 4, 12}}), {0, 2, 4, 8, 12});
}

TEST(Examples, ResizeNearest) {
  // Half-pixel nearest: source index floor((i + 0.5) * 2/4) = 0, 0, 1, 1.
  auto cc = config("resize_nearest", {{"n", 1}, {"h", 2}, {"w", 1}, {"c", 1}, {"out_h", 4}, {"out_w", 1}});
  expect_all_variants("resize_nearest", cc, inputs_from(cc.problem, {{5, 7}}), {5, 5, 7, 7});
  cc = config("resize_nearest_grad", {{"n", 1}, {"h", 2}, {"w", 1}, {"c", 1}, {"out_h", 4}, {"out_w", 1}});
  expect_all_variants("resize_nearest_grad", cc, inputs_from(cc.problem, {{1, 2, 3, 4}}), {3, 7});
}

TEST(Examples, ResizeNearestAlignCornersRoundsHalvesAwayFromZero) {
  // align_corners, 3 rows to 5: scale (3-1)/(5-1) = 0.5, source 0, 0.5, 1, 1.5, 2, rounded as TF's
  // roundf (half away from zero): rows 0, 1, 1, 2, 2. Rounding half to even would give 0, 0, 1,
  // 2, 2 and floor 0, 0, 1, 1, 2: each rule its own output. (The catalogue's 3x_up_align_corners
  // configs, scale 10/32, land on .5 at output 8.)
  const nlohmann::json p = {{"n", 1}, {"h", 3}, {"w", 1}, {"c", 1}, {"out_h", 5}, {"out_w", 1}, {"align_corners", true}, {"half_pixel_centers", false}};
  auto cc = config("resize_nearest", p);
  expect_all_variants("resize_nearest", cc, inputs_from(cc.problem, {{10, 20, 30}}), {10, 20, 20, 30, 30});
  cc = config("resize_nearest_grad", p);
  expect_all_variants("resize_nearest_grad", cc, inputs_from(cc.problem, {{1, 2, 4, 8, 16}}), {1, 6, 24});
}

TEST(Examples, ScatterFamily) {
  auto cc = config("scatter_add", {{"rows", 3}, {"depth", 1}, {"updates", 3}});
  expect_all_variants("scatter_add", cc, inputs_from(cc.problem, {{100, 200, 300}, {0, 2, 0}, {1, 2, 3}}), {104, 200, 302});
  cc = config("scatter_nd_add", {{"dim0", 2}, {"dim1", 2}, {"depth", 1}, {"updates", 2}});
  expect_all_variants("scatter_nd_add", cc, inputs_from(cc.problem, {{0, 0, 0, 0}, {1, 0, 1, 0}, {5, 6}}), {0, 0, 11, 0});
  // Negative segment ids are dropped.
  cc = config("unsorted_segment_sum", {{"rows", 4}, {"depth", 2}, {"num_segments", 2}});
  expect_all_variants("unsorted_segment_sum", cc, inputs_from(cc.problem, {{1, 2, 3, 4, 5, 6, 7, 8}, {1, -1, 1, 0}}),
                      {7, 8, 6, 8});
}

TEST(Examples, SegmentReductions) {
  // Rows (1, 2), (3, 4), (5, -6), (-7, -0.5) with sorted ids 0, 0, 2, 2 into 4 segments: segment
  // 1 and 3 are empty and hold TensorFlow's empty value (0 for sum, mean and max, 1 for prod:
  // SegmentMax's is 0, not the lowest float as UnsortedSegmentMax's), and a segment whose rows are
  // all negative keeps its negative maximum (-0.5).
  const nlohmann::json params = {{"rows", 4}, {"depth", 2}, {"num_segments", 4}};
  const std::vector<double> data{1, 2, 3, 4, 5, -6, -7, -0.5}, ids{0, 0, 2, 2};
  auto cc = config("segment_sum", params);
  expect_all_variants("segment_sum", cc, inputs_from(cc.problem, {data, ids}), {4, 6, 0, 0, -2, -6.5, 0, 0});
  cc = config("segment_mean", params);
  expect_all_variants("segment_mean", cc, inputs_from(cc.problem, {data, ids}), {2, 3, 0, 0, -1, -3.25, 0, 0});
  cc = config("segment_prod", params);
  expect_all_variants("segment_prod", cc, inputs_from(cc.problem, {data, ids}), {3, 8, 1, 1, -35, 3, 1, 1});
  cc = config("segment_max", params);
  expect_all_variants("segment_max", cc, inputs_from(cc.problem, {data, ids}), {3, 4, 0, 0, 5, -0.5, 0, 0});
}

TEST(Examples, Bincount) {
  // arr = 0, 2, 2, 5, 1, 2 into 3 bins: 5 is past the last bin and ignored (maxlength).
  const std::vector<double> arr{0, 2, 2, 5, 1, 2};
  auto cc = config("bincount", {{"n", 6}, {"bins", 3}});
  expect_all_variants("bincount", cc, inputs_from(cc.problem, {arr}), {1, 1, 3});
  cc = config("bincount_weighted", {{"n", 6}, {"bins", 3}});
  expect_all_variants("bincount_weighted", cc, inputs_from(cc.problem, {arr, {0.5, 1, 2, 100, -3, 4}}), {0.5, -3, 7});
}

TEST(Examples, CropAndResize) {
  // 3x3 image 0..8. Box [0,0,1,1] with a 3x3 crop samples every pixel; box [0,0,0.5,0.5] with
  // a 2x2 crop samples rows/cols 0 and 1; a box entirely above the image extrapolates.
  auto cc = config("crop_and_resize", {{"batch", 1}, {"h", 3}, {"w", 3}, {"c", 1}, {"boxes", 1}, {"crop_h", 3}, {"crop_w", 3}});
  const std::vector<double> image{0, 1, 2, 3, 4, 5, 6, 7, 8};
  expect_all_variants("crop_and_resize", cc, inputs_from(cc.problem, {image, {0, 0, 1, 1}, {0}}), {0, 1, 2, 3, 4, 5, 6, 7, 8});
  cc = config("crop_and_resize", {{"batch", 1}, {"h", 3}, {"w", 3}, {"c", 1}, {"boxes", 2}, {"crop_h", 2}, {"crop_w", 2}, {"extrapolation_value", -1}});
  expect_all_variants("crop_and_resize", cc, inputs_from(cc.problem, {image, {0, 0, 0.5, 0.5, -1, 0, -0.5, 1}, {0, 0}}),
                      {0, 1, 3, 4, -1, -1, -1, -1});
  // The half-way sample between pixels 0 and 1 (bilinear) and its gradient.
  cc = config("crop_and_resize", {{"batch", 1}, {"h", 3}, {"w", 3}, {"c", 1}, {"boxes", 1}, {"crop_h", 1}, {"crop_w", 1}});
  expect_all_variants("crop_and_resize", cc, inputs_from(cc.problem, {image, {0, 0, 0, 0.5}, {0}}), {0.5f});
  cc = config("crop_and_resize_grad_image", {{"batch", 1}, {"h", 3}, {"w", 3}, {"c", 1}, {"boxes", 1}, {"crop_h", 1}, {"crop_w", 1}});
  expect_all_variants("crop_and_resize_grad_image", cc, inputs_from(cc.problem, {{4}, {0, 0, 0, 0.5}, {0}}),
                      {2, 2, 0, 0, 0, 0, 0, 0, 0});
}

TEST(Examples, SparseTimesDense) {
  // A = [[1, 0, 2], [0, 3, 4]] as CSR and as COO; x = [1, 10, 100]; A x = [201, 430].
  const std::vector<double> cols{0, 2, 1, 2}, vals{1, 2, 3, 4};
  for (const char* format : {"csr", "coo"}) {
    const std::vector<double> rows = std::string(format) == "csr" ? std::vector<double>{0, 2, 4} : std::vector<double>{0, 0, 1, 1};
    auto cc = config("spmv", {{"rows", 2}, {"cols", 3}, {"nnz_per_row", 2}, {"format", format}});
    expect_all_variants("spmv", cc, inputs_from(cc.problem, {rows, cols, vals, {1, 10, 100}}), {201, 430});
    // A^T [1, 10] = [1, 30, 2 + 40].
    cc = config("spmv", {{"rows", 2}, {"cols", 3}, {"nnz_per_row", 2}, {"format", format}, {"transpose", true}});
    expect_all_variants("spmv", cc, inputs_from(cc.problem, {rows, cols, vals, {1, 10}}), {1, 30, 42});
    // b = [[1, 2], [10, 20], [100, 200]]: A b = [[201, 402], [430, 860]].
    cc = config("spmm", {{"rows", 2}, {"cols", 3}, {"nnz_per_row", 2}, {"format", format}, {"n", 2}});
    expect_all_variants("spmm", cc, inputs_from(cc.problem, {rows, cols, vals, {1, 2, 10, 20, 100, 200}}), {201, 402, 430, 860});
    // A^T [[1, 2], [10, 20]] = [[1, 2], [30, 60], [42, 84]].
    cc = config("spmm", {{"rows", 2}, {"cols", 3}, {"nnz_per_row", 2}, {"format", format}, {"n", 2}, {"transpose", true}});
    expect_all_variants("spmm", cc, inputs_from(cc.problem, {rows, cols, vals, {1, 2, 10, 20}}), {1, 2, 30, 60, 42, 84});
  }
}

TEST(Examples, DilationGradients) {
  // input [[1, 5, 2], [0, 3, 9], [4, 0, 1]], filter [[0, 0], [0, -10]], VALID: the four windows'
  // maxima of input + filter are 5 at input (0, 1) tap (0, 1); 5 at (0, 1) tap (0, 0); 4 at
  // (2, 0) tap (1, 0); 9 at (1, 2) tap (0, 1). out_backprop [1, 10, 100, 1000].
  const nlohmann::json valid = {{"n", 1}, {"h", 3}, {"w", 3}, {"c", 1}, {"filter_h", 2}, {"filter_w", 2}, {"padding", "VALID"}};
  const std::vector<std::vector<double>> in = {{1, 5, 2, 0, 3, 9, 4, 0, 1}, {0, 0, 0, -10}, {1, 10, 100, 1000}};
  auto cc = config("dilation2d_bwd_input", valid);
  expect_all_variants("dilation2d_bwd_input", cc, inputs_from(cc.problem, in), {0, 11, 0, 0, 0, 1000, 100, 0, 0});
  cc = config("dilation2d_bwd_filter", valid);
  expect_all_variants("dilation2d_bwd_filter", cc, inputs_from(cc.problem, in), {10, 1001, 100, 0});
  // Ties: all values equal, SAME on 2x2 (pad after): the first valid tap of each window wins
  // (TF's strict '>'), so every gradient stays at its own position and on tap (0, 0). The last
  // maximum would send window (0, 0)'s to input (1, 1) and tap (1, 1).
  const nlohmann::json same = {{"n", 1}, {"h", 2}, {"w", 2}, {"c", 1}, {"filter_h", 2}, {"filter_w", 2}};
  const std::vector<std::vector<double>> flat = {{0, 0, 0, 0}, {0, 0, 0, 0}, {1, 2, 3, 4}};
  cc = config("dilation2d_bwd_input", same);
  expect_all_variants("dilation2d_bwd_input", cc, inputs_from(cc.problem, flat), {1, 2, 3, 4});
  cc = config("dilation2d_bwd_filter", same);
  expect_all_variants("dilation2d_bwd_filter", cc, inputs_from(cc.problem, flat), {10, 0, 0, 0});
  // No tap in range (1x1 input, filter 2x1 at rate 3, SAME: taps at rows -1 and 2): TF's
  // defaults, input (0, 0) and tap (0, 0).
  const nlohmann::json empty = {{"n", 1}, {"h", 1}, {"w", 1}, {"c", 1}, {"filter_h", 2}, {"filter_w", 1}, {"rate_h", 3}};
  cc = config("dilation2d_bwd_input", empty);
  expect_all_variants("dilation2d_bwd_input", cc, inputs_from(cc.problem, {{5}, {1, 2}, {7}}), {7});
  cc = config("dilation2d_bwd_filter", empty);
  expect_all_variants("dilation2d_bwd_filter", cc, inputs_from(cc.problem, {{5}, {1, 2}, {7}}), {7, 0});
  // Taps of -inf and NaN never beat TF's start, the lowest finite value, so the defaults stand
  // (found by an oracle audit: the first in-range tap won). 1x2 input, filter 1x2 at rate 2, SAME
  // (pad 1 before): window 0's taps are columns -1 (out) and 1, window 1's columns 0 and 2 (out).
  // Window 0 defaults to column 0 and tap 0, not to its only tap in range (column 1, tap 1).
  const nlohmann::json sparse = {{"n", 1}, {"h", 1}, {"w", 2}, {"c", 1}, {"filter_h", 1}, {"filter_w", 2}, {"rate_w", 2}};
  for (const double v : {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    cc = config("dilation2d_bwd_input", sparse);
    expect_all_variants("dilation2d_bwd_input", cc, inputs_from(cc.problem, {{v, v}, {0, 0}, {1, 10}}), {11, 0});
    cc = config("dilation2d_bwd_filter", sparse);
    expect_all_variants("dilation2d_bwd_filter", cc, inputs_from(cc.problem, {{v, v}, {0, 0}, {1, 10}}), {11, 0});
  }
}

TEST(Examples, ResamplerGradients) {
  // TF, 2x2 image, one channel: the point (0.25, 0.5) with gradient 8 spreads 3, 1, 3, 1 (dx =
  // 0.75, dy = 0.5); (-0.5, 0.5) with 4 counts (x > -1) and adds 1 at (0, 0) and (0, 1); (-1, 0)
  // with 100 does not count. grad_data is NHWC.
  const nlohmann::json image = {{"batch", 1}, {"h", 2}, {"w", 2}, {"c", 1}, {"points", 3}};
  auto cc = config("resampler_grad_data", image);
  expect_all_variants("resampler_grad_data", cc, inputs_from(cc.problem, {{0.25, 0.5, -0.5, 0.5, -1, 0}, {8, 4, 100}}),
                      {4, 1, 4, 1});
  // PyTorch without align_corners, ix = x + 0.5 on 2 pixels: the same two points in normalised
  // coordinates, and a third at ix = -1.5 whose corners all fall outside.
  nlohmann::json torch = image;
  torch["semantics"] = "grid_sample";
  cc = config("resampler_grad_data", torch);
  expect_all_variants("resampler_grad_data", cc, inputs_from(cc.problem, {{-0.25, 0, -1, 0, -2, 0}, {8, 4, 100}}), {4, 1, 4, 1});
  // With align_corners, ix = (x + 1) / 2: x = -0.5, y = 0 is ix = 0.25, iy = 0.5.
  torch["align_corners"] = true;
  torch["points"] = 1;
  cc = config("resampler_grad_data", torch);
  expect_all_variants("resampler_grad_data", cc, inputs_from(cc.problem, {{-0.5, 0}, {8}}), {3, 1, 3, 1});
  // grad_warp: data 1 + x + 2y on channel 0 and ten times that on channel 1, bilinear, so at
  // (0.25, 0.5) with gradients (2, 1) the warp gradient is 2 (1, 2) + 1 (10, 20) = (12, 24).
  cc = config("resampler_grad_warp", {{"batch", 1}, {"h", 2}, {"w", 2}, {"c", 2}, {"points", 1}});
  expect_all_variants("resampler_grad_warp", cc, inputs_from(cc.problem, {{1, 10, 2, 20, 3, 30, 4, 40}, {0.25, 0.5}, {2, 1}}),
                      {12, 24});
}

TEST(Examples, BicubicGradClampsBorderTapsWithPyTorchsWeights) {
  // One row of 4 pixels up-sampled to 8 without align_corners: src(o) = (o + 0.5) / 2 - 0.5. (The
  // single row maps onto itself: t = 0, weights 0, 1, 0, 0, all four taps clamped onto row 0.)
  // Output 0: src -0.25, floor -1, t = 0.75, taps -2..1 with A = -0.75's weights (-9, 67, 225,
  // -27) / 256; the three taps left of the image clamp onto pixel 0, which gets 283 / 256, pixel 1
  // -27 / 256. Output 7: src 3.25, taps 2..5 with (-27, 225, 67, -9) / 256, the last three on
  // pixel 3. Gradients 256 at outputs 0 and 7: [283, -27, -27, 283]. Dropping the taps outside
  // (TensorFlow's Keys cubic, A = -0.5, renormalises instead) would give pixel 0 225 + 67 = 292 at
  // A = -0.75 and other weights at A = -0.5.
  auto cc = config("resize_bicubic_grad", {{"n", 1}, {"c", 1}, {"h", 1}, {"w", 4}, {"out_h", 1}, {"out_w", 8}});
  expect_all_variants("resize_bicubic_grad", cc, inputs_from(cc.problem, {{256, 0, 0, 0, 0, 0, 0, 256}}), {283, -27, -27, 283});
  // align_corners, 4 -> 7: scale 3 / 6, src(o) = o / 2. Output 1: src 0.5, t = 0.5, taps -1..2 with
  // (-3, 19, 19, -3) / 32: gradient 32 gives [-3 + 19, 19, -3, 0]. Without align_corners the scale
  // would be 4 / 7 and output 1 would sample at 0.36.
  cc = config("resize_bicubic_grad", {{"n", 1}, {"c", 1}, {"h", 1}, {"w", 4}, {"out_h", 1}, {"out_w", 7}, {"align_corners", true}});
  expect_all_variants("resize_bicubic_grad", cc, inputs_from(cc.problem, {{0, 32, 0, 0, 0, 0, 0}}), {16, 19, -3, 0});
}

TEST(Examples, TrilinearGradClampsNegativeSourcesToZero) {
  // 2 pixels up-sampled to 4 (depth and height 1 -> 1) without align_corners: src(o) = o / 2 - 0.25,
  // clamped to 0 (linear modes): 0, 0.25, 0.75, 1.25, so weights (1 on pixel 0), (0.75, 0.25),
  // (0.25, 0.75), and the last, past the end, both corners on pixel 1 (0.75 + 0.25). Gradients
  // [4, 8, 12, 16]: pixel 0 = 4 + 6 + 3 = 13, pixel 1 = 2 + 9 + 12 + 4 = 27. Without the clamp
  // output 0 would weigh pixel 0 by 1.25 and pixel 1 by -0.25 (int(-0.25) = 0).
  auto cc = config("resize_trilinear_grad", {{"n", 1}, {"c", 1}, {"d", 1}, {"h", 1}, {"w", 2}, {"out_d", 1}, {"out_h", 1}, {"out_w", 4}});
  expect_all_variants("resize_trilinear_grad", cc, inputs_from(cc.problem, {{4, 8, 12, 16}}), {13, 27});
  // align_corners, 3 -> 5 along the height: src(o) = o / 2, gradients all 2: [2 + 1, 1 + 2 + 1, 1 + 2].
  cc = config("resize_trilinear_grad", {{"n", 1}, {"c", 1}, {"d", 1}, {"h", 3}, {"w", 1}, {"out_d", 1}, {"out_h", 5}, {"out_w", 1}, {"align_corners", true}});
  expect_all_variants("resize_trilinear_grad", cc, inputs_from(cc.problem, {{2, 2, 2, 2, 2}}), {3, 4, 3});
}

TEST(Examples, PaddingGradsFollowLeftRightTopBottom) {
  // One row of 3, gradients 1, 10, ..., 10^5 on the 6 padded columns.
  const std::vector<std::vector<double>> grads = {{1, 10, 100, 1000, 10000, 100000}};
  auto row = [](std::int64_t left, std::int64_t right) {
    return nlohmann::json{{"n", 1}, {"c", 1}, {"h", 1}, {"w", 3}, {"pad_left", left}, {"pad_right", right}};
  };
  // Reflection, left 2 right 1: columns copy pixels 2 1 | 0 1 2 | 1 (the edge is not repeated).
  auto cc = config("reflection_pad2d_bwd", row(2, 1));
  expect_all_variants("reflection_pad2d_bwd", cc, inputs_from(cc.problem, grads), {100, 101010, 10001});
  // Its mirror, left 1 right 2: 1 | 0 1 2 | 1 0.
  cc = config("reflection_pad2d_bwd", row(1, 2));
  expect_all_variants("reflection_pad2d_bwd", cc, inputs_from(cc.problem, grads), {100010, 10101, 1000});
  // Top 1 bottom 2 on a column of 3: the rows copy 1 | 0 1 2 | 1 0.
  cc = config("reflection_pad2d_bwd", {{"n", 1}, {"c", 1}, {"h", 3}, {"w", 1}, {"pad_top", 1}, {"pad_bottom", 2}});
  expect_all_variants("reflection_pad2d_bwd", cc, inputs_from(cc.problem, grads), {100010, 10101, 1000});
  // Replication repeats the edge: 0 0 | 0 1 2 | 2, and mirrored 0 | 0 1 2 | 2 2.
  cc = config("replication_pad2d_bwd", row(2, 1));
  expect_all_variants("replication_pad2d_bwd", cc, inputs_from(cc.problem, grads), {111, 1000, 110000});
  cc = config("replication_pad2d_bwd", row(1, 2));
  expect_all_variants("replication_pad2d_bwd", cc, inputs_from(cc.problem, grads), {11, 100, 111000});
  // Both axes at once, gradients g(oy, ox) = 4 oy + ox. A 2x2 image reflected by 1 on every side:
  // rows and columns 0..3 copy 1 0 1 0, so pixel (0, 0) collects (1,1) + (1,3) + (3,1) + (3,3) =
  // 40, (0, 1) 4 + 6 + 12 + 14 = 36, (1, 0) 1 + 3 + 9 + 11 = 24, (1, 1) 0 + 2 + 8 + 10 = 20.
  std::vector<double> ramp(16);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<double>(i);
  cc = config("reflection_pad2d_bwd", {{"n", 1}, {"c", 1}, {"h", 2}, {"w", 2}, {"pad_left", 1}, {"pad_right", 1}, {"pad_top", 1}, {"pad_bottom", 1}});
  expect_all_variants("reflection_pad2d_bwd", cc, inputs_from(cc.problem, {ramp}), {40, 36, 24, 20});
  // Replicated by 2 on the left and 1 on top (3 x 4 output): rows copy 0 0 1, columns 0 0 0 1, so
  // (0, 0) = 0 + 1 + 2 + 4 + 5 + 6 = 18, (0, 1) = 3 + 7, (1, 0) = 8 + 9 + 10, (1, 1) = 11.
  ramp.resize(12);
  cc = config("replication_pad2d_bwd", {{"n", 1}, {"c", 1}, {"h", 2}, {"w", 2}, {"pad_left", 2}, {"pad_right", 0}, {"pad_top", 1}, {"pad_bottom", 0}});
  expect_all_variants("replication_pad2d_bwd", cc, inputs_from(cc.problem, {ramp}), {18, 10, 27, 11});
}

TEST(Examples, AdaptiveAvgPoolGrad) {
  // One row of 5 into 3 adaptive windows: start floor(5o / 3) = 0, 1, 3, end ceil(5(o + 1) / 3) =
  // 2, 4, 5, so [0, 2), [1, 4), [3, 5), overlapping (3 does not divide 5). Gradients 2, 6, 4 over
  // sizes 2, 3, 2: 1, 2, 2 added to each input of the window.
  auto cc = config("adaptive_avg_pool2d_bwd", {{"n", 1}, {"c", 1}, {"h", 1}, {"w", 5}, {"out_h", 1}, {"out_w", 3}});
  expect_all_variants("adaptive_avg_pool2d_bwd", cc, inputs_from(cc.problem, {{2, 6, 4}}), {1, 3, 2, 4, 2});
  // Up-sampling 2 inputs into 3 windows [0, 1), [0, 2), [1, 2) (floor(2o / 3), ceil(2(o + 1) / 3)):
  // 3 / 1, 4 / 2 and 5 / 1, so 3 + 2 and 2 + 5. Two planes: each keeps to its own.
  cc = config("adaptive_avg_pool2d_bwd", {{"n", 1}, {"c", 2}, {"h", 1}, {"w", 2}, {"out_h", 1}, {"out_w", 3}});
  expect_all_variants("adaptive_avg_pool2d_bwd", cc, inputs_from(cc.problem, {{3, 4, 5, 30, 40, 50}}), {5, 7, 50, 70});
  // PyTorch's arithmetic, grad_output / kW / kH with two float divisions: one 5 x 3 window (kH 5,
  // kW 3) with gradient 7 gives (7 / 3) / 5 = 0x1.dddddcp-2 at all 15 inputs, where 7 / 15 and
  // (7 / 5) / 3 round to 0x1.dddddep-2 and the channels-last kernel's 7 ((1 / 3)(1 / 5)) to
  // 0x1.ddddep-2.
  cc = config("adaptive_avg_pool2d_bwd", {{"n", 1}, {"c", 1}, {"h", 5}, {"w", 3}, {"out_h", 1}, {"out_w", 1}});
  expect_all_variants("adaptive_avg_pool2d_bwd", cc, inputs_from(cc.problem, {{7}}), std::vector<float>(15, 0x1.dddddcp-2f));
}

TEST(Examples, AvgPool3dGrad) {
  // One row of 4, kernel 3, stride 2, padding 1 (depth and height 1). ceil_mode adds a third
  // window: floor((4 + 2 - 3 + 1) / 2) + 1 = 3, and it starts at 3 < 4 + 1. Windows (start, end =
  // min(start + 3, 4 + 1)): (-1, 2), (1, 4), (3, 5), padded sizes 3, 3, 2, clipped to [0, 2),
  // [1, 4), [3, 4). Gradients 3, 6, 8.
  nlohmann::json p = {{"n", 1}, {"c", 1}, {"d", 1}, {"h", 1}, {"w", 4}, {"kernel_d", 1}, {"kernel_h", 1}, {"kernel_w", 3},
                      {"stride_d", 1}, {"stride_h", 1}, {"stride_w", 2}, {"padding_w", 1}, {"ceil_mode", true}};
  auto cc = config("avg_pool3d_bwd", p);
  // count_include_pad (the default): divisors 3, 3, 2, so 1 at inputs 0-1, 2 at 1-3, 4 at 3.
  expect_all_variants("avg_pool3d_bwd", cc, inputs_from(cc.problem, {{3, 6, 8}}), {1, 3, 2, 6});
  // Without it the clipped sizes 2, 3, 1 divide: 1.5, 2, 8.
  p["count_include_pad"] = false;
  cc = config("avg_pool3d_bwd", p);
  expect_all_variants("avg_pool3d_bwd", cc, inputs_from(cc.problem, {{3, 6, 8}}), {1.5, 3.5, 2, 10});
  // Without ceil_mode two windows; divisor_override 4 divides both: 0.75 and 1.5.
  p["ceil_mode"] = false;
  p["divisor_override"] = 4;
  cc = config("avg_pool3d_bwd", p);
  expect_all_variants("avg_pool3d_bwd", cc, inputs_from(cc.problem, {{3, 6}}), {0.75, 2.25, 1.5, 1.5});
  // PyTorch's arithmetic, one division in float: 5 / 3 = 0x1.aaaaaap+0 at all three inputs of one
  // window (divisor_override 3); the stride-1 kernel's 5 (1 / 3) would be 0x1.aaaaacp+0.
  cc = config("avg_pool3d_bwd", {{"n", 1}, {"c", 1}, {"d", 1}, {"h", 1}, {"w", 3}, {"kernel_d", 1}, {"kernel_h", 1}, {"kernel_w", 3},
                                 {"stride_d", 1}, {"stride_h", 1}, {"stride_w", 2}, {"divisor_override", 3}});
  expect_all_variants("avg_pool3d_bwd", cc, inputs_from(cc.problem, {{5}}), {0x1.aaaaaap+0f, 0x1.aaaaaap+0f, 0x1.aaaaaap+0f});
}

TEST(Examples, MaxPoolGradsAddAtTheForwardsIndices) {
  // adaptive: two planes of 2 x 3, windows [0, 2) and [1, 3) of columns over both rows. Plane 0's
  // windows both point at (0, 1) (plane-local index 1) and add there; plane 1's at 3 and 5.
  auto cc = config("adaptive_max_pool2d_bwd", {{"n", 1}, {"c", 2}, {"h", 2}, {"w", 3}, {"out_h", 1}, {"out_w", 2}});
  const std::vector<double> any_input(12, 0.0);
  expect_all_variants("adaptive_max_pool2d_bwd", cc, inputs_from(cc.problem, {{1, 2, 10, 20}, any_input, {1, 1, 3, 5}}),
                      {0, 3, 0, 0, 0, 0, 0, 0, 0, 10, 0, 20});
  // max_pool3d: one row of 5, kernel 3, stride 2, padding 1: windows 0-1, 1-3, 3-4; indices 0, 3, 3.
  cc = config("max_pool3d_bwd", {{"n", 1}, {"c", 1}, {"d", 1}, {"h", 1}, {"w", 5}, {"kernel_d", 1}, {"kernel_h", 1}, {"kernel_w", 3},
                                 {"stride_d", 1}, {"stride_h", 1}, {"stride_w", 2}, {"padding_w", 1}});
  expect_all_variants("max_pool3d_bwd", cc, inputs_from(cc.problem, {{1, 2, 4}, {5, 5, 1, 7, 7}, {0, 3, 3}, {5, 7, 7}}), {1, 0, 0, 6, 0});
}

TEST(Examples, MaxPoolIndicesAreTheFirstMaximumInScanOrder) {
  // The forward's rule (PyTorch's `val > max` / `max < val`): a tie keeps the first maximum in scan
  // order. Row [5, 5, 1, 7, 7], kernel 3, stride 2, padding 1: windows {0, 1}, {1, 2, 3}, {3, 4}
  // pick 0, 3, 3 (the last maximum would pick 1, 3, 4).
  pool::Pool3d g;
  g.n = g.c = 1;
  g.x = {5, 3, 2, 1, 1, 3};
  const float row[] = {5, 5, 1, 7, 7};
  EXPECT_EQ(pool::pool3d_argmax(g, row, 0, 0, 0), 0);
  EXPECT_EQ(pool::pool3d_argmax(g, row, 0, 0, 1), 3);
  EXPECT_EQ(pool::pool3d_argmax(g, row, 0, 0, 2), 3);
  // Dilation 2 from the padding: window 0's taps -1, 1, 3 start at 1 (the first tap inside).
  g.x = {5, 3, 2, 1, 2, 2};
  EXPECT_EQ(pool::pool3d_argmax(g, row, 0, 0, 0), 3);  // 5 at 1, 7 at 3
  // Adaptive, 2 x 3 into 1 x 2: windows of columns [0, 2) and [1, 3) over both rows, scanned row by
  // row. [[1, 4, 4], [4, 0, 4]]: window 0 sees 1, 4, 4, 0 -> (0, 1); window 1 sees 4, 4, 0, 4 -> (0, 1).
  pool::Adaptive2d a;
  a.n = a.c = 1;
  a.y = {2, 1};
  a.x = {3, 2};
  const float plane[] = {1, 4, 4, 4, 0, 4};
  EXPECT_EQ(pool::adaptive_argmax(a, plane, 0, 0), 1);
  EXPECT_EQ(pool::adaptive_argmax(a, plane, 0, 1), 1);
}

// floor(num / den) and ceil(num / den) in double: PyTorch's adaptive window bounds written out.
std::int64_t floor_of(std::int64_t num, std::int64_t den) {
  return static_cast<std::int64_t>(std::floor(static_cast<double>(num) / static_cast<double>(den)));
}
std::int64_t ceil_of(std::int64_t num, std::int64_t den) {
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(num) / static_cast<double>(den)));
}

// The max pools' fills give every window the forward's index: the first maximum of its taps in
// scan order, found here by brute force over the window's definition (PyTorch's formulas, written
// out again). With levels 2 most windows tie, so the rule is exercised.
TEST(Examples, MaxPoolFillsIndexTheFirstMaximumAtEveryPrecision) {
  for (const char* dtype : {"f32", "f16", "bf16", "f64"}) {
    SCOPED_TRACE(dtype);
    const auto cc = config("max_pool3d_bwd", {{"n", 2}, {"c", 2}, {"d", 5}, {"h", 6}, {"w", 7}, {"kernel_d", 2}, {"kernel_h", 3},
                                              {"kernel_w", 3}, {"stride_d", 1}, {"stride_h", 2}, {"stride_w", 2}, {"padding_h", 1},
                                              {"dilation_w", 2}, {"ceil_mode", true}, {"levels", 2}}, dtype);
    const auto in = make_inputs(*cc.op, cc.problem, 11);
    const auto x = values(in[1]), y = values(in[3]);
    const auto* idx = in[2].as<std::int32_t>();
    const auto& g = cc.problem.geom<pool::Pool3d>();
    int ties = 0, windows = 0;
    for (std::int64_t plane = 0; plane < 4; ++plane)
      for (std::int64_t od = 0; od < g.z.out; ++od)
        for (std::int64_t oh = 0; oh < g.y.out; ++oh)
          for (std::int64_t ow = 0; ow < g.x.out; ++ow) {
            std::int64_t first = -1, count = 0;
            double best = -INFINITY;
            for (std::int64_t kt = 0; kt < 2; ++kt)
              for (std::int64_t kh = 0; kh < 3; ++kh)
                for (std::int64_t kw = 0; kw < 3; ++kw) {
                  const std::int64_t t = od + kt, h = 2 * oh - 1 + kh, w = 2 * ow + 2 * kw;
                  if (t >= 5 || h < 0 || h >= 6 || w >= 7) continue;
                  const std::int64_t at = (t * 6 + h) * 7 + w;
                  const double v = x[static_cast<std::size_t>(plane * 210 + at)];
                  if (v > best) best = v, first = at, count = 1;
                  else if (v == best) ++count;
                }
            const std::int64_t o = ((plane * g.z.out + od) * g.y.out + oh) * g.x.out + ow;
            EXPECT_EQ(idx[o], first) << "window " << o;
            EXPECT_EQ(y[static_cast<std::size_t>(o)], best) << "window " << o;
            ties += count > 1;
            ++windows;
          }
    EXPECT_GT(ties, windows / 2);
    EXPECT_EQ(g.y.out, 4);  // ceil_mode's window: floor((6 + 2 - 3 + 1) / 2) + 1 = 4 rows of windows, 3 without it
  }
  // Adaptive, 7 x 5 into 3 x 4 (overlapping windows): the same check with floor / ceil bounds.
  for (const char* dtype : {"f32", "bf16"}) {
    SCOPED_TRACE(dtype);
    const auto cc = config("adaptive_max_pool2d_bwd", {{"n", 3}, {"c", 2}, {"h", 7}, {"w", 5}, {"out_h", 3}, {"out_w", 4}, {"levels", 2}}, dtype);
    const auto in = make_inputs(*cc.op, cc.problem, 12);
    const auto x = values(in[1]);
    const auto* idx = in[2].as<std::int32_t>();
    int ties = 0;
    for (std::int64_t plane = 0; plane < 6; ++plane)
      for (std::int64_t oh = 0; oh < 3; ++oh)
        for (std::int64_t ow = 0; ow < 4; ++ow) {
          std::int64_t first = -1, count = 0;
          double best = -INFINITY;
          for (std::int64_t h = floor_of(oh * 7, 3); h < ceil_of((oh + 1) * 7, 3); ++h)
            for (std::int64_t w = floor_of(ow * 5, 4); w < ceil_of((ow + 1) * 5, 4); ++w) {
              const double v = x[static_cast<std::size_t>(plane * 35 + h * 5 + w)];
              if (v > best) best = v, first = h * 5 + w, count = 1;
              else if (v == best) ++count;
            }
          EXPECT_EQ(idx[(plane * 3 + oh) * 4 + ow], first);
          ties += count > 1;
        }
    EXPECT_GT(ties, 6 * 12 / 2);
  }
}

TEST(Examples, DepthwiseGradientsPinTheChannelOrder) {
  // One row of 3 pixels, C = 2, M = 2, a 1x2 filter, VALID: 2 output positions, output channel
  // k = c*M + m. filter[0][kw][c][m] = 1..8, out_backprop[ow][k] = [1, 10, 100, 1000] and
  // [2, 20, 200, 2000], input[iw][c] = [1, 2], [3, 4], [5, 6].
  const nlohmann::json p = {{"n", 1}, {"h", 1}, {"w", 3}, {"c", 2}, {"multiplier", 2}, {"kh", 1}, {"kw", 2}, {"padding", "VALID"}};
  const std::vector<double> filter{1, 2, 3, 4, 5, 6, 7, 8}, dy{1, 10, 100, 1000, 2, 20, 200, 2000}, x{1, 2, 3, 4, 5, 6};
  // dx[iw][c] = sum over (ow, kw) with ow + kw = iw, and m, of dy[ow][c*2+m] * w[kw][c][m]:
  //   iw 0: c0 1*1 + 10*2 = 21;  c1 100*3 + 1000*4 = 4300
  //   iw 1: c0 (1*5 + 10*6) + (2*1 + 20*2) = 107;  c1 (100*7 + 1000*8) + (200*3 + 2000*4) = 17300
  //   iw 2: c0 2*5 + 20*6 = 130;  c1 200*7 + 2000*8 = 17400
  // (Channels in the order m*C + c would give iw 0, c0 = 1*1 + 100*2 = 201.)
  auto cc = config("depthwise_conv2d_bwd_data", p);
  expect_all_variants("depthwise_conv2d_bwd_data", cc, inputs_from(cc.problem, {filter, dy}), {21, 4300, 107, 17300, 130, 17400});
  // dw[kw][c][m] = sum over ow of x[ow + kw][c] * dy[ow][c*2+m]:
  //   kw 0: 1*1 + 3*2 = 7, 1*10 + 3*20 = 70, 2*100 + 4*200 = 1000, 2*1000 + 4*2000 = 10000
  //   kw 1: 3*1 + 5*2 = 13, 130, 4*100 + 6*200 = 1600, 16000
  cc = config("depthwise_conv2d_bwd_filter", p);
  expect_all_variants("depthwise_conv2d_bwd_filter", cc, inputs_from(cc.problem, {x, dy}), {7, 70, 1000, 10000, 13, 130, 1600, 16000});
}

TEST(Examples, DepthwiseGradientsSamePaddingGoesAfter) {
  // w = 4, a 1x3 filter, stride 2, SAME: out = 2, pad_total = (2-1)*2 + 3 - 4 = 1, pad_left = 0:
  // output 0 reads columns 0, 1, 2 and output 1 columns 2, 3 and the padding. C = 1, M = 2:
  // filter[kw][0][m] = (1, 4), (2, 5), (3, 6); out_backprop[ow][m] = (1, 10), (100, 1000).
  const nlohmann::json p = {{"n", 1}, {"h", 1}, {"w", 4}, {"c", 1}, {"multiplier", 2}, {"kh", 1}, {"kw", 3}, {"stride_w", 2}};
  const std::vector<double> dy{1, 10, 100, 1000};
  //   dx = [1*1 + 10*4, 1*2 + 10*5, (1*3 + 10*6) + (100*1 + 1000*4), 100*2 + 1000*5]
  // (pad_left = 1 would send output 0 to columns -1, 0, 1 instead.)
  auto cc = config("depthwise_conv2d_bwd_data", p);
  expect_all_variants("depthwise_conv2d_bwd_data", cc, inputs_from(cc.problem, {{1, 4, 2, 5, 3, 6}, dy}), {41, 52, 4163, 5200});
  // input [1, 2, 3, 4]: dw[kw][0][m] = x[kw] dy[0][m] + x[2 + kw] dy[1][m] (x[4] is padding):
  //   (1 + 300, 10 + 3000), (2 + 400, 20 + 4000), (3, 30)
  cc = config("depthwise_conv2d_bwd_filter", p);
  expect_all_variants("depthwise_conv2d_bwd_filter", cc, inputs_from(cc.problem, {{1, 2, 3, 4}, dy}), {301, 3010, 402, 4020, 3, 30});
}

// The grouped reading cuDNN gets (kernels/conv/conv_cudnn_backprop.h): a depthwise convolution is
// conv2d with C input and C*M output channels whose filter is block diagonal, output channel
// o = c*M + m reading only input channel c = o / M with weight HWIM[kh][kw][c][m], which is the
// HWIM memory read as [KH, KW, 1, C*M] at index o. Both gradients, exact inputs, bit for bit.
TEST(Examples, DepthwiseIsAConvWithABlockDiagonalFilter) {
  const nlohmann::json p = {{"n", 2}, {"h", 7}, {"w", 8}, {"c", 3}, {"multiplier", 2}, {"kh", 3}, {"kw", 2}, {"stride_w", 2}};
  nlohmann::json cp = p;
  cp.erase("c");
  cp.erase("multiplier");
  cp["ci"] = 3;
  cp["co"] = 6;
  const std::int64_t taps = 3 * 2, c = 3, m = 2;
  const auto dd = config("depthwise_conv2d_bwd_data", p), cd = config("conv2d_bwd_data", cp);
  const auto din = make_inputs(*dd.op, dd.problem, 11, FillMode::exact);
  std::vector<HostTensor> cin;
  cin.emplace_back(cd.problem.inputs[0]);
  std::memset(cin[0].data(), 0, cd.problem.inputs[0].bytes());
  for (std::int64_t t = 0; t < taps; ++t)
    for (std::int64_t o = 0; o < c * m; ++o)  // HWIM [t][c][m] at t * C*M + o = [KH, KW, 1, C*M]
      cin[0].as<float>()[(t * c + o / m) * c * m + o] = din[0].as<float>()[t * c * m + o];
  cin.push_back(copy_of(din[1]));
  EXPECT_EQ(values(run_variant("depthwise_conv2d_bwd_data", "cpu.serial", dd.problem, din)),
            values(run_variant("conv2d_bwd_data", "cpu.serial", cd.problem, cin)));
  // conv2d's filter gradient [KH, KW, C, C*M] holds the depthwise one on its block diagonal.
  const auto df = config("depthwise_conv2d_bwd_filter", p), cf = config("conv2d_bwd_filter", cp);
  const auto fin = make_inputs(*df.op, df.problem, 12, FillMode::exact);
  const auto depthwise = values(run_variant("depthwise_conv2d_bwd_filter", "cpu.serial", df.problem, fin));
  const auto full = values(run_variant("conv2d_bwd_filter", "cpu.serial", cf.problem, fin));
  for (std::int64_t t = 0; t < taps; ++t)
    for (std::int64_t o = 0; o < c * m; ++o)
      EXPECT_EQ(depthwise[static_cast<std::size_t>(t * c * m + o)], full[static_cast<std::size_t>((t * c + o / m) * c * m + o)])
          << "tap " << t << " out channel " << o;
}

// Half-precision inputs from explicit values (exact in f16 here).
std::vector<HostTensor> half_inputs(const Problem& p, const std::vector<std::vector<double>>& vals) {
  std::vector<HostTensor> in;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    in.emplace_back(p.inputs[i]);
    EXPECT_EQ(p.inputs[i].dtype, DType::f16);
    for (std::size_t k = 0; k < vals.at(i).size(); ++k) in.back().as<Half>()[k] = half_from_float(static_cast<float>(vals[i][k]));
  }
  return in;
}

TEST(Examples, DepthwiseGradientsAccumulateAsTensorFlowAtHalfPrecision) {
  // bwd_data sums in T (TensorFlow's `T sum` in DepthwiseConv2dBackpropInputGPUKernelNHWC), m
  // ascending: 2048 + 1 rounds to 2048 in f16 (ulp 2 there, ties to even), and again, so
  // 2048 * 1 + 1 * 1 + 1 * 1 = 2048. Summed in float, or in another order, it would be 2050.
  const nlohmann::json data = {{"n", 1}, {"h", 1}, {"w", 1}, {"c", 1}, {"multiplier", 3}, {"kh", 1}, {"kw", 1}};
  auto cc = config("depthwise_conv2d_bwd_data", data, "f16");
  expect_all_variants("depthwise_conv2d_bwd_data", cc, half_inputs(cc.problem, {{1, 1, 1}, {2048, 1, 1}}), {2048});
  // bwd_filter: TensorFlow casts the 16-bit tensors to float and the float gradient back once:
  // the same three products over the batch sum to 2050, which f16 holds.
  const nlohmann::json filter = {{"n", 3}, {"h", 1}, {"w", 1}, {"c", 1}, {"kh", 1}, {"kw", 1}};
  cc = config("depthwise_conv2d_bwd_filter", filter, "f16");
  expect_all_variants("depthwise_conv2d_bwd_filter", cc, half_inputs(cc.problem, {{1, 1, 1}, {2048, 1, 1}}), {2050});
}

TEST(Examples, NllLossMeanDividesByTheWeightsOfTheCountedTargets) {
  // input [3, 2] = [[-1, -2], [-3, -4], [-5, -6]], targets 1, 0 and ignored (-100), class weights
  // (2, 3): the terms are -3 (-2) = 6 and -2 (-3) = 6. mean divides their sum by the weights of the
  // counted targets, 3 + 2 = 5: 12 / 5 (not by the count, 6, nor by N, 4). The same through the
  // [N, C, 1, 1] layout (nll_loss2d's kernel). With ignore_index 0, a class, the second example
  // drops out instead: (6 + 18) / (3 + 3) = 4.
  const std::vector<double> input = {-1, -2, -3, -4, -5, -6}, weight = {2, 3};
  for (const nlohmann::json& spatial : {nlohmann::json{{"h", 0}, {"w", 0}}, nlohmann::json{{"h", 1}, {"w", 1}}}) {
    nlohmann::json p = {{"n", 3}, {"classes", 2}, {"weighted", true}, {"h", spatial["h"]}, {"w", spatial["w"]}};
    auto cc = config("nll_loss", p);
    expect_all_variants("nll_loss", cc, inputs_from(cc.problem, {input, {1, 0, -100}, weight}), {12.0f / 5.0f});
    p["reduction"] = "sum";
    cc = config("nll_loss", p);
    expect_all_variants("nll_loss", cc, inputs_from(cc.problem, {input, {1, 0, -100}, weight}), {12});
    p["reduction"] = "mean";
    p["ignore_index"] = 0;
    cc = config("nll_loss", p);
    expect_all_variants("nll_loss", cc, inputs_from(cc.problem, {input, {1, 0, 1}, weight}), {4});
  }
}

TEST(Examples, NllLoss2dReadsNchwAndAddsBlockSumsInTheDtype) {
  // [1, 2, 1, 2] is NCHW: class 0 holds (-1, -2), class 1 (-3, -5); both targets are class 1, so
  // the sum is 3 + 5 = 8 (read as NHWC it would be 2 + 5 = 7).
  auto cc = config("nll_loss", {{"n", 1}, {"classes", 2}, {"h", 1}, {"w", 2}, {"reduction", "sum"}});
  expect_all_variants("nll_loss", cc, inputs_from(cc.problem, {{-1, -2, -3, -5}, {1, 1}}), {8});
  // f16, terms 2048, 1 and 1. The [N, C] kernel sums in float: 2050, exact in f16. nll_loss2d
  // rounds each block's sum to f16 and adds the blocks in f16: 2048 + 1 ties to the even 2048,
  // twice. Its atomic adds may also take the two 1s first (2 + 2048 = 2050): that is the race.
  cc = config("nll_loss", {{"n", 3}, {"classes", 1}, {"reduction", "sum"}}, "f16");
  expect_all_variants("nll_loss", cc, inputs_from(cc.problem, {{-2048, -1, -1}, {0, 0, 0}}), {2050});
  cc = config("nll_loss", {{"n", 3}, {"classes", 1}, {"h", 1}, {"w", 1}, {"reduction", "sum"}}, "f16");
  const auto in = inputs_from(cc.problem, {{-2048, -1, -1}, {0, 0, 0}});
  for (const char* v : {"cpu.serial", "cpu.ordered"}) EXPECT_EQ(values(run_variant("nll_loss", v, cc.problem, in)), std::vector<double>{2048}) << v;
  const double atomic = values(run_variant("nll_loss", "cpu.atomic", cc.problem, in))[0];
  EXPECT_TRUE(atomic == 2048 || atomic == 2050) << atomic;
}

TEST(Examples, NllLossOfOnlyIgnoredTargetsIsNaNForMeanAndZeroForSum) {
  // PyTorch's 0 / 0: mean over no counted target is NaN in both kernels; sum is 0.
  for (const nlohmann::json& spatial : {nlohmann::json{{"h", 0}, {"w", 0}}, nlohmann::json{{"h", 2}, {"w", 1}}}) {
    nlohmann::json p = {{"n", 2}, {"classes", 3}, {"h", spatial["h"]}, {"w", spatial["w"]}, {"ignore_index", 1}};
    auto cc = config("nll_loss", p);
    const std::int64_t positions = 2 * (spatial["h"] == 0 ? 1 : 2);
    const auto in = inputs_from(cc.problem, {std::vector<double>(static_cast<std::size_t>(3 * positions), -1.0),
                                             std::vector<double>(static_cast<std::size_t>(positions), 1.0)});
    for (const auto* v : Registry::global().variants_of("nll_loss")) {
      if (v->backend == Backend::cpu) {
        EXPECT_TRUE(std::isnan(values(run_variant("nll_loss", v->name, cc.problem, in))[0])) << v->name;
      }
    }
    p["reduction"] = "sum";
    cc = config("nll_loss", p);
    expect_all_variants("nll_loss", cc, in, {0});
  }
}

// Every CPU variant's loss within `ulps` units of the float nearest `want`.
void expect_loss_near(const std::string& op, const CatalogConfig& cc, const std::vector<HostTensor>& in, long double want, double ulps) {
  const auto f = static_cast<float>(want);
  const double ulp = std::nextafter(f, std::numeric_limits<float>::infinity()) - f;
  for (const auto* v : Registry::global().variants_of(op)) {
    if (v->backend == Backend::cpu) {
      EXPECT_NEAR(values(run_variant(op, v->name, cc.problem, in))[0], static_cast<double>(want), ulps * ulp) << op << "/" << v->name;
    }
  }
}

TEST(Examples, SoftmaxCrossEntropyIsNllOfLogSoftmaxOverTheClassAxis) {
  // Logits [[1, 2, 3], [0, 0, 0]], targets 2 and 1, class weights (1, 1, 3): the terms are
  // 3 (ln(e + e^2 + e^3) - 3) and ln 3, and the weighted mean divides by 3 + 1.
  auto cc = config("softmax_cross_entropy", {{"n", 2}, {"classes", 3}, {"weighted", true}});
  const long double l0 = std::log(std::exp(1.0L) + std::exp(2.0L) + std::exp(3.0L)) - 3, l1 = std::log(3.0L);
  expect_loss_near("softmax_cross_entropy", cc, inputs_from(cc.problem, {{1, 2, 3, 0, 0, 0}, {2, 1}, {1, 1, 3}}), (3 * l0 + l1) / 4, 4);
  // [1, 2, 1, 2], NCHW: position 0 has logits (0, 0), position 1 (5, -1000); both targets class
  // 0: ln 2 + ~0 (read as NHWC, (0, 5) and (0, -1000): 5 + ln(1 + e^-5)).
  cc = config("softmax_cross_entropy", {{"n", 1}, {"classes", 2}, {"h", 1}, {"w", 2}, {"reduction", "sum"}});
  expect_loss_near("softmax_cross_entropy", cc, inputs_from(cc.problem, {{0, 5, 0, -1000}, {0, 0}}), std::log(2.0L), 2);
}

TEST(Examples, EmbeddingBagSumMeanPaddingAndPerSampleWeights) {
  // Table of 4 rows, D = 1; bags {2, 0} and {2, 3} with gradients 10 and 100.
  const nlohmann::json base = {{"num_embeddings", 4}, {"dim", 1}, {"indices", 4}, {"bags", 2}};
  auto cc = config("embedding_bag_bwd", base);
  expect_all_variants("embedding_bag_bwd", cc, inputs_from(cc.problem, {{2, 0, 2, 3}, {0, 2}, {10, 100}}), {10, 0, 110, 100});
  // mean with padding_idx 3: the second bag counts one entry (row 3 is padding), so row 2 gets
  // 10/2 + 100/1 = 105 (not 55), and row 3 stays 0.
  nlohmann::json p = base;
  p["mode"] = "mean";
  p["padding_idx"] = 3;
  cc = config("embedding_bag_bwd", p);
  expect_all_variants("embedding_bag_bwd", cc, inputs_from(cc.problem, {{2, 0, 2, 3}, {0, 2}, {10, 100}}), {5, 0, 105, 0});
  // per_sample_weights (1, 2, 3, 4) scale each entry: row 2 gets 10 + 300.
  p = base;
  p["per_sample_weights"] = true;
  cc = config("embedding_bag_bwd", p);
  expect_all_variants("embedding_bag_bwd", cc, inputs_from(cc.problem, {{2, 0, 2, 3}, {0, 2}, {10, 100}, {1, 2, 3, 4}}),
                      {20, 0, 310, 400});
  // An empty bag in the middle (offsets 0, 2, 2): its gradient goes nowhere; mean divides by 2.
  p = base;
  p["bags"] = 3;
  p["mode"] = "mean";
  cc = config("embedding_bag_bwd", p);
  expect_all_variants("embedding_bag_bwd", cc, inputs_from(cc.problem, {{2, 0, 2, 3}, {0, 2, 2}, {10, 7, 100}}), {5, 0, 55, 50});
}

// The fills of the models profile's word-embedding gradients (fill.h zipf_integers, bag_size):
// nn.Embedding's backward is bags of one index, and token ids pile onto a few frequent rows (with
// uniform ids over 30522 rows, 4096 tokens put at most a handful on any row, and a row of two adds
// the same bits in either order: an atomic variant could not show a race there).
TEST(Inputs, ZipfIdsAndBagsOfOneAreWhatTheConfigSays) {
  const nlohmann::json bert = {{"num_embeddings", 30522}, {"dim", 2}, {"indices", 4096}, {"bags", 4096}, {"bag_size", 1}, {"ids", "zipf"}};
  const auto cc = config("embedding_bag_bwd", bert);
  const auto in = make_inputs(*cc.op, cc.problem, cc.seed);
  const auto* ids = static_cast<const std::int32_t*>(in[0].data());
  const auto* offsets = static_cast<const std::int32_t*>(in[1].data());
  std::vector<int> count(30522);
  for (int i = 0; i < 4096; ++i) {
    EXPECT_EQ(offsets[i], i);
    ASSERT_GE(ids[i], 0);
    ASSERT_LT(ids[i], 30522);
    ++count[ids[i]];
  }
  // Row 0 takes 1 / H_30522 = 9.2% of the draws (about 376), row 1 half that.
  EXPECT_GT(count[0], 300);
  EXPECT_LT(count[0], 450);
  EXPECT_GT(count[1], 140);
  EXPECT_LT(count[1], 240);
  nlohmann::json uniform = bert;
  uniform.erase("ids");
  const auto uc = config("embedding_bag_bwd", uniform);
  const auto uin = make_inputs(*uc.op, uc.problem, uc.seed);
  std::vector<int> ucount(30522);
  for (int i = 0; i < 4096; ++i) ++ucount[static_cast<const std::int32_t*>(uin[0].data())[i]];
  EXPECT_LE(*std::max_element(ucount.begin(), ucount.end()), 6);
  // TensorFlow's form: zipf ids drop no row (uniform ids reach -1).
  const auto sc = config("unsorted_segment_sum", {{"rows", 4096}, {"depth", 1}, {"num_segments", 30522}, {"ids", "zipf"}});
  const auto sin = make_inputs(*sc.op, sc.problem, sc.seed);
  const auto* segment_ids = static_cast<const std::int32_t*>(sin[1].data());
  EXPECT_EQ(std::count(segment_ids, segment_ids + 4096, 0) > 300, true);
  EXPECT_EQ(std::count_if(segment_ids, segment_ids + 4096, [](std::int32_t s) { return s < 0 || s >= 30522; }), 0);
  // The parameters are new: a config that leaves them at their defaults keeps its id.
  EXPECT_EQ(config("unsorted_segment_sum", {{"rows", 8}, {"depth", 1}, {"num_segments", 4}, {"ids", "uniform"}}).config_id,
            config("unsorted_segment_sum", {{"rows", 8}, {"depth", 1}, {"num_segments", 4}}).config_id);
  EXPECT_EQ(config("embedding_bag_bwd", {{"num_embeddings", 4}, {"dim", 1}, {"indices", 4}, {"bags", 2}, {"bag_size", 0}}).config_id,
            config("embedding_bag_bwd", {{"num_embeddings", 4}, {"dim", 1}, {"indices", 4}, {"bags", 2}}).config_id);
  // A bag size that does not divide the indices into the bags is refused, naming the parameter.
  try {
    config("embedding_bag_bwd", {{"num_embeddings", 4}, {"dim", 1}, {"indices", 10}, {"bags", 4}, {"bag_size", 2}});
    ADD_FAILURE() << "bag_size 2 with 4 bags and 10 indices was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("bag_size"), std::string::npos) << e.what();
  }
}

TEST(Examples, EmbeddingBagMaxGoesToTheFirstMaximum) {
  // The forward's argmax (embedding.h bag_argmax): rows (1, 5), (1, 7), (0, 7) in one bag. Feature 0
  // ties rows 0 and 1: the first, 0; feature 1 ties rows 1 and 2: 1, or 2 with row 1 as padding. A
  // bag of padding only has none (-1).
  const std::vector<float> weight = {1, 5, 1, 7, 0, 7};
  const auto value = [&](std::int32_t row, std::int64_t f) { return weight[static_cast<std::size_t>(row * 2 + f)]; };
  embedding::Geometry g{.num_embeddings = 3, .dim = 2, .indices = 3, .bags = 1, .mode = embedding::Mode::max};
  const std::int32_t rows[] = {0, 1, 2}, offsets[] = {0};
  EXPECT_EQ(embedding::bag_argmax(g, rows, offsets, 0, 0, value), 0);
  EXPECT_EQ(embedding::bag_argmax(g, rows, offsets, 0, 1, value), 1);
  g.padding_idx = 1;
  EXPECT_EQ(embedding::bag_argmax(g, rows, offsets, 0, 1, value), 2);
  const std::int32_t padding_only[] = {1, 1};
  g.indices = 2;
  EXPECT_EQ(embedding::bag_argmax(g, padding_only, offsets, 0, 0, value), -1);
  // The backward: max_indices (0, 1) and (0, -1), gradients (1, 2) and (10, 20): row 0 feature 0
  // collects 1 + 10, row 1 feature 1 gets 2, and -1 nothing. Row 1 as padding gets nothing.
  nlohmann::json p = {{"num_embeddings", 3}, {"dim", 2}, {"indices", 3}, {"bags", 2}, {"mode", "max"}};
  auto cc = config("embedding_bag_bwd", p);
  const std::vector<std::vector<double>> in = {{0, 1, 2}, {0, 2}, {1, 5, 1, 7, 0, 7}, {0, 1, 0, -1}, {1, 2, 10, 20}};
  expect_all_variants("embedding_bag_bwd", cc, inputs_from(cc.problem, in), {11, 0, 0, 2, 0, 0});
  p["padding_idx"] = 1;
  cc = config("embedding_bag_bwd", p);
  expect_all_variants("embedding_bag_bwd", cc, inputs_from(cc.problem, in), {11, 0, 0, 0, 0, 0});
  // The fill computes max_indices from the weight as the dtype holds it: in exact mode the weight
  // is small integers, full of ties; every entry must be the first maximum of its bag.
  cc = config("embedding_bag_bwd", {{"num_embeddings", 8}, {"dim", 4}, {"indices", 512}, {"bags", 64}, {"mode", "max"}, {"padding_idx", 2}});
  const auto filled = make_inputs(*cc.op, cc.problem, 3, FillMode::exact);
  const auto* idx = filled[0].as<std::int32_t>();
  const auto* off = filled[1].as<std::int32_t>();
  const auto* w = filled[2].as<float>();
  const auto* max_indices = filled[3].as<std::int32_t>();
  int ties = 0;
  for (std::int64_t b = 0; b < 64; ++b)
    for (std::int64_t f = 0; f < 4; ++f) {
      const std::int64_t begin = off[b], end = b + 1 < 64 ? off[b + 1] : 512;
      std::int32_t want = -1;
      for (std::int64_t i = begin; i < end; ++i)  // the largest value, then its first occurrence
        if (idx[i] != 2 && (want < 0 || w[idx[i] * 4 + f] > w[want * 4 + f])) want = idx[i];
      int equal = 0;
      for (std::int64_t i = begin; i < end; ++i) equal += idx[i] != 2 && idx[i] != want && want >= 0 && w[idx[i] * 4 + f] == w[want * 4 + f];
      ties += equal > 0;
      EXPECT_EQ(max_indices[b * 4 + f], want) << "bag " << b << " feature " << f;
    }
  EXPECT_GT(ties, 16) << "the exact weights should tie often";
}

TEST(Examples, EmbeddingBagAddsEachRowInPartialsOfTen) {
  // 20 one-entry bags on row 0, gradients 2^24, nine 0s, ten 1s. PyTorch sums partials of 10
  // entries, 2^24 and 10, then adds them: 2^24 + 10. One add at a time, each 1 would tie to the
  // even 2^24 and vanish. (cpu.atomic adds in any order.)
  auto cc = config("embedding_bag_bwd", {{"num_embeddings", 1}, {"dim", 1}, {"indices", 20}, {"bags", 20}});
  std::vector<double> offsets(20), grads(20, 0.0);
  for (int b = 0; b < 20; ++b) offsets[static_cast<std::size_t>(b)] = b;
  grads[0] = 16777216;
  for (int b = 10; b < 20; ++b) grads[static_cast<std::size_t>(b)] = 1;
  const auto in = inputs_from(cc.problem, {std::vector<double>(20, 0.0), offsets, grads});
  for (const char* v : {"cpu.serial", "cpu.ordered"})
    EXPECT_EQ(values(run_variant("embedding_bag_bwd", v, cc.problem, in)), std::vector<double>{16777226}) << v;
}

TEST(Examples, CtcLossGradient) {
  // Two sequences, T = 3, C = 3 (blank 0), log_probs = log y, grad[t, n, c] = (y - gamma) grad_out
  // (PyTorch's backward: the gradient in the logits of log_softmax), 0 for t >= input_length.
  //
  // n = 0: target "1 1", 3 steps, grad_out 1. y_0 = (1/4, 1/2, 1/4), y_1 = (1/2, 1/4, 1/4),
  //   y_2 = y_0. A repeated label needs a blank between, so the one alignment is (1, 0, 1):
  //   p = 1/2 * 1/2 * 1/2 = 1/8 and gamma is one-hot on it; grad = y - onehot:
  //   t0 (1/4, -1/2, 1/4), t1 (-1/2, 1/4, 1/4), t2 (1/4, -1/2, 1/4). Were the blank skippable
  //   between equal labels, (1, 1, 1) would add 1/2 * 1/4 * 1/2 = 1/16 and move every gamma. Both
  //   label positions are class 1: grad[t, 0, 1] collects two terms, one of them 0 at each step.
  // n = 1: target "2" (padded with 0), 2 steps of 3, grad_out 1/2. y_0 = (1/2, 1/4, 1/4),
  //   y_1 = (1/4, 1/4, 1/2), y_2 = y_1 (past the input: its gradient is 0). Alignments (2, 2),
  //   (0, 2), (2, 0): 1/8 + 1/4 + 1/16 = 7/16. gamma_0 = (4/7, 0, 3/7), gamma_1 = (1/7, 0, 6/7):
  //   grad t0 = 1/2 (1/2 - 4/7, 1/4, 1/4 - 3/7) = (-1/28, 1/8, -5/56),
  //   grad t1 = 1/2 (1/4 - 1/7, 1/4, 1/2 - 6/7) = (3/56, 1/8, -5/28), t2 = 0.
  const auto cc = config("ctc_loss_bwd", {{"time", 3}, {"batch", 2}, {"classes", 3}, {"target_length", 2}});
  const std::vector<std::vector<double>> y = {{0.25, 0.5, 0.25}, {0.5, 0.25, 0.25},   // t0: n0, n1
                                              {0.5, 0.25, 0.25}, {0.25, 0.25, 0.5},   // t1
                                              {0.25, 0.5, 0.25}, {0.25, 0.25, 0.5}};  // t2
  std::vector<double> log_probs;
  for (const auto& row : y)
    for (double v : row) log_probs.push_back(std::log(v));
  const auto in = inputs_from(cc.problem, {log_probs, {1, 1, 2, 0}, {3, 2}, {2, 1}, {1, 0.5}});
  const std::vector<double> want = {0.25, -0.5, 0.25,  -1.0 / 28, 1.0 / 8, -5.0 / 56,   // t0
                                    -0.5, 0.25, 0.25,  3.0 / 56, 1.0 / 8, -5.0 / 28,    // t1
                                    0.25, -0.5, 0.25,  0, 0, 0};                        // t2
  for (const auto* v : Registry::global().variants_of("ctc_loss_bwd")) {
    if (v->backend != Backend::cpu) continue;
    const auto got = values(run_variant("ctc_loss_bwd", v->name, cc.problem, in));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << v->name << " at " << i;
    for (std::size_t i = 15; i < 18; ++i) EXPECT_EQ(got[i], 0.0) << v->name << ": past the input, exactly 0";
  }
}

TEST(Examples, SparseTensorDenseMatMulAdjoints) {
  // TF's SparseTensor A = [[1, 0, 2], [0, 3, 4]] (COO), the four adjoint settings.
  const std::vector<double> rows{0, 0, 1, 1}, cols{0, 2, 1, 2}, vals{1, 2, 3, 4};
  auto run = [&](bool adjoint_a, bool adjoint_b, const std::vector<double>& b, const std::vector<float>& want) {
    const auto cc = config("sparse_dense_matmul", {{"rows", 2}, {"cols", 3}, {"nnz_per_row", 2}, {"n", 2},
                                                   {"adjoint_a", adjoint_a}, {"adjoint_b", adjoint_b}});
    SCOPED_TRACE(std::string("adjoint_a ") + (adjoint_a ? "1" : "0") + " adjoint_b " + (adjoint_b ? "1" : "0"));
    expect_all_variants("sparse_dense_matmul", cc, inputs_from(cc.problem, {rows, cols, vals, b}), want);
  };
  // b = [[1, 2], [10, 20], [100, 200]]: A b = [[201, 402], [430, 860]].
  run(false, false, {1, 2, 10, 20, 100, 200}, {201, 402, 430, 860});
  // b stored [2, 3] = [[1, 10, 100], [2, 20, 200]], read as b^T: the same product.
  run(false, true, {1, 10, 100, 2, 20, 200}, {201, 402, 430, 860});
  // A^T [[1, 2], [10, 20]] = [[1, 2], [30, 60], [42, 84]].
  run(true, false, {1, 2, 10, 20}, {1, 2, 30, 60, 42, 84});
  // b stored [2, 2] = [[1, 10], [2, 20]], read as b^T = [[1, 2], [10, 20]]: the same again.
  run(true, true, {1, 10, 2, 20}, {1, 2, 30, 60, 42, 84});
}

// The generated matrix: heavy rows where the header says, distinct ascending columns in range,
// and the same matrix in both formats.
TEST(Examples, SparseStructure) {
  const nlohmann::json params = {{"rows", 10}, {"cols", 7}, {"nnz_per_row", 3}, {"heavy_rows", 3}};
  nlohmann::json coo_params = params;
  coo_params["format"] = "coo";
  const auto csr = config("spmv", params), coo = config("spmv", coo_params);
  ASSERT_EQ(csr.problem.inputs[0].numel(), 11);
  ASSERT_EQ(csr.problem.inputs[1].numel(), 3 * 7 + 7 * 3);  // rows 0, 3 and 6 are heavy: every column
  const auto a = make_inputs(*csr.op, csr.problem, 4), b = make_inputs(*coo.op, coo.problem, 4);
  const auto* offsets = a[0].as<std::int32_t>();
  const auto* cols = a[1].as<std::int32_t>();
  const auto* coo_rows = b[0].as<std::int32_t>();
  EXPECT_EQ(offsets[0], 0);
  for (std::int64_t r = 0; r < 10; ++r) {
    EXPECT_EQ(offsets[r + 1] - offsets[r], r == 0 || r == 3 || r == 6 ? 7 : 3) << "row " << r;
    for (std::int32_t k = offsets[r]; k < offsets[r + 1]; ++k) {
      EXPECT_EQ(coo_rows[k], r) << k;
      EXPECT_GE(cols[k], 0);
      EXPECT_LT(cols[k], 7);
      if (k > offsets[r]) {
        EXPECT_LT(cols[k - 1], cols[k]) << "row " << r;
      }
    }
  }
  for (std::size_t i = 1; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].desc().bytes()), 0) << a[i].desc().name;
  // Both formats of the default catalogue's pairs give the same bits.
  const Catalog cat = default_catalog(Registry::global());
  int pairs = 0;
  for (const auto& x : cat.configs)
    for (const auto& y : cat.configs) {
      if (x.op != y.op || x.op->family != "sparse" || x.dtype != y.dtype || x.seed != y.seed) continue;
      if (x.problem.geom<sparse::Geometry>().format != sparse::Format::csr || y.problem.geom<sparse::Geometry>().format != sparse::Format::coo) continue;
      nlohmann::json xp = x.params_json, yp = y.params_json;
      xp.erase("format");
      yp.erase("format");
      if (xp != yp) continue;
      EXPECT_EQ(test::digest(run_variant(x.op->name, "cpu.serial", x.problem, make_inputs(*x.op, x.problem, x.seed))),
                test::digest(run_variant(y.op->name, "cpu.serial", y.problem, make_inputs(*y.op, y.problem, y.seed))))
          << x.name << " and " << y.name;
      ++pairs;
    }
  EXPECT_GE(pairs, 4);
}

TEST(Examples, ReduceFamily) {
  auto cc = config("reduce_sum", {{"n", 4}});
  expect_all_variants("reduce_sum", cc, inputs_from(cc.problem, {{1, 2, 3, 4}}), {10});
  cc = config("cumsum", {{"n", 5}});
  expect_all_variants("cumsum", cc, inputs_from(cc.problem, {{1, 2, 3, 4, -10}}), {1, 3, 6, 10, 0});
  // Segments [0, 2), [2, 2) (empty: +0), [2, 5).
  cc = config("segmented_reduce", {{"n", 5}, {"segments", 3}});
  expect_all_variants("segmented_reduce", cc, inputs_from(cc.problem, {{1, 2, 3, 4, 5}, {0, 2, 2, 5}}), {3, 0, 12});
}

TEST(Examples, ReduceFamilyOrdersItsAdds) {
  // 1 is absorbed by 1e8 in f32 (its unit in the last place is 8). The reference adds in index
  // order, ((1e8 + 1) - 1e8) + 1 = 1; the family's tree puts element i in lane i and halves the
  // lanes pairwise, (1e8 - 1e8) + (1 + 1) = 2.
  const auto cc = config("reduce_sum", {{"n", 4}});
  const auto in = inputs_from(cc.problem, {{1e8, 1, -1e8, 1}});
  EXPECT_EQ(values(run_variant("reduce_sum", "cpu.serial", cc.problem, in)), std::vector<double>{1});
  EXPECT_EQ(values(run_variant("reduce_sum", "cpu.ordered", cc.problem, in)), std::vector<double>{2});
  // A scan lane owns 16 consecutive elements and runs from +0, and its prefix (lane 0's total) is
  // added to its running sum: out[17] = 1e8 + (3 + 3), which rounds to 1e8 + 8; the reference
  // adds one element at a time, (1e8 + 3) + 3 = 1e8.
  const auto scan = config("cumsum", {{"n", 18}});
  std::vector<double> x(18, 0.0);
  x[0] = 1e8, x[16] = 3, x[17] = 3;
  const auto scan_in = inputs_from(scan.problem, {x});
  EXPECT_EQ(values(run_variant("cumsum", "cpu.serial", scan.problem, scan_in)).back(), 1e8);
  EXPECT_EQ(values(run_variant("cumsum", "cpu.ordered", scan.problem, scan_in)).back(), 1e8 + 8);
}

// ---- adjoint identities ------------------------------------------------------------------

double dot(const HostTensor& a, const HostTensor& b) {
  double s = 0;
  for (std::int64_t i = 0; i < a.desc().numel(); ++i) s += static_cast<double>(a.as<float>()[i]) * b.as<float>()[i];
  return s;
}

HostTensor random_tensor(const TensorDesc& d, std::uint64_t seed) {
  HostTensor t(d);
  const CounterRng rng(seed, 99);
  for (std::int64_t i = 0; i < d.numel(); ++i) t.as<float>()[i] = rng.unit_symmetric(static_cast<std::uint64_t>(i));
  return t;
}

void expect_close(double a, double b, const std::string& what) {
  EXPECT_NEAR(a, b, 1e-4 * (1 + std::fabs(a))) << what;
}

TEST(Adjoint, ResizeGradsAreTheTransposeOfTheForwardOps) {
  for (const char* kind : {"bilinear", "nearest"}) {
    for (const auto& params : {nlohmann::json{{"n", 2}, {"h", 5}, {"w", 7}, {"c", 3}, {"out_h", 17}, {"out_w", 9}},
                               nlohmann::json{{"n", 1}, {"h", 9}, {"w", 6}, {"c", 2}, {"out_h", 4}, {"out_w", 13}, {"align_corners", true}, {"half_pixel_centers", false}},
                               nlohmann::json{{"n", 1}, {"h", 6}, {"w", 6}, {"c", 2}, {"out_h", 11}, {"out_w", 3}, {"half_pixel_centers", false}}}) {
      const std::string fwd_op = std::string("resize_") + kind, grad_op = fwd_op + "_grad";
      const auto fwd = config(fwd_op, params), grad = config(grad_op, params);
      std::vector<HostTensor> x;
      x.push_back(random_tensor(fwd.problem.inputs[0], 1));
      std::vector<HostTensor> g;
      g.push_back(random_tensor(grad.problem.inputs[0], 2));
      if (grad.problem.inputs.size() > 1) g.push_back(random_tensor(grad.problem.inputs[1], 3));
      expect_close(dot(run_variant(fwd_op, "cpu.serial", fwd.problem, x), g[0]),
                   dot(x[0], run_variant(grad_op, "cpu.serial", grad.problem, g)), grad_op + " " + params.dump());
    }
  }
}

TEST(Adjoint, CropAndResizeGradImageIsTheTransposeOfCropAndResize) {
  for (const char* method : {"bilinear", "nearest"}) {
    const nlohmann::json params = {{"batch", 2}, {"h", 11}, {"w", 8}, {"c", 3}, {"boxes", 9}, {"crop_h", 6}, {"crop_w", 5}, {"method", method}};
    const auto fwd = config("crop_and_resize", params), grad = config("crop_and_resize_grad_image", params);
    auto fin = make_inputs(*fwd.op, fwd.problem, 5);  // image, boxes (with extrapolation), box_ind
    std::vector<HostTensor> gin;
    gin.push_back(random_tensor(grad.problem.inputs[0], 6));
    gin.push_back(std::move(fin[1]));
    gin.push_back(std::move(fin[2]));
    std::vector<HostTensor> f2;
    f2.push_back(std::move(fin[0]));
    f2.emplace_back(gin[1].desc());
    std::memcpy(f2.back().data(), gin[1].data(), gin[1].desc().bytes());
    f2.emplace_back(gin[2].desc());
    std::memcpy(f2.back().data(), gin[2].data(), gin[2].desc().bytes());
    expect_close(dot(run_variant("crop_and_resize", "cpu.serial", fwd.problem, f2), gin[0]),
                 dot(f2[0], run_variant("crop_and_resize_grad_image", "cpu.serial", grad.problem, gin)), method);
  }
}

TEST(Adjoint, SparseTransposeIsTheAdjoint) {
  // <A x, z> == <x, A^T z> for both formats and both ops, the transposed config reading the
  // same matrix (same seed, same structure).
  for (const char* op : {"spmv", "spmm"})
    for (const char* format : {"csr", "coo"}) {
      nlohmann::json params = {{"rows", 37}, {"cols", 23}, {"nnz_per_row", 5}, {"heavy_rows", 2}, {"format", format}};
      if (std::string(op) == "spmm") params["n"] = 3;
      nlohmann::json tparams = params;
      tparams["transpose"] = true;
      const auto fwd = config(op, params), adj = config(op, tparams);
      auto fin = make_inputs(*fwd.op, fwd.problem, 8);
      auto ain = make_inputs(*adj.op, adj.problem, 8);
      ain[3] = random_tensor(adj.problem.inputs[3], 9);
      const HostTensor z = random_tensor(fwd.problem.output, 9);
      ASSERT_EQ(ain[3].desc().bytes(), z.desc().bytes());
      expect_close(dot(run_variant(op, "cpu.serial", fwd.problem, fin), z),
                   dot(fin[3], run_variant(op, "cpu.serial", adj.problem, ain)), std::string(op) + " " + format);
    }
}

// A naive forward convolution, written independently of the kernels, for the adjoint test.
std::vector<double> conv_forward(const nlohmann::json& p, const HostTensor& x, const HostTensor& w, std::int64_t oh, std::int64_t ow,
                                 std::int64_t pad_t, std::int64_t pad_l) {
  const std::int64_t n = p["n"], h = p["h"], wd = p["w"], ci = p["ci"], co = p["co"], kh = p["kh"], kw = p["kw"];
  const std::int64_t sh = p.value("stride_h", 1), sw = p.value("stride_w", 1), dh = p.value("dilation_h", 1), dw = p.value("dilation_w", 1);
  std::vector<double> y(static_cast<std::size_t>(n * oh * ow * co), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j)
        for (std::int64_t o = 0; o < co; ++o)
          for (std::int64_t a = 0; a < kh; ++a)
            for (std::int64_t c = 0; c < kw; ++c)
              for (std::int64_t k = 0; k < ci; ++k) {
                const std::int64_t r = i * sh - pad_t + a * dh, s = j * sw - pad_l + c * dw;
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                y[static_cast<std::size_t>(((b * oh + i) * ow + j) * co + o)] +=
                    static_cast<double>(x.as<float>()[((b * h + r) * wd + s) * ci + k]) * w.as<float>()[((a * kw + c) * ci + k) * co + o];
              }
  return y;
}

// A naive forward op of the conv kind, in double: config, input, filter, output extents, padding.
using NaiveForward = std::vector<double> (*)(const nlohmann::json&, const HostTensor&, const HostTensor&, std::int64_t oh,
                                             std::int64_t ow, std::int64_t pad_top, std::int64_t pad_left);

// The adjoint identity's pieces for a conv-like op's two gradients: random x, w and dy shaped by
// the gradients' problems (bwd_data takes (filter, out_backprop), bwd_filter (input,
// out_backprop)), y = forward(x, w) with TensorFlow's padding re-derived here rather than taken
// from the kernels, and <y, dy>, which <x, bwd_data(w, dy)> and <w, bwd_filter(x, dy)> must equal.
struct ConvAdjoint {
  HostTensor x, w, dy;
  std::vector<double> y;
  double y_dot_dy = 0;
  std::vector<HostTensor> data_inputs, filter_inputs;
};

ConvAdjoint conv_adjoint(const nlohmann::json& p, const Problem& bwd_data, const Problem& bwd_filter, NaiveForward forward) {
  const TensorDesc& dy_desc = bwd_data.inputs[1];
  const std::int64_t oh = dy_desc.shape[1], ow = dy_desc.shape[2];
  auto pad = [&](std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t d) {
    if (p.value("padding", "SAME") == "VALID") return std::int64_t{0};
    return std::max<std::int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0) / 2;
  };
  const std::int64_t pt = pad(p["h"], oh, p["kh"], p.value("stride_h", 1), p.value("dilation_h", 1));
  const std::int64_t pl = pad(p["w"], ow, p["kw"], p.value("stride_w", 1), p.value("dilation_w", 1));
  ConvAdjoint a{random_tensor(bwd_filter.inputs[0], 1), random_tensor(bwd_data.inputs[0], 2), random_tensor(dy_desc, 3), {}, 0, {}, {}};
  a.y = forward(p, a.x, a.w, oh, ow, pt, pl);
  for (std::size_t i = 0; i < a.y.size(); ++i) a.y_dot_dy += a.y[i] * a.dy.as<float>()[i];
  a.data_inputs.push_back(copy_of(a.w));
  a.data_inputs.push_back(copy_of(a.dy));
  a.filter_inputs.push_back(copy_of(a.x));
  a.filter_inputs.push_back(copy_of(a.dy));
  return a;
}

TEST(Adjoint, ConvBackpropsAreTheTransposesOfTheForwardConvWhichConv2dComputes) {
  for (const auto& p : {nlohmann::json{{"n", 2}, {"h", 7}, {"w", 6}, {"ci", 3}, {"co", 4}, {"kh", 3}, {"kw", 2}},
                        nlohmann::json{{"n", 1}, {"h", 9}, {"w", 8}, {"ci", 2}, {"co", 3}, {"kh", 3}, {"kw", 3}, {"stride_h", 2}, {"stride_w", 3}, {"padding", "VALID"}},
                        nlohmann::json{{"n", 1}, {"h", 8}, {"w", 9}, {"ci", 2}, {"co", 2}, {"kh", 2}, {"kw", 3}, {"stride_h", 3}, {"dilation_w", 2}}}) {
    const auto bd = config("conv2d_bwd_data", p), bf = config("conv2d_bwd_filter", p);
    const ConvAdjoint a = conv_adjoint(p, bd.problem, bf.problem, conv_forward);
    expect_close(a.y_dot_dy, dot(a.x, run_variant("conv2d_bwd_data", "cpu.serial", bd.problem, a.data_inputs)), "bwd_data " + p.dump());
    // conv2d itself is the naive forward conv, element by element.
    const auto fwd = config("conv2d", p);
    std::vector<HostTensor> xw;
    xw.push_back(copy_of(a.x));
    xw.push_back(copy_of(a.w));
    const auto conv2d = values(run_variant("conv2d", "cpu.serial", fwd.problem, xw));
    ASSERT_EQ(conv2d.size(), a.y.size()) << p.dump();
    for (std::size_t i = 0; i < a.y.size(); ++i) EXPECT_NEAR(conv2d[i], a.y[i], 1e-5 * (1 + std::fabs(a.y[i]))) << "conv2d " << p.dump() << " at " << i;
    expect_close(a.y_dot_dy, dot(a.w, run_variant("conv2d_bwd_filter", "cpu.serial", bf.problem, a.filter_inputs)), "bwd_filter " + p.dump());
  }
}

// A naive depthwise forward convolution in double, written from TensorFlow's definition
// (out channel c*M + m = input channel c times filter column m), for the adjoint test.
std::vector<double> depthwise_forward(const nlohmann::json& p, const HostTensor& x, const HostTensor& w, std::int64_t oh,
                                      std::int64_t ow, std::int64_t pad_t, std::int64_t pad_l) {
  const std::int64_t n = p["n"], h = p["h"], wd = p["w"], c = p["c"], m = p.value("multiplier", 1), kh = p["kh"], kw = p["kw"];
  const std::int64_t sh = p.value("stride_h", 1), sw = p.value("stride_w", 1), dh = p.value("dilation_h", 1), dw = p.value("dilation_w", 1);
  std::vector<double> y(static_cast<std::size_t>(n * oh * ow * c * m), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j)
        for (std::int64_t ch = 0; ch < c; ++ch)
          for (std::int64_t q = 0; q < m; ++q)
            for (std::int64_t a = 0; a < kh; ++a)
              for (std::int64_t e = 0; e < kw; ++e) {
                const std::int64_t r = i * sh - pad_t + a * dh, s = j * sw - pad_l + e * dw;
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                y[static_cast<std::size_t>(((b * oh + i) * ow + j) * c * m + ch * m + q)] +=
                    static_cast<double>(x.as<float>()[((b * h + r) * wd + s) * c + ch]) * w.as<float>()[((a * kw + e) * c + ch) * m + q];
              }
  return y;
}

TEST(Adjoint, DepthwiseBackpropsAreTheTransposesOfTheDepthwiseConv) {
  for (const auto& p : {nlohmann::json{{"n", 2}, {"h", 7}, {"w", 6}, {"c", 3}, {"kh", 3}, {"kw", 2}},
                        nlohmann::json{{"n", 1}, {"h", 9}, {"w", 8}, {"c", 2}, {"multiplier", 3}, {"kh", 3}, {"kw", 3}, {"stride_h", 2}, {"stride_w", 3}, {"padding", "VALID"}},
                        nlohmann::json{{"n", 2}, {"h", 8}, {"w", 10}, {"c", 3}, {"multiplier", 2}, {"kh", 3}, {"kw", 3}, {"stride_h", 2}, {"stride_w", 2}},
                        nlohmann::json{{"n", 1}, {"h", 8}, {"w", 9}, {"c", 2}, {"multiplier", 4}, {"kh", 2}, {"kw", 3}, {"stride_h", 3}, {"dilation_w", 2}}}) {
    const auto bd = config("depthwise_conv2d_bwd_data", p), bf = config("depthwise_conv2d_bwd_filter", p);
    ASSERT_EQ(bd.problem.inputs[1].shape[3], p["c"].get<std::int64_t>() * p.value("multiplier", 1));
    const ConvAdjoint a = conv_adjoint(p, bd.problem, bf.problem, depthwise_forward);
    for (const auto* v : Registry::global().variants_of("depthwise_conv2d_bwd_data"))
      if (v->backend == Backend::cpu)
        expect_close(a.y_dot_dy, dot(a.x, run_variant("depthwise_conv2d_bwd_data", v->name, bd.problem, a.data_inputs)),
                     "bwd_data " + v->name + " " + p.dump());
    for (const auto* v : Registry::global().variants_of("depthwise_conv2d_bwd_filter"))
      if (v->backend == Backend::cpu)
        expect_close(a.y_dot_dy, dot(a.w, run_variant("depthwise_conv2d_bwd_filter", v->name, bf.problem, a.filter_inputs)),
                     "bwd_filter " + v->name + " " + p.dump());
  }
}

// PyTorch's interpolate and pad forwards, written here in double from the documented formulas (not
// from the kernels), NCHW / NCDHW: the gradients must be their transposes.
struct Resampled {
  std::int64_t i0;        // first tap
  std::vector<double> w;  // weights of taps i0, i0 + 1, ... (clamped into the input when read)
};

// PyTorch's area_pixel_compute_source_index (the linear modes then clamp it at 0).
double source_coordinate(std::int64_t o, std::int64_t in, std::int64_t out, bool align) {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  if (align) return out > 1 ? d(in - 1) / d(out - 1) * d(o) : 0.0;
  return d(in) / d(out) * (d(o) + 0.5) - 0.5;
}

Resampled bicubic_axis(std::int64_t o, std::int64_t in, std::int64_t out, bool align) {
  const double src = source_coordinate(o, in, out, align);
  const double fl = std::floor(src), t = src - fl;
  auto keys = [](double d) {  // Keys' cubic convolution kernel with A = -0.75
    const double a = -0.75;
    d = std::fabs(d);
    return d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  };
  return {static_cast<std::int64_t>(fl) - 1, {keys(t + 1), keys(t), keys(1 - t), keys(2 - t)}};
}

Resampled linear_axis(std::int64_t o, std::int64_t in, std::int64_t out, bool align) {
  const double src = std::max(source_coordinate(o, in, out, align), 0.0);
  const double fl = std::floor(src);
  return {static_cast<std::int64_t>(fl), {1 - (src - fl), src - fl}};
}

std::int64_t clamped(std::int64_t i, std::int64_t n) { return std::min(std::max<std::int64_t>(i, 0), n - 1); }

// out[n, c, oz, oy, ox] = sum over the taps of the three axes' weights times x (d = od = 1 in 2-D).
std::vector<double> interpolate(const HostTensor& x, std::int64_t planes, std::int64_t d, std::int64_t h, std::int64_t w,
                                std::int64_t od, std::int64_t oh, std::int64_t ow, bool align, bool cubic) {
  auto axis = [&](std::int64_t o, std::int64_t in, std::int64_t out) {
    return cubic ? bicubic_axis(o, in, out, align) : linear_axis(o, in, out, align);
  };
  std::vector<double> y;
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t oz = 0; oz < od; ++oz)
      for (std::int64_t oy = 0; oy < oh; ++oy)
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          const Resampled az = od == 1 && d == 1 ? Resampled{0, {1}} : axis(oz, d, od), ay = axis(oy, h, oh), ax = axis(ox, w, ow);
          double v = 0;
          for (std::size_t i = 0; i < az.w.size(); ++i)
            for (std::size_t j = 0; j < ay.w.size(); ++j)
              for (std::size_t k = 0; k < ax.w.size(); ++k) {
                const std::int64_t at = ((p * d + clamped(az.i0 + static_cast<std::int64_t>(i), d)) * h +
                                         clamped(ay.i0 + static_cast<std::int64_t>(j), h)) * w + clamped(ax.i0 + static_cast<std::int64_t>(k), w);
                v += az.w[i] * ay.w[j] * ax.w[k] * x.as<float>()[at];
              }
          y.push_back(v);
        }
  return y;
}

double dot(const std::vector<double>& a, const HostTensor& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b.as<float>()[i];
  return s;
}

TEST(Adjoint, InterpolateGradsAreTheTransposesOfPyTorchsForwards) {
  for (const auto& p : {nlohmann::json{{"n", 2}, {"c", 3}, {"h", 5}, {"w", 7}, {"out_h", 17}, {"out_w", 9}},
                        nlohmann::json{{"n", 1}, {"c", 2}, {"h", 9}, {"w", 6}, {"out_h", 4}, {"out_w", 13}, {"align_corners", true}},
                        nlohmann::json{{"n", 1}, {"c", 2}, {"h", 12}, {"w", 11}, {"out_h", 5}, {"out_w", 3}},
                        nlohmann::json{{"n", 1}, {"c", 1}, {"h", 6}, {"w", 6}, {"out_h", 6}, {"out_w", 6}}}) {
    const auto cc = config("resize_bicubic_grad", p);
    const HostTensor x = random_tensor(cc.problem.output, 1);
    std::vector<HostTensor> g;
    g.push_back(random_tensor(cc.problem.inputs[0], 2));
    const auto y = interpolate(x, p["n"].get<std::int64_t>() * p["c"].get<std::int64_t>(), 1, p["h"], p["w"], 1, p["out_h"], p["out_w"],
                               p.value("align_corners", false), true);
    expect_close(dot(y, g[0]), dot(x, run_variant("resize_bicubic_grad", "cpu.serial", cc.problem, g)), "bicubic " + p.dump());
  }
  for (const auto& p : {nlohmann::json{{"n", 2}, {"c", 2}, {"d", 3}, {"h", 5}, {"w", 4}, {"out_d", 7}, {"out_h", 9}, {"out_w", 13}},
                        nlohmann::json{{"n", 1}, {"c", 2}, {"d", 6}, {"h", 4}, {"w", 9}, {"out_d", 4}, {"out_h", 11}, {"out_w", 5}, {"align_corners", true}},
                        nlohmann::json{{"n", 1}, {"c", 1}, {"d", 9}, {"h", 7}, {"w", 8}, {"out_d", 3}, {"out_h", 4}, {"out_w", 8}}}) {
    const auto cc = config("resize_trilinear_grad", p);
    const HostTensor x = random_tensor(cc.problem.output, 3);
    std::vector<HostTensor> g;
    g.push_back(random_tensor(cc.problem.inputs[0], 4));
    const auto y = interpolate(x, p["n"].get<std::int64_t>() * p["c"].get<std::int64_t>(), p["d"], p["h"], p["w"], p["out_d"], p["out_h"],
                               p["out_w"], p.value("align_corners", false), false);
    expect_close(dot(y, g[0]), dot(x, run_variant("resize_trilinear_grad", "cpu.serial", cc.problem, g)), "trilinear " + p.dump());
  }
}

TEST(Adjoint, PaddingGradsAreTheTransposesOfPyTorchsPads) {
  // Forward: out[oy, ox] = x[src(oy - top), src(ox - left)], src reflecting about the edges
  // without repeating them (numpy's "reflect") or clamping ("edge").
  auto source = [](std::int64_t i, std::int64_t n, bool reflect) {
    if (!reflect) return clamped(i, n);
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
    return i;
  };
  for (const bool reflect : {true, false})
    for (const auto& p : {nlohmann::json{{"n", 2}, {"c", 3}, {"h", 6}, {"w", 7}, {"pad_left", 6}, {"pad_right", 1}, {"pad_top", 0}, {"pad_bottom", 5}},
                          nlohmann::json{{"n", 1}, {"c", 2}, {"h", 5}, {"w", 4}, {"pad_left", 3}, {"pad_right", 3}, {"pad_top", 4}, {"pad_bottom", 4}}}) {
      const std::string op = reflect ? "reflection_pad2d_bwd" : "replication_pad2d_bwd";
      const auto cc = config(op, p);
      const std::int64_t h = p["h"], w = p["w"], top = p["pad_top"], left = p["pad_left"];
      const std::int64_t oh = cc.problem.inputs[0].shape[2], ow = cc.problem.inputs[0].shape[3];
      const HostTensor x = random_tensor(cc.problem.output, 5);
      std::vector<HostTensor> g;
      g.push_back(random_tensor(cc.problem.inputs[0], 6));
      std::vector<double> y;
      for (std::int64_t plane = 0; plane < p["n"].get<std::int64_t>() * p["c"].get<std::int64_t>(); ++plane)
        for (std::int64_t oy = 0; oy < oh; ++oy)
          for (std::int64_t ox = 0; ox < ow; ++ox)
            y.push_back(x.as<float>()[(plane * h + source(oy - top, h, reflect)) * w + source(ox - left, w, reflect)]);
      expect_close(dot(y, g[0]), dot(x, run_variant(op, "cpu.serial", cc.problem, g)), op + " " + p.dump());
    }
}

TEST(Adjoint, CropAndResizeGradBoxesMatchesFiniteDifferences) {
  // L(boxes) = <crop_and_resize(image, boxes), grads> is piecewise linear in each coordinate
  // away from pixel boundaries, so a central difference in double agrees with the gradient.
  const nlohmann::json p = {{"batch", 1}, {"h", 9}, {"w", 11}, {"c", 2}, {"boxes", 3}, {"crop_h", 4}, {"crop_w", 5}};
  const auto fwd = config("crop_and_resize", p), gb = config("crop_and_resize_grad_boxes", p);
  const HostTensor image = random_tensor(fwd.problem.inputs[0], 1), grads = random_tensor(gb.problem.inputs[0], 2);
  // No sample may land exactly on a pixel centre: there floor == ceil and the gradient is one
  // of two one-sided values (TensorFlow's formula picks one), so the difference would straddle
  // a kink.
  const std::vector<double> boxes = {0.13, 0.21, 0.71, 0.83, 0.62, 0.05, 0.18, 0.57, 0.31, 0.43, 0.87, 0.74};
  auto loss = [&](const std::vector<double>& b) {
    std::vector<std::vector<double>> vals(3);
    vals[0].assign(image.as<float>(), image.as<float>() + image.desc().numel());
    vals[1] = b;
    vals[2] = {0, 0, 0};
    const auto in = inputs_from(fwd.problem, vals);
    return dot(run_variant("crop_and_resize", "cpu.serial", fwd.problem, in), grads);
  };
  std::vector<std::vector<double>> gvals(4);
  gvals[0].assign(grads.as<float>(), grads.as<float>() + grads.desc().numel());
  gvals[1].assign(image.as<float>(), image.as<float>() + image.desc().numel());
  gvals[2] = boxes;
  gvals[3] = {0, 0, 0};
  const auto analytic = values(run_variant("crop_and_resize_grad_boxes", "cpu.serial", gb.problem, inputs_from(gb.problem, gvals)));
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const double h = 1e-3;
    auto up = boxes, down = boxes;
    up[i] += h;
    down[i] -= h;
    EXPECT_NEAR((loss(up) - loss(down)) / (2 * h), analytic[i], 2e-2 * (1 + std::fabs(analytic[i]))) << "coordinate " << i;
  }
}

// Average pools: <pool(x), g> == <x, pool_bwd(g)> with the forward written out here from ATen's
// forward kernels (adaptive_average_pool: the window's sum / kH / kW; avg_pool3d_cuda_update_output:
// the clipped window's sum / divide_factor), so the backward scatters where the forward gathers
// and divides by what the forward divides by.
TEST(Adjoint, AveragePoolGradsAreTheTransposeOfTheForwardPools) {
  for (const auto& params : {nlohmann::json{{"n", 2}, {"c", 3}, {"h", 7}, {"w", 5}, {"out_h", 3}, {"out_w", 4}},
                             nlohmann::json{{"n", 1}, {"c", 2}, {"h", 3}, {"w", 2}, {"out_h", 5}, {"out_w", 7}}}) {
    const auto cc = config("adaptive_avg_pool2d_bwd", params);
    const std::int64_t planes = params["n"].get<int>() * params["c"].get<int>(), h = params["h"], w = params["w"],
                       oh_n = params["out_h"], ow_n = params["out_w"];
    const HostTensor x = random_tensor(cc.problem.output, 1);
    std::vector<HostTensor> gin;
    gin.push_back(random_tensor(cc.problem.inputs[0], 2));
    const HostTensor& g = gin[0];
    double forward = 0;
    for (std::int64_t p = 0; p < planes; ++p)
      for (std::int64_t oh = 0; oh < oh_n; ++oh)
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          const std::int64_t h0 = floor_of(oh * h, oh_n), h1 = ceil_of((oh + 1) * h, oh_n);
          const std::int64_t w0 = floor_of(ow * w, ow_n), w1 = ceil_of((ow + 1) * w, ow_n);
          double sum = 0;
          for (std::int64_t i = h0; i < h1; ++i)
            for (std::int64_t j = w0; j < w1; ++j) sum += x.as<float>()[(p * h + i) * w + j];
          forward += sum / static_cast<double>((h1 - h0) * (w1 - w0)) * g.as<float>()[(p * oh_n + oh) * ow_n + ow];
        }
    expect_close(forward, dot(x, run_variant("adaptive_avg_pool2d_bwd", "cpu.serial", cc.problem, gin)), params.dump());
  }
  const nlohmann::json base = {{"n", 1}, {"c", 2}, {"d", 5}, {"h", 6}, {"w", 7}, {"kernel_d", 2}, {"kernel_h", 3}, {"kernel_w", 4},
                               {"stride_d", 1}, {"stride_h", 2}, {"stride_w", 3}, {"padding_h", 1}, {"padding_w", 2}};
  std::vector<nlohmann::json> variants(4, base);
  variants[1]["ceil_mode"] = true;
  variants[2]["ceil_mode"] = true;
  variants[2]["count_include_pad"] = false;
  variants[3]["divisor_override"] = 7;
  for (const auto& params : variants) {
    const auto cc = config("avg_pool3d_bwd", params);
    const bool include = params.value("count_include_pad", true);
    const std::int64_t divisor = params.value("divisor_override", 0);
    const std::int64_t in[3] = {5, 6, 7}, k[3] = {2, 3, 4}, s[3] = {1, 2, 3}, pad[3] = {0, 1, 2};
    std::int64_t out[3];
    for (int d = 0; d < 3; ++d) out[d] = cc.problem.inputs[0].shape[static_cast<std::size_t>(2 + d)];
    const HostTensor x = random_tensor(cc.problem.output, 3);
    std::vector<HostTensor> gin;
    gin.push_back(random_tensor(cc.problem.inputs[0], 4));
    const HostTensor& g = gin[0];
    double forward = 0;
    for (std::int64_t p = 0; p < 2; ++p)
      for (std::int64_t o0 = 0; o0 < out[0]; ++o0)
        for (std::int64_t o1 = 0; o1 < out[1]; ++o1)
          for (std::int64_t o2 = 0; o2 < out[2]; ++o2) {
            const std::int64_t o[3] = {o0, o1, o2};
            std::int64_t lo[3], hi[3], padded = 1, clipped = 1;
            for (int d = 0; d < 3; ++d) {
              const std::int64_t start = o[d] * s[d] - pad[d], end = std::min(start + k[d], in[d] + pad[d]);
              lo[d] = std::max<std::int64_t>(start, 0);
              hi[d] = std::min(end, in[d]);
              padded *= end - start;
              clipped *= hi[d] - lo[d];
            }
            double sum = 0;
            for (std::int64_t t = lo[0]; t < hi[0]; ++t)
              for (std::int64_t i = lo[1]; i < hi[1]; ++i)
                for (std::int64_t j = lo[2]; j < hi[2]; ++j) sum += x.as<float>()[((p * 5 + t) * 6 + i) * 7 + j];
            const double div = static_cast<double>(divisor ? divisor : include ? padded : clipped);
            forward += sum / div * g.as<float>()[((p * out[0] + o0) * out[1] + o1) * out[2] + o2];
          }
    expect_close(forward, dot(x, run_variant("avg_pool3d_bwd", "cpu.serial", cc.problem, gin)), params.dump());
  }
}

// Max pools: the forward's output is its input at the indices, so <x[indices], g> == <x, grad(g)>:
// the backward adds at the plane the index belongs to.
TEST(Adjoint, MaxPoolGradsAreTheTransposeOfGatheringAtTheIndices) {
  const std::pair<const char*, nlohmann::json> cases[] = {
      {"adaptive_max_pool2d_bwd", {{"n", 2}, {"c", 3}, {"h", 6}, {"w", 5}, {"out_h", 9}, {"out_w", 4}}},
      {"max_pool3d_bwd", {{"n", 2}, {"c", 3}, {"d", 4}, {"h", 7}, {"w", 6}, {"kernel_d", 2}, {"kernel_h", 3}, {"kernel_w", 3},
                          {"stride_d", 1}, {"stride_h", 2}, {"stride_w", 1}, {"padding_h", 1}, {"dilation_w", 2}}}};
  for (const auto& [op, params] : cases) {
    const auto cc = config(op, params);
    const auto in = make_inputs(*cc.op, cc.problem, 21);
    const std::int64_t plane_in = in[1].desc().numel() / 6, plane_out = in[0].desc().numel() / 6;
    double gathered = 0;
    for (std::int64_t o = 0; o < in[0].desc().numel(); ++o)
      gathered += static_cast<double>(in[1].as<float>()[o / plane_out * plane_in + in[2].as<std::int32_t>()[o]]) * in[0].as<float>()[o];
    expect_close(gathered, dot(in[1], run_variant(op, "cpu.serial", cc.problem, in)), op);
  }
}

// <forward(W), g> == <W, embedding_bag_bwd(g)>, with EmbeddingBag's forward written out here:
// a bag's rows summed (scaled by per-sample weights, or divided by the non-padding count for mean),
// or the row at max_indices for max, padding rows left out.
TEST(Adjoint, EmbeddingBagBackwardIsTheTransposeOfTheForward) {
  const nlohmann::json base = {{"num_embeddings", 40}, {"dim", 3}, {"indices", 300}, {"bags", 37}, {"padding_idx", 5}};
  for (const auto& extra : {nlohmann::json{{"mode", "sum"}}, nlohmann::json{{"mode", "mean"}},
                            nlohmann::json{{"mode", "sum"}, {"per_sample_weights", true}}, nlohmann::json{{"mode", "max"}}}) {
    nlohmann::json p = base;
    p.update(extra);
    const auto cc = config("embedding_bag_bwd", p);
    const auto& g = cc.problem.geom<embedding::Geometry>();
    const auto in = make_inputs(*cc.op, cc.problem, 11);
    const auto* idx = in[0].as<std::int32_t>();
    const auto* off = in[1].as<std::int32_t>();
    const bool max = g.mode == embedding::Mode::max;
    HostTensor w = max ? HostTensor(in[2].desc()) : random_tensor(cc.problem.output, 12);
    if (max) std::memcpy(w.data(), in[2].data(), in[2].desc().bytes());
    const auto* grad = in[max ? 4 : 2].as<float>();
    double forward_dot = 0;
    for (std::int64_t b = 0; b < g.bags; ++b) {
      const std::int64_t begin = off[b], end = b + 1 < g.bags ? off[b + 1] : g.indices;
      std::int64_t count = 0;
      for (std::int64_t i = begin; i < end; ++i) count += idx[i] != g.padding_idx;
      for (std::int64_t f = 0; f < g.dim; ++f) {
        double out = 0;
        if (max) {
          const std::int32_t row = in[3].as<std::int32_t>()[b * g.dim + f];
          if (row >= 0) out = w.as<float>()[row * g.dim + f];
        } else {
          for (std::int64_t i = begin; i < end; ++i)
            if (idx[i] != g.padding_idx) out += static_cast<double>(w.as<float>()[idx[i] * g.dim + f]) * (g.per_sample_weights ? in[3].as<float>()[i] : 1.0f);
          if (g.mode == embedding::Mode::mean && count > 0) out /= static_cast<double>(count);
        }
        forward_dot += out * grad[b * g.dim + f];
      }
    }
    expect_close(forward_dot, dot(w, run_variant("embedding_bag_bwd", "cpu.serial", cc.problem, in)), p.dump());
  }
}

}  // namespace
}  // namespace d9m
