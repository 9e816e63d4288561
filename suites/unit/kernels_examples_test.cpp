// Hand-computed examples, one or more per family, and adjoint identities that tie every
// gradient to its forward op: <forward(x), g> == <x, grad(g)> (summed in double), which holds
// only if the gradient scatters exactly where the forward op gathers.
#include <cmath>
#include <limits>

#include "kernels/common/counter_rng.h"
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
  // Rows (1, 2), (3, 4), (5, 6), (-7, 0.5) with sorted ids 0, 0, 2, 2 into 4 segments: segment 1
  // and 3 are empty and hold the reduction's empty value (0, 0, 1, the lowest float).
  const nlohmann::json params = {{"rows", 4}, {"depth", 2}, {"num_segments", 4}};
  const std::vector<double> data{1, 2, 3, 4, 5, 6, -7, 0.5}, ids{0, 0, 2, 2};
  const float lowest = -std::numeric_limits<float>::max();
  auto cc = config("segment_sum", params);
  expect_all_variants("segment_sum", cc, inputs_from(cc.problem, {data, ids}), {4, 6, 0, 0, -2, 6.5, 0, 0});
  cc = config("segment_mean", params);
  expect_all_variants("segment_mean", cc, inputs_from(cc.problem, {data, ids}), {2, 3, 0, 0, -1, 3.25, 0, 0});
  cc = config("segment_prod", params);
  expect_all_variants("segment_prod", cc, inputs_from(cc.problem, {data, ids}), {3, 8, 1, 1, -35, 3, 1, 1});
  cc = config("segment_max", params);
  expect_all_variants("segment_max", cc, inputs_from(cc.problem, {data, ids}), {3, 4, lowest, lowest, 5, 6, lowest, lowest});
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

TEST(Adjoint, ConvBackpropsAreTheTransposesOfTheForwardConvWhichConv2dComputes) {
  for (const auto& p : {nlohmann::json{{"n", 2}, {"h", 7}, {"w", 6}, {"ci", 3}, {"co", 4}, {"kh", 3}, {"kw", 2}},
                        nlohmann::json{{"n", 1}, {"h", 9}, {"w", 8}, {"ci", 2}, {"co", 3}, {"kh", 3}, {"kw", 3}, {"stride_h", 2}, {"stride_w", 3}, {"padding", "VALID"}},
                        nlohmann::json{{"n", 1}, {"h", 8}, {"w", 9}, {"ci", 2}, {"co", 2}, {"kh", 2}, {"kw", 3}, {"stride_h", 3}, {"dilation_w", 2}}}) {
    const auto bd = config("conv2d_bwd_data", p), bf = config("conv2d_bwd_filter", p);
    const TensorDesc& dy_desc = bd.problem.inputs[1];
    const std::int64_t oh = dy_desc.shape[1], ow = dy_desc.shape[2];
    // Padding as TensorFlow computes it, re-derived here rather than taken from the kernels.
    auto pad = [&](std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t d) {
      if (p.value("padding", "SAME") == "VALID") return std::int64_t{0};
      return std::max<std::int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0) / 2;
    };
    const std::int64_t pt = pad(p["h"], oh, p["kh"], p.value("stride_h", 1), p.value("dilation_h", 1));
    const std::int64_t pl = pad(p["w"], ow, p["kw"], p.value("stride_w", 1), p.value("dilation_w", 1));
    const HostTensor x = random_tensor(bf.problem.inputs[0], 1), w = random_tensor(bd.problem.inputs[0], 2);
    const HostTensor dy = random_tensor(dy_desc, 3);
    const auto y = conv_forward(p, x, w, oh, ow, pt, pl);
    double y_dot_dy = 0;
    for (std::size_t i = 0; i < y.size(); ++i) y_dot_dy += y[i] * dy.as<float>()[i];
    std::vector<HostTensor> din, fin;
    din.emplace_back(w.desc()); std::memcpy(din.back().data(), w.data(), w.desc().bytes());
    din.emplace_back(dy.desc()); std::memcpy(din.back().data(), dy.data(), dy.desc().bytes());
    fin.emplace_back(x.desc()); std::memcpy(fin.back().data(), x.data(), x.desc().bytes());
    fin.emplace_back(dy.desc()); std::memcpy(fin.back().data(), dy.data(), dy.desc().bytes());
    expect_close(y_dot_dy, dot(x, run_variant("conv2d_bwd_data", "cpu.serial", bd.problem, din)), "bwd_data " + p.dump());
    // conv2d itself is the naive forward conv, element by element.
    const auto fwd = config("conv2d", p);
    std::vector<HostTensor> xw;
    xw.emplace_back(x.desc()); std::memcpy(xw.back().data(), x.data(), x.desc().bytes());
    xw.emplace_back(w.desc()); std::memcpy(xw.back().data(), w.data(), w.desc().bytes());
    const auto conv2d = values(run_variant("conv2d", "cpu.serial", fwd.problem, xw));
    ASSERT_EQ(conv2d.size(), y.size()) << p.dump();
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(conv2d[i], y[i], 1e-5 * (1 + std::fabs(y[i]))) << "conv2d " << p.dump() << " at " << i;
    expect_close(y_dot_dy, dot(w, run_variant("conv2d_bwd_filter", "cpu.serial", bf.problem, fin)), "bwd_filter " + p.dump());
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

}  // namespace
}  // namespace d9m
