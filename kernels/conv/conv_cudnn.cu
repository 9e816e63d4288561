// cuDNN variants of the conv backprops (conv2d's are in conv_cudnn_forward.cu), for every op that
// is a legacy cuDNN backprop (conv_cudnn_backprop.h: conv2d's gradients, the depthwise gradients
// as a grouped convolution): one variant per algorithm of the legacy API (cudnn.algo0 ... from
// cudnnConvolutionBwdDataAlgo_t / cudnnConvolutionBwdFilterAlgo_t). The static claim is cuDNN's
// documentation; at run time prepare() records cuDNN's own claim for the config (the determinism
// field of the algorithm-performance struct, where its heuristic lists the algorithm) and decides
// support by a real attempt: the workspace query, then one call on zeroed tensors, whose "not
// supported" makes the case UNSUPPORTED. As TensorFlow does, NHWC/HWIO tensors are transposed to
// NCHW/KCRS for cuDNN and back: the transposes are part of the op and timed.
#include <memory>
#include <optional>

#include "kernels/common/cudnn_util.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_cudnn_backprop.h"

namespace d9m::conv {
namespace {

// Input channels per group: the filter's C in KCRS.
std::int64_t group_inputs(const LegacyConv& lc) { return lc.g.ci / lc.groups; }

struct State {
  LegacyConv lc;
  cudnn::Handle handle;
  cudnn::TensorDesc x_desc, dy_desc;  // NCHW
  cudnn::FilterDesc w_desc;           // KCRS
  cudnn::ConvDesc conv;
  int algo = 0;
  DeviceMemory workspace;
  DeviceMemory x_nchw;   // input (filter direction) or dx (data direction)
  DeviceMemory dy_nchw;
  DeviceMemory w_kcrs;   // filter (data direction) or dw (filter direction)
};

// cuDNN's documentation (cudnn_ops.h and the API reference): backward-data ALGO_0 and
// backward-filter ALGO_0 and ALGO_3 use atomics and are nondeterministic; the others are not.
Claim documented(Direction dir, int algo) {
  const bool nd = dir == Direction::data ? algo == 0 : (algo == 0 || algo == 3);
  return {nd ? Determinism::nondeterministic : Determinism::deterministic, ClaimSource::vendor_doc,
          nd ? "cuDNN documents this algorithm as non-deterministic (atomics)" : "cuDNN documents this algorithm as deterministic"};
}

// cuDNN's own claim for this config where its heuristic lists the algorithm as usable: the
// determinism field of the perf entry. Only a claim: whether the algorithm runs is decided by
// running it (prepare), not by whether this list names it.
template <class Perf>
std::optional<Claim> listed_claim(const Perf* perf, int returned, int algo, const char* api, const std::string& doc) {
  for (int i = 0; i < returned; ++i)
    if (static_cast<int>(perf[i].algo) == algo && perf[i].status == CUDNN_STATUS_SUCCESS)
      return Claim{perf[i].determinism == CUDNN_DETERMINISTIC ? Determinism::deterministic : Determinism::nondeterministic,
                   ClaimSource::vendor_api, std::string("determinism field of ") + api + doc};
  return std::nullopt;
}

// The backward call itself, on cuDNN's copies. A "not supported" status is UNSUPPORTED.
void call(Direction dir, const State& st, DType dtype) {
  const cudnn::Scaling k(dtype);
  if (dir == Direction::data)
    D9M_CUDNN_SUPPORTED(cudnnConvolutionBackwardData(st.handle.get(), k.alpha(), st.w_desc.get(), st.w_kcrs.get(), st.dy_desc.get(),
                                                     st.dy_nchw.get(), st.conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(st.algo),
                                                     st.workspace.get(), st.workspace.bytes(), k.beta(), st.x_desc.get(),
                                                     st.x_nchw.get()));
  else
    D9M_CUDNN_SUPPORTED(cudnnConvolutionBackwardFilter(st.handle.get(), k.alpha(), st.x_desc.get(), st.x_nchw.get(), st.dy_desc.get(),
                                                       st.dy_nchw.get(), st.conv.get(),
                                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(st.algo), st.workspace.get(),
                                                       st.workspace.bytes(), k.beta(), st.w_desc.get(), st.w_kcrs.get()));
}

Prepared prepare(Direction dir, int algo, const LegacyConv& lc, const Problem& p, const ExecContext& exec) {
  const Geometry& g = lc.g;
  // cuDNN's legacy API pads symmetrically; TensorFlow's SAME padding puts an odd extra row or column after.
  if (pad_after(g.y) != g.y.pad_before || pad_after(g.x) != g.x.pad_before)
    throw Unsupported("asymmetric SAME padding: cuDNN pads both sides equally");
  auto st = std::make_shared<State>();
  st->lc = lc;
  st->algo = algo;
  const auto stream = static_cast<cudaStream_t>(exec.stream);
  D9M_CUDNN_CHECK(cudnnSetStream(st->handle.get(), stream));
  const auto I = cudnn::descriptor_int;
  const cudnnDataType_t t = cudnn::data_type(p.dtype);
  D9M_CUDNN_SUPPORTED(cudnnSetTensor4dDescriptor(st->x_desc.get(), CUDNN_TENSOR_NCHW, t, I(g.n), I(g.ci), I(g.y.in), I(g.x.in)));
  D9M_CUDNN_SUPPORTED(cudnnSetTensor4dDescriptor(st->dy_desc.get(), CUDNN_TENSOR_NCHW, t, I(g.n), I(g.co), I(g.y.out), I(g.x.out)));
  D9M_CUDNN_SUPPORTED(cudnnSetFilter4dDescriptor(st->w_desc.get(), t, CUDNN_TENSOR_NCHW, I(g.co), I(group_inputs(lc)), I(g.y.k), I(g.x.k)));
  // The compute type: float for f32, f16 and bf16 (the frameworks' choice for half data), double
  // for f64.
  D9M_CUDNN_SUPPORTED(cudnnSetConvolution2dDescriptor(st->conv.get(), I(g.y.pad_before), I(g.x.pad_before), I(g.y.stride),
                                                      I(g.x.stride), I(g.y.dilation), I(g.x.dilation), CUDNN_CROSS_CORRELATION,
                                                      p.dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
  if (lc.groups != 1) D9M_CUDNN_SUPPORTED(cudnnSetConvolutionGroupCount(st->conv.get(), I(lc.groups)));
  // f32 and f64 in plain FMA arithmetic: TF32 tensor cores (CUDNN_DEFAULT_MATH on Ampere and
  // later) would make these a different op; a TF32 audit is a separate setting, not a silent
  // default. f16 and bf16 may use tensor cores, as they do in every framework.
  const bool half = p.dtype == DType::f16 || p.dtype == DType::bf16;
  D9M_CUDNN_CHECK(cudnnSetConvolutionMathType(st->conv.get(), half ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  Prepared prepared;
  const std::string doc = "; documented: " + documented(dir, algo).reason.substr(std::string("cuDNN documents this algorithm as ").size());
  cudnnStatus_t ws = CUDNN_STATUS_SUCCESS;
  std::size_t workspace_bytes = 0;
  if (dir == Direction::data) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int returned = 0;
    D9M_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(st->handle.get(), st->w_desc.get(), st->dy_desc.get(), st->conv.get(),
                                                                st->x_desc.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf));
    prepared.claim = listed_claim(perf, returned, algo, "cudnnGetConvolutionBackwardDataAlgorithm_v7", doc);
    ws = cudnnGetConvolutionBackwardDataWorkspaceSize(st->handle.get(), st->w_desc.get(), st->dy_desc.get(), st->conv.get(),
                                                      st->x_desc.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &workspace_bytes);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int returned = 0;
    D9M_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(st->handle.get(), st->x_desc.get(), st->dy_desc.get(), st->conv.get(),
                                                                  st->w_desc.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf));
    prepared.claim = listed_claim(perf, returned, algo, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", doc);
    ws = cudnnGetConvolutionBackwardFilterWorkspaceSize(st->handle.get(), st->x_desc.get(), st->dy_desc.get(), st->conv.get(),
                                                        st->w_desc.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
                                                        &workspace_bytes);
  }
  if (ws != CUDNN_STATUS_SUCCESS) throw Unsupported("cuDNN: workspace query: " + cudnn::status_text(ws));
  const std::size_t e = dtype_size(p.dtype);
  st->workspace = DeviceMemory(workspace_bytes);
  st->x_nchw = DeviceMemory(static_cast<std::size_t>(g.n * g.ci * g.y.in * g.x.in) * e);
  st->dy_nchw = DeviceMemory(static_cast<std::size_t>(g.n * g.co * g.y.out * g.x.out) * e);
  st->w_kcrs = DeviceMemory(static_cast<std::size_t>(g.co * group_inputs(lc) * g.y.k * g.x.k) * e);
  for (const DeviceMemory* m : {&st->x_nchw, &st->dy_nchw, &st->w_kcrs})
    if (m->bytes()) D9M_CUDA_CHECK(cudaMemsetAsync(m->get(), 0, m->bytes(), stream));
  // Whether the algorithm supports the config is decided by a real attempt, on zeroed copies: an
  // algorithm the heuristic leaves out may run, and one it lists may still refuse.
  call(dir, *st, p.dtype);
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream));
  prepared.state = st;
  return prepared;
}

void run(Direction dir, const KernelArgs& a) {
  auto& st = *static_cast<State*>(a.state);
  const Geometry& g = st.lc.g;
  const std::int64_t gi = group_inputs(st.lc);
  const auto s = static_cast<cudaStream_t>(a.exec.stream);
  const DType t = a.problem.dtype;
  const std::int64_t dy_dims[4] = {g.n, g.y.out, g.x.out, g.co};
  const std::int64_t x_dims[4] = {g.n, g.y.in, g.x.in, g.ci};
  if (dir == Direction::data) {
    const std::int64_t w_dims[4] = {g.y.k, g.x.k, gi, g.co};
    cudnn::permute4(s, t, a.inputs[0], st.w_kcrs.get(), w_dims, {3, 2, 0, 1});    // HWIO -> KCRS
    cudnn::permute4(s, t, a.inputs[1], st.dy_nchw.get(), dy_dims, {0, 3, 1, 2});  // NHWC -> NCHW
    call(dir, st, t);
    const std::int64_t dx_dims[4] = {g.n, g.ci, g.y.in, g.x.in};
    cudnn::permute4(s, t, st.x_nchw.get(), a.output, dx_dims, {0, 2, 3, 1});      // NCHW -> NHWC
  } else {
    cudnn::permute4(s, t, a.inputs[0], st.x_nchw.get(), x_dims, {0, 3, 1, 2});
    cudnn::permute4(s, t, a.inputs[1], st.dy_nchw.get(), dy_dims, {0, 3, 1, 2});
    call(dir, st, t);
    const std::int64_t dw_dims[4] = {g.co, gi, g.y.k, g.x.k};
    cudnn::permute4(s, t, st.w_kcrs.get(), a.output, dw_dims, {2, 3, 1, 0});     // KCRS -> HWIO
  }
}

}  // namespace

std::vector<VariantDef> cudnn_backprop_variants(Direction dir, const std::string& op, std::function<LegacyConv(const Problem&)> describe) {
  const int count = dir == Direction::data ? static_cast<int>(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
                                           : static_cast<int>(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  std::vector<VariantDef> out;
  for (int algo = 0; algo < count; ++algo)
    out.push_back({.op = op,
                   .name = "cudnn.algo" + std::to_string(algo),
                   .backend = Backend::cuda,
                   .role = Role::vendor,
                   .claim = documented(dir, algo),
                   .run = [dir](const KernelArgs& a) { run(dir, a); },
                   .prepare = [dir, algo, describe](const Problem& p, const ExecContext& e) {
                     return prepare(dir, algo, describe(p), p, e);
                   }});
  return out;
}

namespace {

LegacyConv ungrouped(const Problem& p) { return {p.geom<Geometry>(), 1}; }

}  // namespace

D9M_REGISTER_VARIANTS(cudnn_backprop_variants(Direction::data, "conv2d_bwd_data", ungrouped));
D9M_REGISTER_VARIANTS(cudnn_backprop_variants(Direction::filter, "conv2d_bwd_filter", ungrouped));

}  // namespace d9m::conv
