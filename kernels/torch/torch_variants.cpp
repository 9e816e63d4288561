// PyTorch's own kernels as variants of the catalogue ops PyTorch has (issue 14 item 5): each op
// gets `torch.default` (PyTorch as it runs unasked) and `torch.deterministic` (under
// torch.use_deterministic_algorithms(True) and cudnn.deterministic). They have no code here: the
// torch backend's executor (harness/exec/torch_executor.h) hands the op, its parameters and
// d9m's inputs to bindings/python/d9m_torch/worker.py, whose table (d9m_torch/ops.py) maps each
// op onto the PyTorch call a framework user makes. That table and this list must name the same
// ops; suites/unit/torch_backend_test.cpp checks it, and checks each against cpu.serial.
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace d9m {
namespace {

std::vector<VariantDef> torch_variants() {
  static const char* const ops[] = {
      "adaptive_avg_pool2d_bwd", "adaptive_max_pool2d_bwd", "avg_pool3d_bwd", "bias_add_grad", "bincount",
      "bincount_weighted", "conv2d_bwd_data", "conv2d_bwd_filter", "ctc_loss_bwd", "cumsum", "embedding_bag_bwd",
      "matmul", "matmul_batched", "max_pool3d_bwd", "maxpool2d_bwd", "nll_loss", "reduce_sum", "reflection_pad2d_bwd",
      "relu", "relu_grad", "replication_pad2d_bwd", "resampler_grad_data", "resize_bicubic_grad", "resize_bilinear_grad",
      "resize_trilinear_grad", "scatter_add", "scatter_nd_add", "sdpa", "sdpa_bwd", "sgd_update", "softmax_cross_entropy",
      "softmax_cross_entropy_grad", "unsorted_segment_sum"};
  std::vector<VariantDef> out;
  for (const char* op : ops) {
    // The registered claims are what holds on any device; on CUDA the worker states PyTorch's
    // documented claim for torch.default where its reproducibility notes make one.
    out.push_back({.op = op,
                   .name = "torch.default",
                   .backend = Backend::torch,
                   .role = Role::framework,
                   .claim = {Determinism::unknown, ClaimSource::vendor_doc,
                             "PyTorch's default algorithms: its reproducibility notes make no claim for this op on this device"}});
    out.push_back({.op = op,
                   .name = "torch.deterministic",
                   .backend = Backend::torch,
                   .role = Role::framework,
                   .claim = {Determinism::deterministic, ClaimSource::vendor_doc,
                             "torch.use_deterministic_algorithms(True): PyTorch runs a deterministic algorithm or raises"}});
  }
  return out;
}

}  // namespace

D9M_REGISTER_VARIANTS(torch_variants());

}  // namespace d9m
