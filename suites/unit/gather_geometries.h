// Random geometries for the gather forms (cpu.gather, cuda.gather), which claim cpu.serial's
// bits: what the catalogue's few shapes do not reach (downsampling and upsampling by odd factors,
// align_corners, extents of 1, windows wider than their stride, dilation, SAME padding, tied
// maxima; scatter indices sorted across the sort's chunk and range edges; matmul's layouts; attention's
// sequences). gather_test.cpp runs them on the CPU, gpu_test.cpp on the device.
#pragma once
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace d9m::test {

// (op, params) pairs, the same on every call.
inline std::vector<std::pair<std::string, nlohmann::json>> gather_geometries() {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  std::mt19937 rng(11);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 60; ++i) {
    const bool align = i % 3 == 1, half = i % 3 == 0;  // the three coordinate rules TF allows
    const nlohmann::json params = {{"n", pick(1, 2)},        {"h", pick(1, 9)},       {"w", pick(1, 9)},
                                   {"c", pick(1, 3)},        {"out_h", pick(1, 23)},  {"out_w", pick(1, 23)},
                                   {"align_corners", align}, {"half_pixel_centers", half}};
    out.emplace_back("resize_bilinear_grad", params);
    out.emplace_back("resize_nearest_grad", params);
  }
  for (int i = 0; i < 60; ++i) {
    const int kh = pick(1, 4), kw = pick(1, 4);
    out.emplace_back("maxpool2d_bwd",
                     nlohmann::json{{"n", pick(1, 2)},        {"h", pick(kh, 11)},      {"w", pick(kw, 11)},
                                    {"c", pick(1, 3)},        {"ksize_h", kh},          {"ksize_w", kw},
                                    {"stride_h", pick(1, 3)}, {"stride_w", pick(1, 3)}, {"padding", i % 2 ? "SAME" : "VALID"},
                                    {"levels", i % 3 == 0 ? 3 : 0}});  // few levels: many tied maxima
  }
  for (int i = 0; i < 40; ++i) {
    const int kh = pick(1, 3), kw = pick(1, 3), dh = pick(1, 2), dw = pick(1, 2);
    const nlohmann::json params = {{"n", pick(1, 2)},        {"h", pick((kh - 1) * dh + 1, 9)}, {"w", pick((kw - 1) * dw + 1, 9)},
                                   {"ci", pick(1, 3)},       {"co", pick(1, 3)},                {"kh", kh},
                                   {"kw", kw},               {"stride_h", pick(1, 3)},          {"stride_w", pick(1, 3)},
                                   {"dilation_h", dh},       {"dilation_w", dw},                {"padding", i % 2 ? "SAME" : "VALID"}};
    out.emplace_back("conv2d_bwd_data", params);
    out.emplace_back("conv2d_bwd_filter", params);
  }
  // The scatter family's gather sorts rows by destination in chunks of 16384 rows and at most 256
  // destination ranges: geometries across both edges (several chunks; more destinations than
  // ranges, so that some ranges are empty), heavy collisions, segment ids dropped, depth 1.
  for (int i = 0; i < 30; ++i) {
    const int rows = i % 5 == 0 ? pick(257, 700) : pick(1, 40), depth = pick(1, 5);
    const int updates = i % 4 == 0 ? pick(16385, 40000) : pick(1, 300);
    out.emplace_back("scatter_add", nlohmann::json{{"rows", rows}, {"depth", depth}, {"updates", updates},
                                                   {"index_range", i % 3 == 0 ? pick(1, 3) : 0}});
    out.emplace_back("scatter_nd_add", nlohmann::json{{"dim0", pick(1, 30)}, {"dim1", pick(1, 30)}, {"depth", depth},
                                                      {"updates", updates}, {"index_range", i % 3 == 0 ? pick(1, 3) : 0}});
    out.emplace_back("unsorted_segment_sum", nlohmann::json{{"rows", updates}, {"depth", depth}, {"num_segments", rows}});
  }
  // crop_and_resize_grad_image: boxes flipped and partly outside the image (the fill's), extents
  // and crops of 1 (where a sample's top and bottom tap coincide), several boxes per image.
  for (int i = 0; i < 40; ++i)
    out.emplace_back("crop_and_resize_grad_image",
                     nlohmann::json{{"batch", pick(1, 3)}, {"h", pick(1, 9)}, {"w", pick(1, 9)}, {"c", pick(1, 3)}, {"boxes", pick(1, 12)},
                                    {"crop_h", pick(1, 6)}, {"crop_w", pick(1, 6)}, {"method", i % 3 == 2 ? "nearest" : "bilinear"}});
  // matmul's gather (CPU only): extents of 1, K across the split-K variants' chunk of 256, every
  // layout, and batched.
  for (int i = 0; i < 20; ++i) {
    const char* layout = i % 3 == 0 ? "NN" : i % 3 == 1 ? "TN" : "NT";
    out.emplace_back("matmul", nlohmann::json{{"m", pick(1, 9)}, {"n", pick(1, 9)}, {"k", i % 4 == 0 ? pick(257, 700) : pick(1, 40)},
                                              {"layout", layout}});
    out.emplace_back("matmul_batched", nlohmann::json{{"batch", pick(1, 3)}, {"m", pick(1, 7)}, {"n", pick(1, 7)},
                                                      {"k", pick(1, 300)}, {"layout", layout}});
  }
  // sdpa_bwd's gather (CPU only): one query or key, sequences across the key block of 64, causal
  // with more keys than queries and fewer.
  for (int i = 0; i < 20; ++i)
    out.emplace_back("sdpa_bwd", nlohmann::json{{"batch", pick(1, 2)}, {"heads", pick(1, 2)}, {"seq_q", i % 5 == 0 ? 1 : pick(1, 40)},
                                                {"seq_kv", i % 5 == 1 ? 1 : pick(1, 100)}, {"head_dim", pick(1, 8)},
                                                {"causal", i % 2 == 0}});
  return out;
}

}  // namespace d9m::test
