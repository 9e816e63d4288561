// Every CPU variant of every op computes the same op: within the op's tolerance on random
// inputs, bit for bit on exact (integer) inputs, and ordered variants give the same bits on
// any thread count. The catalogue-wide tests run the built-in profile D9M_TEST_PROFILE (quick in
// the sanitizer builds; suites/CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "kernels/conv/conv.h"
#include "kernels/depthwise/depthwise.h"

#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::digest;
using test::run_variant;

std::vector<const VariantDef*> cpu_variants(const std::string& op) {
  std::vector<const VariantDef*> out;
  for (const auto* v : Registry::global().variants_of(op))
    if (v->backend == Backend::cpu) out.push_back(v);
  return out;
}

TEST(KernelAgreement, EveryVariantMatchesTheSerialReferenceOnTheBuiltInCatalogue) {
  const Catalog cat = builtin_catalog(D9M_TEST_PROFILE, Registry::global());
  for (const auto& cc : cat.configs) {
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    const auto ref = test::values(run_variant(cc.op->name, "cpu.serial", cc.problem, inputs));
    double max_ref = 0;
    for (double x : ref) {
      ASSERT_TRUE(std::isfinite(x)) << cc.op->name << "/" << cc.name;
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(x)));
    }
    const double tol = allowed_difference(*cc.op, cc.problem, max_ref);
    for (const auto* v : cpu_variants(cc.op->name)) {
      const auto got = test::values(run_variant(cc.op->name, v->name, cc.problem, inputs));
      EXPECT_LE(test::max_abs_difference(got, ref), tol) << cc.op->name << "/" << cc.name << "/" << v->name;
    }
  }
}

// The ops that run at every precision, on the default catalogue's configs at each: every variant
// within the dtype's tolerance of the serial reference, the ordered ones with its bits on any
// thread count.
TEST(KernelAgreement, OpsAtEveryPrecisionMatchTheirReferenceAndOrderedKeepItsBits) {
  const Catalog cat = builtin_catalog(D9M_TEST_PROFILE, Registry::global());
  int checked = 0;
  for (const auto& base : cat.configs) {
    if (base.op->dtypes.size() < 2 || base.dtype != DType::f32) continue;
    for (DType dtype : base.op->dtypes) {
      const CatalogConfig cc = config(base.op->name, base.params_json, std::string(dtype_short_name(dtype)));
      ASSERT_EQ(cc.problem.dtype, dtype);
      ASSERT_TRUE(cc.problem.output.dtype == dtype || cc.problem.output.keeps_f32) << cc.op->name;
      const auto inputs = make_inputs(*cc.op, cc.problem, base.seed);
      const HostTensor serial = run_variant(cc.op->name, "cpu.serial", cc.problem, inputs);
      const auto ref = test::values(serial);
      double max_ref = 0;
      for (double x : ref) max_ref = std::max(max_ref, std::fabs(x));
      const double tol = allowed_difference(*cc.op, cc.problem, max_ref);
      const std::string what = cc.op->name + "/" + base.name + " in " + std::string(dtype_short_name(dtype));
      for (const auto* v : cpu_variants(cc.op->name)) {
        const auto got = test::values(run_variant(cc.op->name, v->name, cc.problem, inputs, 3));
        EXPECT_LE(test::max_abs_difference(got, ref), tol) << what << "/" << v->name;
      }
      const std::string ordered = digest(run_variant(cc.op->name, "cpu.ordered", cc.problem, inputs, 1));
      for (unsigned t : {2u, 5u})
        EXPECT_EQ(digest(run_variant(cc.op->name, "cpu.ordered", cc.problem, inputs, t)), ordered) << what << " on " << t << " threads";
      if (Registry::global().find_variant(cc.op->name, "cpu.ordered")->bit_equal_to == "cpu.serial") {
        EXPECT_EQ(ordered, digest(serial)) << what << ": cpu.ordered claims cpu.serial's bits";
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 4 * 5);  // the scatter and matmul families' ops, at four dtypes each
}

TEST(KernelAgreement, CpuVariantsClaimingAnotherVariantsBitsHaveThem) {
  // cpu.ordered of a scatter-form op replays the reference order per output, forward ops compute
  // each output with the reference formula: such variants claim (bit_equal_to) the serial bits.
  const Catalog cat = builtin_catalog(D9M_TEST_PROFILE, Registry::global());
  std::size_t checked = 0;
  for (const auto& cc : cat.configs) {
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    for (const auto* v : cpu_variants(cc.op->name)) {
      if (v->bit_equal_to.empty()) continue;
      EXPECT_EQ(digest(run_variant(cc.op->name, v->name, cc.problem, inputs, 3)),
                digest(run_variant(cc.op->name, v->bit_equal_to, cc.problem, inputs)))
          << cc.op->name << "/" << cc.name << "/" << v->name << " claims the bits of " << v->bit_equal_to;
      ++checked;
    }
  }
  std::size_t claiming = 0;  // configs of ops with a CPU variant that claims another's bits
  for (const auto& cc : cat.configs) {
    bool any = false;
    for (const auto* v : cpu_variants(cc.op->name)) any |= !v->bit_equal_to.empty();
    claiming += any;
  }
  EXPECT_GT(claiming, cat.configs.size() / 2);
  EXPECT_GE(checked, claiming);
}

// Every CPU variant of role ordered (cpu.ordered, and the gather forms beside it).
TEST(KernelAgreement, OrderedVariantsGiveTheSameBitsOnAnyThreadCount) {
  const Catalog cat = builtin_catalog(D9M_TEST_PROFILE, Registry::global());
  for (const auto& cc : cat.configs) {
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    for (const auto* v : cpu_variants(cc.op->name)) {
      if (v->role != Role::ordered) continue;
      const std::string one = digest(run_variant(cc.op->name, v->name, cc.problem, inputs, 1));
      for (unsigned t : {2u, 3u, 7u})
        EXPECT_EQ(digest(run_variant(cc.op->name, v->name, cc.problem, inputs, t)), one)
            << cc.op->name << "/" << cc.name << "/" << v->name << " on " << t << " threads";
    }
  }
}

// Configs whose every product and sum is exact in float32 with integer inputs: dyadic resize
// scales, crop boxes on a grid of 1/(H-1) with H-1 and CH-1 powers of two.
const std::vector<std::pair<std::string, nlohmann::json>> kExactConfigs = {
    {"bias_add", {{"n", 4}, {"h", 8}, {"w", 8}, {"c", 5}}},
    {"bias_add_grad", {{"n", 16}, {"h", 16}, {"w", 16}, {"c", 3}}},
    // Products of integers in [-4, 4] summed over at most 4 * 3 * 3 taps: exact in f32.
    {"conv2d", {{"n", 2}, {"h", 9}, {"w", 9}, {"ci", 4}, {"co", 8}, {"kh", 3}, {"kw", 3}}},
    {"conv2d", {{"n", 2}, {"h", 11}, {"w", 10}, {"ci", 19}, {"co", 3}, {"kh", 2}, {"kw", 3}, {"stride_w", 2}, {"dilation_h", 2}, {"padding", "VALID"}}},
    {"conv2d_bwd_data", {{"n", 2}, {"h", 9}, {"w", 9}, {"ci", 4}, {"co", 8}, {"kh", 3}, {"kw", 3}}},
    {"conv2d_bwd_data", {{"n", 2}, {"h", 11}, {"w", 11}, {"ci", 3}, {"co", 4}, {"kh", 5}, {"kw", 3}, {"stride_h", 2}, {"dilation_w", 2}, {"padding", "VALID"}}},
    {"conv2d_bwd_filter", {{"n", 4}, {"h", 9}, {"w", 9}, {"ci", 4}, {"co", 8}, {"kh", 3}, {"kw", 3}}},
    {"maxpool2d_bwd", {{"n", 2}, {"h", 16}, {"w", 16}, {"c", 4}, {"ksize_h", 3}, {"ksize_w", 3}, {"stride_h", 1}, {"stride_w", 1}, {"padding", "SAME"}}},
    {"resize_bilinear", {{"n", 2}, {"h", 8}, {"w", 8}, {"c", 3}, {"out_h", 32}, {"out_w", 16}}},
    {"resize_bilinear_grad", {{"n", 2}, {"h", 8}, {"w", 8}, {"c", 3}, {"out_h", 32}, {"out_w", 16}}},
    {"resize_nearest", {{"n", 2}, {"h", 8}, {"w", 8}, {"c", 3}, {"out_h", 24}, {"out_w", 20}}},
    {"resize_nearest_grad", {{"n", 2}, {"h", 8}, {"w", 8}, {"c", 3}, {"out_h", 24}, {"out_w", 20}}},
    {"scatter_add", {{"rows", 64}, {"depth", 4}, {"updates", 4096}, {"index_range", 8}}},
    {"scatter_nd_add", {{"dim0", 8}, {"dim1", 8}, {"depth", 4}, {"updates", 4096}, {"index_range", 5}}},
    {"unsorted_segment_sum", {{"rows", 4096}, {"depth", 4}, {"num_segments", 6}}},
    {"crop_and_resize", {{"batch", 2}, {"h", 9}, {"w", 17}, {"c", 3}, {"boxes", 16}, {"crop_h", 5}, {"crop_w", 9}}},
    {"crop_and_resize_grad_image", {{"batch", 2}, {"h", 9}, {"w", 17}, {"c", 3}, {"boxes", 48}, {"crop_h", 5}, {"crop_w", 9}}},
    {"crop_and_resize_grad_image", {{"batch", 2}, {"h", 9}, {"w", 9}, {"c", 3}, {"boxes", 48}, {"crop_h", 5}, {"crop_w", 5}, {"method", "nearest"}}},
    {"crop_and_resize_grad_boxes", {{"batch", 2}, {"h", 9}, {"w", 17}, {"c", 3}, {"boxes", 8}, {"crop_h", 5}, {"crop_w", 9}}},
    // Products of integers in [-4, 4] summed over K = 2000: at most 32000, exact in f32.
    {"matmul", {{"m", 9}, {"n", 7}, {"k", 2000}, {"layout", "TN"}}},
    {"matmul_batched", {{"batch", 3}, {"m", 5}, {"n", 6}, {"k", 1000}, {"layout", "NT"}}},
    {"symv", {{"n", 300}}},
    // Row sums of at most 200 products of integers in [-4, 4]: at most 3200, exact in f32.
    {"spmv", {{"rows", 300}, {"cols", 200}, {"nnz_per_row", 8}, {"heavy_rows", 3}, {"format", "coo"}}},
    {"spmv", {{"rows", 300}, {"cols", 200}, {"nnz_per_row", 8}, {"heavy_rows", 3}, {"transpose", true}}},
    {"spmm", {{"rows", 200}, {"cols", 100}, {"nnz_per_row", 6}, {"heavy_rows", 2}, {"n", 5}}},
    {"spmm", {{"rows", 200}, {"cols", 100}, {"nnz_per_row", 6}, {"heavy_rows", 2}, {"n", 5}, {"format", "coo"}, {"transpose", true}}},
    {"sparse_dense_matmul", {{"rows", 200}, {"cols", 100}, {"nnz_per_row", 6}, {"heavy_rows", 2}, {"n", 5}, {"adjoint_b", true}}},
    {"sparse_dense_matmul", {{"rows", 200}, {"cols", 100}, {"nnz_per_row", 6}, {"n", 5}, {"adjoint_a", true}, {"adjoint_b", true}}},
    // Integers in [-4, 4]: every partial sum of 20011 of them is exact in f32, whatever the order.
    {"reduce_sum", {{"n", 10007}}},
    {"cumsum", {{"n", 10007}}},
    {"segmented_reduce", {{"n", 20011}, {"segments", 17}}},
    // q = 0 in exact mode: softmax 1/128 = 2^-7 everywhere, and with head_dim 4 (scale 1/2) every
    // dS has 14 fractional bits and a magnitude below 1, so dQ's sums of 128 fit f32's 24 bits.
    // Two key blocks, so the block partials are really split.
    {"sdpa", {{"batch", 2}, {"heads", 2}, {"seq_q", 24}, {"seq_kv", 128}, {"head_dim", 4}}},
    {"sdpa_bwd", {{"batch", 2}, {"heads", 2}, {"seq_q", 24}, {"seq_kv", 128}, {"head_dim", 4}}},
    // Four key blocks, so atomic adds of block partials land on nonzero sums (two adds onto 0
    // commute): softmax 2^-8 and head_dim 1 (scale 1); |dO v - delta| <= 32 on the 2^-8 grid, so
    // dS has 16 fractional bits below 2^-3, and dQ's sums of 256 stay under 2^7: 23 bits.
    {"sdpa_bwd", {{"batch", 1}, {"heads", 2}, {"seq_q", 24}, {"seq_kv", 256}, {"head_dim", 1}}},
    // Integers sum exactly; prod's exact data are +-1; a maximum is exact anyway. 64 rows per
    // segment on average, many across the atomic variant's tasks.
    {"segment_sum", {{"rows", 4096}, {"depth", 4}, {"num_segments", 64}}},
    {"segment_mean", {{"rows", 4096}, {"depth", 4}, {"num_segments", 64}}},
    {"segment_prod", {{"rows", 4096}, {"depth", 4}, {"num_segments", 64}}},
    {"segment_max", {{"rows", 4096}, {"depth", 4}, {"num_segments", 64}}},
    // Gradients of 2 x 32 x 32 positions into 9 filter taps: up to about 2000 adds per tap.
    {"dilation2d_bwd_input", {{"n", 2}, {"h", 32}, {"w", 32}, {"c", 3}, {"filter_h", 3}, {"filter_w", 3}, {"rate_h", 2}, {"rate_w", 2}}},
    {"dilation2d_bwd_filter", {{"n", 2}, {"h", 32}, {"w", 32}, {"c", 3}, {"filter_h", 3}, {"filter_w", 3}, {"stride_h", 2}, {"padding", "VALID"}}},
    // Quarter-pixel coordinates: weights and products are short dyadics (resampler_ops.cpp); 512
    // points on 64 pixels, and 64 channels into each warp gradient.
    {"resampler_grad_data", {{"batch", 2}, {"h", 8}, {"w", 8}, {"c", 3}, {"points", 512}}},
    {"resampler_grad_data", {{"batch", 2}, {"h", 8}, {"w", 8}, {"c", 3}, {"points", 512}, {"semantics", "grid_sample"}}},
    {"resampler_grad_data", {{"batch", 2}, {"h", 9}, {"w", 9}, {"c", 3}, {"points", 512}, {"semantics", "grid_sample"}, {"align_corners", true}}},
    {"resampler_grad_warp", {{"batch", 2}, {"h", 8}, {"w", 8}, {"c", 64}, {"points", 64}}},
    // PyTorch's bicubic weights at t = 1/4 and 3/4 (2x without align_corners) are k/256 with
    // |k| <= 225, at t = 0 and 1/2 (2x with align_corners, 1/2x without) k/32: a product with an
    // integer gradient in [-4, 4] has at most 20 significant bits on the 2^-16 grid, and the absolute
    // weights reaching one pixel sum to at most 2.6 per axis (border pixels take whole windows), so
    // every partial sum stays below 4 * 2.6 * 2.6 < 2^8: exact in f32's 24 bits.
    {"resize_bicubic_grad", {{"n", 2}, {"c", 3}, {"h", 8}, {"w", 6}, {"out_h", 16}, {"out_w", 12}}},
    {"resize_bicubic_grad", {{"n", 2}, {"c", 3}, {"h", 5}, {"w", 9}, {"out_h", 9}, {"out_w", 17}, {"align_corners", true}}},
    {"resize_bicubic_grad", {{"n", 2}, {"c", 3}, {"h", 16}, {"w", 8}, {"out_h", 8}, {"out_w", 4}}},
    // Trilinear weights at 2x are 1/4, 3/4 (or 1/2 with align_corners): products on the 2^-6 grid.
    {"resize_trilinear_grad", {{"n", 2}, {"c", 2}, {"d", 3}, {"h", 4}, {"w", 5}, {"out_d", 6}, {"out_h", 8}, {"out_w", 10}}},
    {"resize_trilinear_grad", {{"n", 2}, {"c", 2}, {"d", 3}, {"h", 5}, {"w", 3}, {"out_d", 5}, {"out_h", 9}, {"out_w", 5}, {"align_corners", true}}},
    // Padding gradients are sums of integers (at most 33 * 33 of them): exact.
    {"reflection_pad2d_bwd", {{"n", 2}, {"c", 3}, {"h", 6}, {"w", 7}, {"pad_left", 6}, {"pad_right", 2}, {"pad_top", 5}, {"pad_bottom", 5}}},
    {"replication_pad2d_bwd", {{"n", 2}, {"c", 3}, {"h", 6}, {"w", 7}, {"pad_left", 32}, {"pad_right", 3}, {"pad_top", 0}, {"pad_bottom", 32}}},
    // Adaptive windows of 2 x 2 (5 into 4) and of 1 x 1 (2 into 8, each input in 16 windows):
    // integers / 2 / 2 are quarters, and sums of a few are exact.
    {"adaptive_avg_pool2d_bwd", {{"n", 2}, {"c", 3}, {"h", 5}, {"w", 5}, {"out_h", 4}, {"out_w", 4}}},
    {"adaptive_avg_pool2d_bwd", {{"n", 2}, {"c", 3}, {"h", 2}, {"w", 2}, {"out_h", 8}, {"out_w", 8}}},
    // Integer gradients: any sum exact. Up-sampling sends up to about 81 windows to one input.
    {"adaptive_max_pool2d_bwd", {{"n", 2}, {"c", 3}, {"h", 4}, {"w", 4}, {"out_h", 32}, {"out_w", 32}}},
    {"adaptive_max_pool2d_bwd", {{"n", 2}, {"c", 3}, {"h", 9}, {"w", 9}, {"out_h", 16}, {"out_w", 16}, {"levels", 3}}},
    // Divisors 2 x 4 x 2 = 16 (count_include_pad, no ceil_mode: every padded window is whole) and
    // divisor_override 8: integers / 16 or / 8, summed over at most 27 windows, are exact.
    {"avg_pool3d_bwd", {{"n", 2}, {"c", 2}, {"d", 6}, {"h", 9}, {"w", 8}, {"kernel_d", 2}, {"kernel_h", 4}, {"kernel_w", 2},
                        {"stride_d", 1}, {"stride_h", 2}, {"stride_w", 1}, {"padding_h", 1}}},
    {"avg_pool3d_bwd", {{"n", 2}, {"c", 2}, {"d", 7}, {"h", 8}, {"w", 8}, {"kernel_d", 3}, {"kernel_h", 3}, {"kernel_w", 3},
                        {"stride_d", 2}, {"stride_h", 2}, {"stride_w", 2}, {"padding_d", 1}, {"padding_h", 1}, {"padding_w", 1},
                        {"ceil_mode", true}, {"count_include_pad", false}, {"divisor_override", 8}}},
    {"max_pool3d_bwd", {{"n", 2}, {"c", 2}, {"d", 6}, {"h", 8}, {"w", 8}, {"kernel_d", 5}, {"kernel_h", 5}, {"kernel_w", 5},
                        {"stride_d", 1}, {"stride_h", 1}, {"stride_w", 1}, {"padding_d", 2}, {"padding_h", 2}, {"padding_w", 2}}},
    {"max_pool3d_bwd", {{"n", 2}, {"c", 2}, {"d", 6}, {"h", 8}, {"w", 8}, {"kernel_d", 3}, {"kernel_h", 3}, {"kernel_w", 3},
                        {"stride_d", 1}, {"stride_h", 2}, {"stride_w", 1}, {"padding_h", 1}, {"dilation_w", 2}, {"ceil_mode", true},
                        {"levels", 2}}},
    // Products of integers in [-4, 4] (at most 16): an input element sums at most KH * KW * M of
    // them (at most 3 * 3 * 3 = 27 here), a filter element N * OH * OW (at most 2 * 11 * 11 = 242), all
    // below 2^24 / 16: exact in f32 in any order. M = 1 and M > 1, strides, dilation, both paddings.
    {"depthwise_conv2d_bwd_data", {{"n", 2}, {"h", 9}, {"w", 9}, {"c", 4}, {"multiplier", 3}, {"kh", 3}, {"kw", 3}}},
    {"depthwise_conv2d_bwd_data", {{"n", 2}, {"h", 11}, {"w", 10}, {"c", 3}, {"kh", 5}, {"kw", 3}, {"stride_h", 2}, {"dilation_w", 2}, {"padding", "VALID"}}},
    {"depthwise_conv2d_bwd_filter", {{"n", 2}, {"h", 11}, {"w", 11}, {"c", 4}, {"multiplier", 2}, {"kh", 3}, {"kw", 3}}},
    {"depthwise_conv2d_bwd_filter", {{"n", 2}, {"h", 12}, {"w", 12}, {"c", 2}, {"multiplier", 3}, {"kh", 3}, {"kw", 3}, {"stride_h", 2}, {"stride_w", 2}, {"dilation_h", 2}}},
    // Log-space arithmetic has no exact inputs: every state is a logarithm of a sum of exps. What
    // this test asks of every op is that its variants differ in the order of additions only, so
    // ctc_loss_bwd's exact fill takes the race away instead (kernels/ctc/ctc_ops.cpp): the labels of
    // a target are distinct, so each output receives its base value and at most one label term,
    // and every variant must give the same bits, recursions and terms included. 32 labels of 39
    // classes, 64 steps.
    {"ctc_loss_bwd", {{"time", 64}, {"batch", 3}, {"classes", 40}, {"target_length", 32}}},
    {"ctc_loss_bwd", {{"time", 80}, {"batch", 4}, {"classes", 9}, {"target_length", 20}, {"lengths", "varying"}}},
    // 8192 values into 16 bins: about 450 adds per bin.
    {"bincount", {{"n", 8192}, {"bins", 16}}},
    {"bincount_weighted", {{"n", 8192}, {"bins", 16}}},
    // Integer gradients (and per-sample weights) into 16 rows: about 60 entries per row and
    // feature, sums far below 2^24; max adds integers in T at the first of many tied maxima (the
    // exact weight is small integers). mean divides by bag sizes, inexact: left to the tolerance.
    {"embedding_bag_bwd", {{"num_embeddings", 16}, {"dim", 8}, {"indices", 1024}, {"bags", 64}}},
    {"embedding_bag_bwd", {{"num_embeddings", 16}, {"dim", 8}, {"indices", 1024}, {"bags", 64}, {"per_sample_weights", true}, {"padding_idx", 3}}},
    {"embedding_bag_bwd", {{"num_embeddings", 16}, {"dim", 8}, {"indices", 1024}, {"bags", 256}, {"mode", "max"}, {"padding_idx", 0}}},
    // Integer log-probabilities and weights (1 to 4): the terms and weights sum exactly, and every
    // variant then divides the same two sums. [N, C] and [N, C, H, W] (64 blocks), mean and sum.
    {"nll_loss", {{"n", 1000}, {"classes", 7}, {"weighted", true}, {"ignored_percent", 10}}},
    {"nll_loss", {{"n", 64}, {"classes", 5}, {"h", 8}, {"w", 8}, {"weighted", true}, {"ignored_percent", 10}, {"reduction", "sum"}}},
    // The exact logits make log_softmax exact in f32 (loss_ops.cpp: one logit 0, the others -128 k).
    {"softmax_cross_entropy", {{"n", 1000}, {"classes", 7}, {"weighted", true}, {"ignored_percent", 10}}},
    {"softmax_cross_entropy", {{"n", 64}, {"classes", 5}, {"h", 8}, {"w", 8}, {"ignored_percent", 10}, {"reduction", "sum"}}},
    // No sums across outputs: every variant computes each element, window or row with the same
    // code, so exact inputs only confirm it (the weight sum of the gradient's mean is one order).
    {"relu", {{"n", 4}, {"h", 8}, {"w", 8}, {"c", 5}}},
    {"relu_grad", {{"n", 4}, {"h", 8}, {"w", 8}, {"c", 5}}},
    {"maxpool2d", {{"n", 2}, {"h", 16}, {"w", 16}, {"c", 4}, {"ksize_h", 3}, {"ksize_w", 3}, {"stride_h", 1}, {"stride_w", 1}, {"padding", "SAME"}, {"levels", 3}}},
    {"softmax_cross_entropy_grad", {{"n", 1000}, {"classes", 7}, {"weighted", true}, {"ignored_percent", 10}}},
    {"softmax_cross_entropy_grad", {{"n", 64}, {"classes", 5}, {"h", 8}, {"w", 8}, {"ignored_percent", 10}, {"reduction", "sum"}}},
    {"sgd_update", {{"n", 10007}, {"lr", 0.5}}},
    // Exact x rows (norm_ops.cpp: pairs +-2^k) with epsilon 0 make each row's (x - mean) rstd
    // exactly +-1, so the parameter gradients' row sums are exact in any order; the row-by-row ops
    // compute each row with one code.
    {"layer_norm", {{"rows", 37}, {"dim", 24}, {"epsilon", 0.0}}},
    {"layer_norm_grad_input", {{"rows", 37}, {"dim", 24}, {"epsilon", 0.0}}},
    {"layer_norm_grad_gamma", {{"rows", 1000}, {"dim", 10}, {"epsilon", 0.0}}},
    {"layer_norm_grad_beta", {{"rows", 1000}, {"dim", 10}}},
};

TEST(KernelAgreement, AllVariantsAgreeBitForBitOnExactInputs) {
  std::set<std::string> covered;
  for (const auto& [op, params] : kExactConfigs) {
    const CatalogConfig cc = config(op, params);
    const auto inputs = make_inputs(*cc.op, cc.problem, 7, FillMode::exact);
    const std::string ref = digest(run_variant(op, "cpu.serial", cc.problem, inputs));
    for (const auto* v : cpu_variants(op))
      for (unsigned t : {1u, 3u})
        EXPECT_EQ(digest(run_variant(op, v->name, cc.problem, inputs, t)), ref) << op << "/" << v->name << " " << params.dump();
    covered.insert(op);
  }
  EXPECT_EQ(covered.size(), Registry::global().ops().size()) << "every op needs an exact config";
}

// What an f32 enumerator in scatter form emits over `sources`: (target, value bits) pairs, sorted.
using Contribution = std::pair<std::size_t, std::uint32_t>;
template <class Enumerate>
std::vector<Contribution> contributions(const Enumerate& en, std::size_t sources) {
  struct Collect {
    std::vector<Contribution>* out;
    void operator()(std::size_t t, float v) const {
      std::uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      out->emplace_back(t, bits);
    }
  };
  std::vector<Contribution> out;
  Collect collect{&out};
  for (std::size_t s = 0; s < sources; ++s) en(s, collect);
  std::sort(out.begin(), out.end());
  return out;
}

// cuda.atomic's conv2d_bwd_data enumerates a thread per tap instead of per position: it must
// emit exactly the same contributions (targets and value bits), only in another order.
TEST(KernelAgreement, ConvBwdDataTapSplitEmitsTheSameContributions) {
  // Every f32 config of the default catalogue (the emitters only run here: cheap in any build).
  const Catalog cat = default_catalog(Registry::global());
  int configs = 0;
  for (const auto& cc : cat.configs) {
    if (cc.op->name != "conv2d_bwd_data" || cc.dtype != DType::f32) continue;
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    const auto& g = cc.problem.geom<conv::Geometry>();
    const auto* w = inputs[0].as<float>();
    const auto* dy = inputs[1].as<float>();
    const conv::BwdDataTapSplit<float> split{g, w, dy};
    const auto by_position = contributions(conv::BwdDataTaps<float>{g, w, dy}, conv::positions(g));
    ASSERT_FALSE(by_position.empty()) << cc.name;
    EXPECT_EQ(by_position, contributions(split, conv::positions(g) * split.taps_per_position())) << cc.name;
    ++configs;
  }
  EXPECT_GE(configs, 3);
}

// cuda.atomic's depthwise_conv2d_bwd_data splits each out_backprop element's taps into sources of
// their own (split_taps): it must emit exactly the reference's contributions (targets and value
// bits), only in another order; bwd_filter's atomic takes the reference's sources unsplit.
template <bool kToFilter>
std::size_t expect_split_taps_emit_the_same(const CatalogConfig& cc, const std::vector<HostTensor>& inputs) {
  const auto& g = cc.problem.geom<depthwise::Geometry>();
  const depthwise::Grads<float, kToFilter> ref{g, inputs[0].as<float>(), inputs[1].as<float>(), false};
  const depthwise::Grads<float, kToFilter> by_tap{g, inputs[0].as<float>(), inputs[1].as<float>(), true};
  EXPECT_EQ(by_tap.sources(), ref.sources() * static_cast<std::size_t>(depthwise::taps(g)));
  const auto whole = contributions(ref, ref.sources());
  EXPECT_EQ(whole, contributions(by_tap, by_tap.sources())) << cc.op->name << "/" << cc.name;
  return whole.size();
}

TEST(KernelAgreement, DepthwiseTapSplitEmitsTheSameContributions) {
  const Catalog cat = default_catalog(Registry::global());
  int configs = 0;
  for (const auto& cc : cat.configs) {
    if (cc.op->family != "depthwise" || cc.dtype != DType::f32) continue;
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    const std::size_t n = cc.op->name == "depthwise_conv2d_bwd_data" ? expect_split_taps_emit_the_same<false>(cc, inputs)
                                                                     : expect_split_taps_emit_the_same<true>(cc, inputs);
    EXPECT_GT(n, 0u) << cc.name;
    ++configs;
  }
  EXPECT_GE(configs, 6);
}

}  // namespace
}  // namespace d9m
