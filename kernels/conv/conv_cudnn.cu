// cuDNN variants of the conv backprops (conv2d's are in conv_cudnn_forward.cu): one variant per algorithm of the legacy API
// (cudnn.algo0 ... from cudnnConvolutionBwdDataAlgo_t / cudnnConvolutionBwdFilterAlgo_t). The
// static claim is cuDNN's documentation; at run time prepare() records cuDNN's own claim for the
// config (the determinism field of the algorithm-performance struct) and turns an algorithm that
// does not support the config into UNSUPPORTED. As TensorFlow does, NHWC/HWIO tensors are
// transposed to NCHW/KCRS for cuDNN and back: the transposes are part of the op and timed.
#include <memory>

#include "kernels/common/cudnn_util.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/conv/conv.h"

namespace d9m::conv {
namespace {

enum class Direction { data, filter };

struct State {
  cudnn::Handle handle;
  cudnn::TensorDesc x_desc, dy_desc;  // NCHW
  cudnn::FilterDesc w_desc;           // KCRS
  cudnn::ConvDesc conv;
  int algo = 0;
  std::size_t workspace_bytes = 0;
  void* workspace = nullptr;
  float* x_nchw = nullptr;   // input (filter direction) or dx (data direction)
  float* dy_nchw = nullptr;
  float* w_kcrs = nullptr;   // filter (data direction) or dw (filter direction)
  ~State() {
    cudaFree(workspace);
    cudaFree(x_nchw);
    cudaFree(dy_nchw);
    cudaFree(w_kcrs);
  }
};

// cuDNN's documentation (cudnn_ops.h and the API reference): backward-data ALGO_0 and
// backward-filter ALGO_0 and ALGO_3 use atomics and are nondeterministic; the others are not.
Claim documented(Direction dir, int algo) {
  const bool nd = dir == Direction::data ? algo == 0 : (algo == 0 || algo == 3);
  return {nd ? Determinism::nondeterministic : Determinism::deterministic, ClaimSource::vendor_doc,
          nd ? "cuDNN documents this algorithm as non-deterministic (atomics)" : "cuDNN documents this algorithm as deterministic"};
}

// An algorithm cuDNN lists without success (or not at all) for this config is UNSUPPORTED.
template <class Perf>
void supported_or_throw(const Perf* perf, int returned, int algo) {
  for (int i = 0; i < returned; ++i)
    if (static_cast<int>(perf[i].algo) == algo) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS) return;
      throw Unsupported(std::string("cuDNN: ") + cudnnGetErrorString(perf[i].status));
    }
  throw Unsupported("cuDNN does not list this algorithm for the config");
}

float* device_alloc(std::size_t elements) {
  void* p = nullptr;
  D9M_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(elements, 1) * sizeof(float)));
  return static_cast<float*>(p);
}

Prepared prepare(Direction dir, int algo, const Problem& p, const ExecContext& exec) {
  const auto& g = p.geom<Geometry>();
  // cuDNN's legacy API pads symmetrically; TensorFlow's SAME padding puts an odd extra row or column after.
  if (pad_after(g.y) != g.y.pad_before || pad_after(g.x) != g.x.pad_before)
    throw Unsupported("asymmetric SAME padding: cuDNN pads both sides equally");
  auto st = std::make_shared<State>();
  st->algo = algo;
  D9M_CUDNN_CHECK(cudnnSetStream(st->handle.get(), static_cast<cudaStream_t>(exec.stream)));
  const auto I = cudnn::descriptor_int;
  D9M_CUDNN_CHECK(cudnnSetTensor4dDescriptor(st->x_desc.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, I(g.n), I(g.ci), I(g.y.in), I(g.x.in)));
  D9M_CUDNN_CHECK(cudnnSetTensor4dDescriptor(st->dy_desc.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, I(g.n), I(g.co), I(g.y.out), I(g.x.out)));
  D9M_CUDNN_CHECK(cudnnSetFilter4dDescriptor(st->w_desc.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, I(g.co), I(g.ci), I(g.y.k), I(g.x.k)));
  D9M_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(st->conv.get(), I(g.y.pad_before), I(g.x.pad_before), I(g.y.stride),
                                                  I(g.x.stride), I(g.y.dilation), I(g.x.dilation), CUDNN_CROSS_CORRELATION,
                                                  CUDNN_DATA_FLOAT));
  // Plain FP32 arithmetic: TF32 tensor cores (CUDNN_DEFAULT_MATH on Ampere and later) would make
  // these a different op; a TF32 audit is a separate setting, not a silent default.
  D9M_CUDNN_CHECK(cudnnSetConvolutionMathType(st->conv.get(), CUDNN_FMA_MATH));
  Prepared prepared;
  const std::string doc = "; documented: " + documented(dir, algo).reason.substr(std::string("cuDNN documents this algorithm as ").size());
  // cuDNN's own claim for this config: the determinism of the algorithm's perf entry.
  if (dir == Direction::data) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int returned = 0;
    D9M_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(st->handle.get(), st->w_desc.get(), st->dy_desc.get(), st->conv.get(),
                                                                st->x_desc.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf));
    supported_or_throw(perf, returned, algo);
    for (int i = 0; i < returned; ++i)
      if (perf[i].algo == algo && perf[i].status == CUDNN_STATUS_SUCCESS)
        prepared.claim = Claim{perf[i].determinism == CUDNN_DETERMINISTIC ? Determinism::deterministic : Determinism::nondeterministic,
                               ClaimSource::vendor_api, "determinism field of cudnnGetConvolutionBackwardDataAlgorithm_v7" + doc};
    const cudnnStatus_t s = cudnnGetConvolutionBackwardDataWorkspaceSize(
        st->handle.get(), st->w_desc.get(), st->dy_desc.get(), st->conv.get(), st->x_desc.get(),
        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &st->workspace_bytes);
    if (s != CUDNN_STATUS_SUCCESS) throw Unsupported("cuDNN: " + cudnn::status_text(s));
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int returned = 0;
    D9M_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(st->handle.get(), st->x_desc.get(), st->dy_desc.get(), st->conv.get(),
                                                                  st->w_desc.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf));
    supported_or_throw(perf, returned, algo);
    for (int i = 0; i < returned; ++i)
      if (perf[i].algo == algo && perf[i].status == CUDNN_STATUS_SUCCESS)
        prepared.claim = Claim{perf[i].determinism == CUDNN_DETERMINISTIC ? Determinism::deterministic : Determinism::nondeterministic,
                               ClaimSource::vendor_api, "determinism field of cudnnGetConvolutionBackwardFilterAlgorithm_v7" + doc};
    const cudnnStatus_t s = cudnnGetConvolutionBackwardFilterWorkspaceSize(
        st->handle.get(), st->x_desc.get(), st->dy_desc.get(), st->conv.get(), st->w_desc.get(),
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &st->workspace_bytes);
    if (s != CUDNN_STATUS_SUCCESS) throw Unsupported("cuDNN: " + cudnn::status_text(s));
  }
  if (st->workspace_bytes) D9M_CUDA_CHECK(cudaMalloc(&st->workspace, st->workspace_bytes));
  st->x_nchw = device_alloc(static_cast<std::size_t>(g.n * g.ci * g.y.in * g.x.in));
  st->dy_nchw = device_alloc(static_cast<std::size_t>(g.n * g.co * g.y.out * g.x.out));
  st->w_kcrs = device_alloc(static_cast<std::size_t>(g.co * g.ci * g.y.k * g.x.k));
  prepared.state = st;
  return prepared;
}

void run(Direction dir, const KernelArgs& a) {
  auto& st = *static_cast<State*>(a.state);
  const auto& g = a.problem.geom<Geometry>();
  const auto s = static_cast<cudaStream_t>(a.exec.stream);
  const float alpha = 1.0f, beta = 0.0f;
  const std::int64_t dy_dims[4] = {g.n, g.y.out, g.x.out, g.co};
  const std::int64_t x_dims[4] = {g.n, g.y.in, g.x.in, g.ci};
  if (dir == Direction::data) {
    const std::int64_t w_dims[4] = {g.y.k, g.x.k, g.ci, g.co};
    cudnn::permute4(s, a.in<float>(0), st.w_kcrs, w_dims, {3, 2, 0, 1});    // HWIO -> KCRS
    cudnn::permute4(s, a.in<float>(1), st.dy_nchw, dy_dims, {0, 3, 1, 2});  // NHWC -> NCHW
    D9M_CUDNN_SUPPORTED(cudnnConvolutionBackwardData(st.handle.get(), &alpha, st.w_desc.get(), st.w_kcrs, st.dy_desc.get(), st.dy_nchw,
                                                     st.conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(st.algo), st.workspace,
                                                     st.workspace_bytes, &beta, st.x_desc.get(), st.x_nchw));
    const std::int64_t dx_dims[4] = {g.n, g.ci, g.y.in, g.x.in};
    cudnn::permute4(s, st.x_nchw, a.out<float>(), dx_dims, {0, 2, 3, 1});   // NCHW -> NHWC
  } else {
    cudnn::permute4(s, a.in<float>(0), st.x_nchw, x_dims, {0, 3, 1, 2});
    cudnn::permute4(s, a.in<float>(1), st.dy_nchw, dy_dims, {0, 3, 1, 2});
    D9M_CUDNN_SUPPORTED(cudnnConvolutionBackwardFilter(st.handle.get(), &alpha, st.x_desc.get(), st.x_nchw, st.dy_desc.get(), st.dy_nchw,
                                                       st.conv.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(st.algo), st.workspace,
                                                       st.workspace_bytes, &beta, st.w_desc.get(), st.w_kcrs));
    const std::int64_t dw_dims[4] = {g.co, g.ci, g.y.k, g.x.k};
    cudnn::permute4(s, st.w_kcrs, a.out<float>(), dw_dims, {2, 3, 1, 0});   // KCRS -> HWIO
  }
}


// One variant per cuDNN algorithm of a direction.
std::vector<VariantDef> algorithm_variants(Direction dir, const char* op, int count) {
  std::vector<VariantDef> out;
  for (int algo = 0; algo < count; ++algo)
    out.push_back({.op = op,
                   .name = "cudnn.algo" + std::to_string(algo),
                   .backend = Backend::cuda,
                   .role = Role::vendor,
                   .claim = documented(dir, algo),
                   .run = [dir](const KernelArgs& a) { run(dir, a); },
                   .prepare = [dir, algo](const Problem& p, const ExecContext& e) { return prepare(dir, algo, p, e); }});
  return out;
}

}  // namespace

D9M_REGISTER_VARIANTS(algorithm_variants(Direction::data, "conv2d_bwd_data", CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT));
D9M_REGISTER_VARIANTS(algorithm_variants(Direction::filter, "conv2d_bwd_filter", CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT));

}  // namespace d9m::conv
