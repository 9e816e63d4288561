// The registry as linked into this binary: catches a family whose registration the linker
// dropped, a catalogue naming what does not exist, and claims that lack a reason.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/catalog.h"
#include "harness/core/files.h"
#include "kernels/conv/conv_cudnn.h"
#include "kernels/registry.h"

namespace d9m {
namespace {

// The ops of DESIGN.md's table. A family dropped by the linker loses its ops here.
const std::set<std::string> kDesignOps = {
    "bias_add",        "bias_add_grad",       "conv2d",               "conv2d_bwd_data",      "conv2d_bwd_filter",
    "maxpool2d_bwd",   "resize_bilinear",     "resize_bilinear_grad", "resize_nearest",
    "resize_nearest_grad", "scatter_add",     "scatter_nd_add",       "unsorted_segment_sum",
    "crop_and_resize", "crop_and_resize_grad_image", "crop_and_resize_grad_boxes",
    // Phase 2 (issue 12): the libraries real workloads call.
    "matmul", "matmul_batched", "symv", "spmv", "spmm", "reduce_sum", "cumsum", "segmented_reduce",
    "sdpa", "sdpa_bwd",
    // Issue 13: the remaining atomicAdd sources.
    "segment_sum", "segment_mean", "segment_prod", "segment_max", "bincount", "bincount_weighted",
    "sparse_dense_matmul", "dilation2d_bwd_input", "dilation2d_bwd_filter",
    "resampler_grad_data", "resampler_grad_warp", "depthwise_conv2d_bwd_data", "depthwise_conv2d_bwd_filter",
    // Issue 13 item 2: the ops framework users hit most, among them the PyTorch backward ops that
    // still raise in deterministic mode.
    "resize_bicubic_grad", "resize_trilinear_grad", "reflection_pad2d_bwd", "replication_pad2d_bwd",
    "adaptive_avg_pool2d_bwd", "adaptive_max_pool2d_bwd", "avg_pool3d_bwd", "max_pool3d_bwd",
    "embedding_bag_bwd", "nll_loss", "softmax_cross_entropy", "ctc_loss_bwd",
    // The steps of a training-step pipeline (a small CNN's forward, loss, backward and update)
    // that the catalogue lacked.
    "relu", "relu_grad", "maxpool2d", "softmax_cross_entropy_grad", "sgd_update",
    // An attention block's training step (issue 14): layer norm and its three gradients.
    "layer_norm", "layer_norm_grad_input", "layer_norm_grad_gamma", "layer_norm_grad_beta"};

// Ops that accumulate (or, for bias_add, whose atomic variant shows that two commutative adds
// stay deterministic): these have a cpu.atomic variant. The others: forward ops that gather, and
// ops with no sum across outputs at all (elementwise relu, relu_grad and sgd_update, maxpool2d's
// selection, softmax_cross_entropy_grad's independent rows after one fixed-order weight sum, layer
// norm and its input gradient, whose sums stay within a row), where no framework kernel uses
// atomics and an atomic variant would have nothing to race on.
const std::set<std::string> kForwardOnly = {"resize_bilinear", "resize_nearest", "crop_and_resize", "symv", "sdpa",
                                            "relu", "relu_grad", "maxpool2d", "softmax_cross_entropy_grad", "sgd_update",
                                            "layer_norm", "layer_norm_grad_input"};

TEST(Registry, HoldsEveryOpOfTheDesign) {
  for (const auto& name : kDesignOps) EXPECT_NE(Registry::global().find_op(name), nullptr) << name;
  EXPECT_EQ(Registry::global().ops().size(), kDesignOps.size());
}

TEST(Registry, EveryOpHasItsCpuVariants) {
  for (const auto& name : kDesignOps) {
    EXPECT_NE(Registry::global().find_variant(name, "cpu.serial"), nullptr) << name;
    EXPECT_NE(Registry::global().find_variant(name, "cpu.ordered"), nullptr) << name;
    EXPECT_EQ(Registry::global().find_variant(name, "cpu.atomic") != nullptr, !kForwardOnly.count(name)) << name;
  }
}

#if defined(D9M_WITH_CUDA)
TEST(Registry, ACudaBuildHoldsTheGpuVariants) {
  for (const auto& name : kDesignOps) {
    if (name == "symv") {  // there only for cuBLAS's atomics switch: no kernels of d9m's own
      EXPECT_NE(Registry::global().find_variant(name, "cublas.symv_atomics"), nullptr);
      EXPECT_EQ(Registry::global().find_variant(name, "cublas.symv_atomics")->claim.determinism, Determinism::nondeterministic);
      continue;
    }
    EXPECT_NE(Registry::global().find_variant(name, "cuda.ordered"), nullptr) << name;
    EXPECT_EQ(Registry::global().find_variant(name, "cuda.atomic") != nullptr, !kForwardOnly.count(name)) << name;
  }
  // The legacy backprop algorithms, for conv2d's gradients and the depthwise ones (one
  // implementation, kernels/conv/conv_cudnn.cu): the same algorithms with the same documented claims.
  for (const char* op : {"conv2d_bwd_data", "conv2d_bwd_filter", "depthwise_conv2d_bwd_data", "depthwise_conv2d_bwd_filter"})
    for (int k = 0; k < 6; ++k) {
      const auto* v = Registry::global().find_variant(op, "cudnn.algo" + std::to_string(k));
      ASSERT_NE(v, nullptr) << op << k;
      EXPECT_EQ(v->role, Role::vendor);
      EXPECT_EQ(v->claim.source, ClaimSource::vendor_doc);
      EXPECT_TRUE(v->prepare) << op << k << ": support and cuDNN's own claim are decided at prepare";
      const std::string conv_op = std::string(op).find("bwd_data") != std::string::npos ? "conv2d_bwd_data" : "conv2d_bwd_filter";
      const auto* plain = Registry::global().find_variant(conv_op, v->name);
      EXPECT_EQ(v->claim.determinism, plain->claim.determinism) << op << k;
      EXPECT_EQ(v->claim.reason, plain->claim.reason) << op << k;
    }
  EXPECT_NE(Registry::global().find_variant("conv2d_bwd_filter", "cudnn.algo6"), nullptr);
  EXPECT_NE(Registry::global().find_variant("depthwise_conv2d_bwd_filter", "cudnn.algo6"), nullptr);
  EXPECT_EQ(Registry::global().find_variant("depthwise_conv2d_bwd_data", "cudnn.algo0")->claim.determinism, Determinism::nondeterministic);
  EXPECT_EQ(Registry::global().find_variant("depthwise_conv2d_bwd_filter", "cudnn.algo3")->claim.determinism, Determinism::nondeterministic);
  // conv2d: every legacy forward algorithm, the autotuner, and an engine variant per graph-API
  // engine index up to kMaxForwardEngines (kernels/conv/conv_cudnn.h).
  for (int k = 0; k < 8; ++k) {
    const auto* v = Registry::global().find_variant("conv2d", "cudnn.algo" + std::to_string(k));
    ASSERT_NE(v, nullptr) << k;
    EXPECT_EQ(v->role, Role::vendor);
  }
  EXPECT_EQ(Registry::global().find_variant("conv2d", "cudnn.algo8"), nullptr);
  ASSERT_NE(Registry::global().find_variant("conv2d", "cudnn.autotune"), nullptr);
  EXPECT_EQ(Registry::global().find_variant("conv2d", "cudnn.autotune")->role, Role::autotune);
  EXPECT_EQ(Registry::global().find_variant("conv2d", "cudnn.autotune")->claim.determinism, Determinism::nondeterministic);
  int engines = 0;
  for (const auto* v : Registry::global().variants_of("conv2d"))
    if (v->name.rfind("cudnn.engine", 0) == 0) {
      EXPECT_EQ(v->role, Role::vendor);
      EXPECT_EQ(v->claim.source, ClaimSource::vendor_api);
      EXPECT_TRUE(v->prepare) << v->name << ": its claim is read from the engine's numerical notes";
      ++engines;
    }
  EXPECT_EQ(engines, conv::kMaxForwardEngines);
  for (int k = 0; k < conv::kMaxForwardEngines; ++k)
    EXPECT_NE(Registry::global().find_variant("conv2d", "cudnn.engine" + std::to_string(k)), nullptr) << k;
  EXPECT_NE(Registry::global().find_variant("maxpool2d_bwd", "cudnn.max"), nullptr);
  EXPECT_NE(Registry::global().find_variant("maxpool2d_bwd", "cudnn.max_deterministic"), nullptr);
  for (const char* v : {"cudnn.max", "cudnn.max_deterministic"}) {
    const VariantDef* pool3d = Registry::global().find_variant("max_pool3d_bwd", v);
    ASSERT_NE(pool3d, nullptr) << v;
    EXPECT_EQ(pool3d->role, Role::vendor) << v;
    EXPECT_EQ(pool3d->claim.source, ClaimSource::vendor_doc) << v;
  }
  EXPECT_EQ(Registry::global().find_variant("max_pool3d_bwd", "cudnn.max_deterministic")->claim.determinism, Determinism::deterministic);
  for (const char* op : {"adaptive_avg_pool2d_bwd", "adaptive_max_pool2d_bwd", "avg_pool3d_bwd", "max_pool3d_bwd"})
    EXPECT_EQ(Registry::global().find_variant(op, "cuda.ordered")->bit_equal_to, "cpu.serial") << op;
  // cuDNN's CTC loss, both cudnnCTCLossAlgo_t values, claims from its documentation; f64 and
  // targets of 256 labels or more refused before any call.
  for (const auto& [name, deterministic] : {std::pair{"cudnn.ctc_deterministic", true}, std::pair{"cudnn.ctc_nondeterministic", false}}) {
    const VariantDef* v = Registry::global().find_variant("ctc_loss_bwd", name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->role, Role::vendor) << name;
    EXPECT_EQ(v->claim.source, ClaimSource::vendor_doc) << name;
    EXPECT_EQ(v->claim.determinism, deterministic ? Determinism::deterministic : Determinism::nondeterministic) << name;
    ASSERT_TRUE(v->unsupported && v->prepare) << name;
    const auto ctc = [](const char* dtype, int labels) {
      const nlohmann::json cat = {{"schema", "d9m.catalog/1"},
                                  {"configs", {{{"op", "ctc_loss_bwd"}, {"name", "t"}, {"dtype", dtype},
                                                {"params", {{"time", 2 * labels}, {"batch", 1}, {"classes", 4}, {"target_length", labels}}}}}}};
      return parse_catalog(cat.dump(), "test", Registry::global()).configs.at(0).problem;
    };
    EXPECT_FALSE(v->unsupported(ctc("f32", 255)).has_value()) << name;
    EXPECT_TRUE(v->unsupported(ctc("f32", 256)).has_value()) << name;
    EXPECT_TRUE(v->unsupported(ctc("f64", 8)).has_value()) << name;
  }
  for (const char* op : {"matmul", "matmul_batched"}) {
    for (const char* v : {"cublas.default", "cublas.multistream", "cublas.multistream_ws", "cublaslt.algo0", "cublaslt.algo7"})
      EXPECT_EQ(Registry::global().find_variant(op, v)->role, Role::vendor) << op << "/" << v;
    EXPECT_EQ(Registry::global().find_variant(op, "cublas.multistream")->claim.determinism, Determinism::nondeterministic);
  }
  // cuSPARSE: one variant per algorithm of cusparseSpMV and cusparseSpMM; the documented
  // deterministic paths claim it (from the docs), every other algorithm does not. Each algorithm a
  // config may claim deterministic (the documented paths, SpMM's default in mixed precision) also
  // has its per-call control, with the same claim.
  const std::map<std::string, std::vector<std::pair<std::string, bool>>> cusparse = {
      {"spmv", {{"spmv_default", false}, {"spmv_csr_alg1", false}, {"spmv_csr_alg2", true}, {"spmv_coo_alg1", false},
                {"spmv_coo_alg2", true}}},
      {"spmm", {{"spmm_default", false}, {"spmm_csr_alg1", false}, {"spmm_csr_alg2", false}, {"spmm_csr_alg3", true},
                {"spmm_coo_alg1", false}, {"spmm_coo_alg2", true}, {"spmm_coo_alg3", false}, {"spmm_coo_alg4", false}}}};
  const std::set<std::string> with_control = {"spmv_csr_alg2", "spmv_coo_alg2", "spmm_default", "spmm_csr_alg3", "spmm_coo_alg2"};
  for (const auto& [op, algorithms] : cusparse) {
    std::size_t registered = 0, expected = 0;
    for (const auto* v : Registry::global().variants_of(op)) registered += v->name.rfind("cusparse.", 0) == 0;
    for (const auto& [alg, deterministic] : algorithms) {
      const bool controlled = with_control.count(alg) != 0;
      expected += controlled ? 2 : 1;
      for (const std::string& name : {alg, alg + "_percall"}) {
        const VariantDef* v = Registry::global().find_variant(op, "cusparse." + name);
        if (name != alg && !controlled) {
          EXPECT_EQ(v, nullptr) << op << "/" << name << ": a control for an algorithm no config claims deterministic";
          continue;
        }
        ASSERT_NE(v, nullptr) << op << "/" << name;
        EXPECT_EQ(v->role, Role::vendor) << name;
        EXPECT_EQ(v->claim.source, ClaimSource::vendor_doc) << name;
        EXPECT_EQ(v->claim.determinism, deterministic ? Determinism::deterministic : Determinism::nondeterministic) << name;
        EXPECT_TRUE(v->prepare) << name;
      }
    }
    EXPECT_EQ(registered, expected) << op;
  }
  // CUB's determinism levels (issue 12 item 5): every level is a variant, those CCCL 3.3 refuses
  // for an algorithm UNSUPPORTED on every config with the library's reason.
  for (const char* op : {"reduce_sum", "cumsum", "segmented_reduce"}) {
    for (const char* v : {"cub.default", "cub.not_guaranteed", "cub.run_to_run", "cub.gpu_to_gpu"})
      EXPECT_EQ(Registry::global().find_variant(op, v)->role, Role::vendor) << op << "/" << v;
    EXPECT_EQ(Registry::global().find_variant(op, "cuda.ordered")->bit_equal_to, "cpu.ordered") << op;
  }
  const Problem any = default_catalog(Registry::global()).configs.front().problem;
  const std::pair<const char*, const char*> refusals[] = {
      {"cumsum", "cub.run_to_run"}, {"cumsum", "cub.gpu_to_gpu"}, {"segmented_reduce", "cub.gpu_to_gpu"}};
  for (const auto& [op, v] : refusals) {
    const VariantDef* refused = Registry::global().find_variant(op, v);
    ASSERT_TRUE(refused->unsupported) << op << "/" << v;
    EXPECT_NE(refused->unsupported(any).value_or("").find("static_assert"), std::string::npos) << op << "/" << v;
    EXPECT_EQ(refused->claim.determinism, Determinism::unknown) << op << "/" << v;
  }
  EXPECT_EQ(Registry::global().find_variant("reduce_sum", "cub.not_guaranteed")->claim.determinism, Determinism::nondeterministic);
  for (const char* v : {"cub.default", "cub.run_to_run", "cub.gpu_to_gpu"})
    EXPECT_EQ(Registry::global().find_variant("reduce_sum", v)->claim.determinism, Determinism::deterministic) << v;
  // The ops the GPU issue requires to claim cross-implementation equality.
  for (const char* op : {"bias_add_grad", "scatter_add", "unsorted_segment_sum", "resize_bilinear_grad", "maxpool2d_bwd"})
    EXPECT_EQ(Registry::global().find_variant(op, "cuda.ordered")->bit_equal_to, "cpu.ordered") << op;
  for (const char* op : {"spmv", "spmm"})
    EXPECT_EQ(Registry::global().find_variant(op, "cuda.ordered")->bit_equal_to, "cpu.serial") << op;
}
#endif

TEST(Registry, HoldsEveryVariantTheDefaultCatalogueNames) {
  const Catalog cat = default_catalog(Registry::global());
  for (const auto& cc : cat.configs) {
    std::size_t selected = 0;
    for (const auto* v : Registry::global().variants_of(cc.op->name)) selected += cc.selects(*v);
    EXPECT_GE(selected, 2u) << cc.op->name << "/" << cc.name;
    for (const auto& g : cc.variant_globs) {
      if (g.rfind("cpu.", 0) != 0) continue;
      bool any = false;
      for (const auto* v : Registry::global().variants_of(cc.op->name)) any |= glob_match(g, v->name);
      EXPECT_TRUE(any) << g;
    }
  }
}

TEST(Registry, EveryVariantStatesItsClaimWithAReason) {
  for (const auto& v : Registry::global().variants()) {
    EXPECT_FALSE(v.claim.reason.empty()) << v.op << "/" << v.name;
    // A framework's kernels run in its own process (harness/exec/torch_executor.h), not here.
    EXPECT_EQ(static_cast<bool>(v.run), v.role != Role::framework) << v.op << "/" << v.name;
    EXPECT_NE(Registry::global().find_op(v.op), nullptr) << v.name << " registered for unknown op " << v.op;
    // Atomics that commute exactly (bias_add's two adds onto -0, segment_max's maximum,
    // bincount's integer counts) claim determinism; every other atomic variant races by design.
    if (v.name.find(".atomic") != std::string::npos && v.op != "bias_add" && v.op != "segment_max" && v.op != "bincount") {
      EXPECT_EQ(v.claim.determinism, Determinism::nondeterministic) << v.op;
    }
    if (!v.bit_equal_to.empty()) {
      EXPECT_NE(Registry::global().find_variant(v.op, v.bit_equal_to), nullptr) << v.op << "/" << v.name << " -> " << v.bit_equal_to;
    }
    if (v.name.find(".ordered") != std::string::npos || v.name.find(".serial") != std::string::npos) {
      EXPECT_EQ(v.claim.determinism, Determinism::deterministic) << v.op << "/" << v.name;
    }
  }
}

TEST(Registry, EveryNameThatBecomesAFileNameIsPathSafe) {
  // --save-outputs writes <op>/<config>/inputs/<argument>.npy and <variant>.npy
  // (harness/exec/saved_outputs.h): each must be one path component, never "." or "..".
  for (const auto& op : Registry::global().ops()) EXPECT_TRUE(is_path_safe_name(op.name)) << op.name;
  for (const auto& v : Registry::global().variants()) EXPECT_TRUE(is_path_safe_name(v.name)) << v.op << " " << v.name;
  for (const auto& cc : default_catalog(Registry::global()).configs)
    for (const auto& in : cc.problem.inputs) EXPECT_TRUE(is_path_safe_name(in.name)) << cc.op->name << " " << in.name;
}

}  // namespace
}  // namespace d9m
