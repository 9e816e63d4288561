// cuDNN variants of ctc_loss_bwd: cudnnCTCLoss_v8 with CUDNN_CTC_LOSS_ALGO_DETERMINISTIC
// (cudnn.ctc_deterministic) and CUDNN_CTC_LOSS_ALGO_NON_DETERMINISTIC (cudnn.ctc_nondeterministic),
// called as PyTorch's _cudnn_ctc_loss_tensor calls it (aten/src/ATen/native/cudnn/LossCTC.cpp):
// log_probs [T, N, C] passed as cuDNN's activations with CUDNN_LOSS_NORMALIZATION_SOFTMAX (cuDNN
// applies the softmax and returns the gradient in its input: softmax(log_probs) - gamma =
// exp(log_probs) - gamma, ctc.h's function at grad_out = 1), labels, label lengths and input
// lengths in device memory (the [N, S] targets packed to their lengths first), a descriptor from
// cudnnSetCTCLossDescriptor_v9 (float, CUDNN_CTC_ZERO_OOB_GRADIENTS: the fill's targets always
// fit), workspace from cudnnGetCTCLossWorkspaceSize_v8. cuDNN has no upstream gradient: the result
// is multiplied by grad_out[n] afterwards, as PyTorch's _cudnn_ctc_loss_backward does. The output
// is zeroed before the call, so steps past an input hold 0 unless cuDNN writes them.
//
// Limits: cuDNN computes CTC in float only (its API reference: another compute or data type is
// CUDNN_STATUS_NOT_SUPPORTED), and its reference makes label lengths over 256 CUDNN_STATUS_BAD_PARAM;
// 256 itself failed with CUDNN_STATUS_NOT_SUPPORTED (pytorch#53505), so PyTorch sends only targets
// shorter than 256, and so does d9m. Any other limit is found by a real attempt in prepare(): the
// workspace query, then one call on a valid problem of the config's shape.
#include <memory>
#include <vector>

#include "kernels/common/cudnn_util.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/ctc/ctc.h"

namespace d9m::ctc {
namespace {

using CtcLossDesc = cudnn::Owned<cudnnCTCLossDescriptor_t, cudnnCreateCTCLossDescriptor, cudnnDestroyCTCLossDescriptor>;

// The longest target PyTorch gives cuDNN (LossCTC.cpp: target_lengths[b] < 256).
constexpr std::int64_t kMaxLabels = 255;

struct State {
  cudnn::Handle handle;
  cudnn::TensorDesc probs;  // [T, N, C], also the gradient's
  CtcLossDesc ctc;
  cudnnCTCLossAlgo_t algo{};
  DeviceMemory workspace, labels, costs;
};

// The cuDNN call itself: activations, packed labels, lengths, costs, the gradient.
void call(const State& st, const void* activations, const void* labels, const void* label_lengths, const void* input_lengths,
          void* gradient) {
  D9M_CUDNN_SUPPORTED(cudnnCTCLoss_v8(st.handle.get(), st.algo, st.ctc.get(), st.probs.get(), activations,
                                      static_cast<const int*>(labels), static_cast<const int*>(label_lengths),
                                      static_cast<const int*>(input_lengths), st.costs.get(), st.probs.get(), gradient,
                                      st.workspace.bytes(), st.workspace.get()));
}

Prepared prepare(cudnnCTCLossAlgo_t algo, const Problem& p, const ExecContext& exec) {
  const auto& g = p.geom<Geometry>();
  auto st = std::make_shared<State>();
  st->algo = algo;
  const auto stream = static_cast<cudaStream_t>(exec.stream);
  D9M_CUDNN_CHECK(cudnnSetStream(st->handle.get(), stream));
  const auto I = cudnn::descriptor_int;
  const int dims[3] = {I(g.time), I(g.batch), I(g.classes)};
  const int strides[3] = {I(g.batch * g.classes), I(g.classes), 1};
  D9M_CUDNN_SUPPORTED(cudnnSetTensorNdDescriptor(st->probs.get(), CUDNN_DATA_FLOAT, 3, dims, strides));
  D9M_CUDNN_SUPPORTED(cudnnSetCTCLossDescriptor_v9(st->ctc.get(), CUDNN_DATA_FLOAT, CUDNN_LOSS_NORMALIZATION_SOFTMAX,
                                                   CUDNN_CTC_ZERO_OOB_GRADIENTS, I(g.max_target)));
  std::size_t workspace_bytes = 0;
  const cudnnStatus_t ws = cudnnGetCTCLossWorkspaceSize_v8(st->handle.get(), algo, st->ctc.get(), st->probs.get(), st->probs.get(),
                                                           &workspace_bytes);
  if (ws != CUDNN_STATUS_SUCCESS) throw Unsupported("cuDNN: cudnnGetCTCLossWorkspaceSize_v8: " + cudnn::status_text(ws));
  const auto elements = static_cast<std::size_t>(g.time * g.batch * g.classes);
  st->workspace = DeviceMemory(workspace_bytes);
  st->labels = DeviceMemory(static_cast<std::size_t>(g.batch * g.max_target) * sizeof(int));
  st->costs = DeviceMemory(static_cast<std::size_t>(g.batch) * sizeof(float));
  // The attempt, on a valid problem of this shape: uniform activations (zeros), every target S
  // labels of class 1 (the most steps a target of S labels can need, 2S - 1 <= T), every input T
  // steps long.
  DeviceMemory activations(elements * sizeof(float)), gradient(elements * sizeof(float));
  DeviceMemory label_lengths(static_cast<std::size_t>(g.batch) * sizeof(int)), input_lengths(label_lengths.bytes());
  D9M_CUDA_CHECK(cudaMemsetAsync(activations.get(), 0, activations.bytes(), stream));
  const std::vector<int> ones(static_cast<std::size_t>(g.batch * g.max_target), 1), s(static_cast<std::size_t>(g.batch), I(g.max_target)),
      t(static_cast<std::size_t>(g.batch), I(g.time));
  D9M_CUDA_CHECK(cudaMemcpyAsync(st->labels.get(), ones.data(), st->labels.bytes(), cudaMemcpyHostToDevice, stream));
  D9M_CUDA_CHECK(cudaMemcpyAsync(label_lengths.get(), s.data(), label_lengths.bytes(), cudaMemcpyHostToDevice, stream));
  D9M_CUDA_CHECK(cudaMemcpyAsync(input_lengths.get(), t.data(), input_lengths.bytes(), cudaMemcpyHostToDevice, stream));
  call(*st, activations.get(), st->labels.get(), label_lengths.get(), input_lengths.get(), gradient.get());
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {st, std::nullopt};
}

// targets [N, S] to cuDNN's concatenation of each target's first target_lengths[n] labels.
__global__ void pack_labels_kernel(const std::int32_t* targets, const std::int32_t* target_lengths, std::int64_t batch,
                                   std::int64_t max_target, int* packed) {
  const std::int64_t n = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (n >= batch) return;
  std::int64_t offset = 0;
  for (std::int64_t m = 0; m < n; ++m) offset += target_lengths[m];
  for (std::int64_t j = 0; j < target_lengths[n]; ++j) packed[offset + j] = targets[n * max_target + j];
}

// grad[t, n, c] *= grad_out[n].
__global__ void scale_kernel(float* grad, const float* grad_out, std::int64_t batch, std::int64_t classes, std::int64_t elements) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < elements) grad[i] = grad[i] * grad_out[i / classes % batch];
}

void run(const KernelArgs& a) {
  const auto& st = *static_cast<const State*>(a.state);
  const auto& g = a.problem.geom<Geometry>();
  const cudaStream_t s = static_cast<cudaStream_t>(a.exec.stream);
  pack_labels_kernel<<<blocks_for(static_cast<std::size_t>(g.batch)), 256, 0, s>>>(
      a.in<std::int32_t>(1), a.in<std::int32_t>(3), g.batch, g.max_target, static_cast<int*>(st.labels.get()));
  D9M_CUDA_CHECK_LAUNCH();
  D9M_CUDA_CHECK(cudaMemsetAsync(a.output, 0, a.problem.output.bytes(), s));
  call(st, a.inputs[0], st.labels.get(), a.inputs[3], a.inputs[2], a.output);
  const auto elements = static_cast<std::size_t>(a.problem.output.numel());
  scale_kernel<<<blocks_for(elements), 256, 0, s>>>(a.out<float>(), a.in<float>(4), g.batch, g.classes,
                                                    static_cast<std::int64_t>(elements));
  D9M_CUDA_CHECK_LAUNCH();
}

std::optional<std::string> limits(const Problem& p) {
  const auto& g = p.geom<Geometry>();
  if (p.dtype != DType::f32)
    return std::string("cuDNN's CTC loss computes in float only (another compute or data type is CUDNN_STATUS_NOT_SUPPORTED)");
  if (g.max_target > kMaxLabels)
    return "targets of " + std::to_string(g.max_target) + " labels: cuDNN's CTC loss documents label lengths over 256 as "
           "CUDNN_STATUS_BAD_PARAM and refused 256 (pytorch#53505); PyTorch gives it targets shorter than 256 only";
  return std::nullopt;
}

VariantDef variant(const char* name, cudnnCTCLossAlgo_t algo, Claim claim) {
  return {.op = "ctc_loss_bwd", .name = name, .backend = Backend::cuda, .role = Role::vendor, .claim = std::move(claim),
          .unsupported = limits, .run = run,
          .prepare = [algo](const Problem& p, const ExecContext& e) { return prepare(algo, p, e); }};
}

}  // namespace

D9M_REGISTER_VARIANTS({variant("cudnn.ctc_deterministic", CUDNN_CTC_LOSS_ALGO_DETERMINISTIC,
                               {Determinism::deterministic, ClaimSource::vendor_doc,
                                "CUDNN_CTC_LOSS_ALGO_DETERMINISTIC: cuDNN's API reference documents this cudnnCTCLossAlgo_t "
                                "as giving reproducible results (PyTorch selects it under torch.backends.cudnn.deterministic)"}),
                       variant("cudnn.ctc_nondeterministic", CUDNN_CTC_LOSS_ALGO_NON_DETERMINISTIC,
                               {Determinism::nondeterministic, ClaimSource::vendor_doc,
                                "CUDNN_CTC_LOSS_ALGO_NON_DETERMINISTIC: cuDNN's API reference does not guarantee reproducible "
                                "results for this cudnnCTCLossAlgo_t"})});

}  // namespace d9m::ctc
