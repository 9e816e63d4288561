// cuDNN variants of conv2d, the forward convolution, in the three ways cuDNN offers it:
//
//   cudnn.algo0..7     cudnnConvolutionForward with one cudnnConvolutionFwdAlgo_t each (the legacy
//                      API). Static claim: cuDNN's documentation, whose list of non-reproducible
//                      routines names no forward algorithm. prepare() records cuDNN's own claim for
//                      the config (the determinism field of the algorithm's entry in
//                      cudnnGetConvolutionForwardAlgorithm_v7) and decides support by a real
//                      attempt: the workspace query, then one call.
//   cudnn.autotune     what TensorFlow's autotuning and PyTorch's benchmark mode do in every new
//                      process: each trial calls cudnnFindConvolutionForwardAlgorithmEx afresh
//                      (nothing cached), runs the fastest algorithm it timed, and names it
//                      (KernelArgs::chose: "algo1", or "algo1+default_math" where cuDNN timed it at
//                      another math type than the config's). A trial's time includes the search.
//                      Told to replay a choice (KernelArgs::replay: a pipeline's later steps, as a
//                      framework's later calls in one process), it runs that one without a search.
//   cudnn.engine0..127 the graph (backend) API: engine K, by global index, of the config's
//                      forward-convolution operation graph, at the engine's default knobs.
//                      prepare() records the engine's numerical notes as a vendor-api claim:
//                      CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC -> nondeterministic, otherwise
//                      deterministic. The graph API takes TensorFlow's asymmetric SAME padding
//                      (pre and post paddings), which the legacy API cannot.
//
// The graph is built with cudnn.h's backend descriptors, not the C++ frontend: it is one
// operation, an engine's global index and notes are attributes of one descriptor, the frontend's
// header costs about 55 s per translation unit, and there is no second library version for the
// fingerprint to carry.
//
// Layouts: as for the backprops (and TensorFlow at f32), NHWC and HWIO are transposed to NCHW and
// KCRS and the output back; the transposes are part of the op and timed. f16 and bf16 compute in
// float (cuDNN's PSEUDO_HALF and PSEUDO_BFLOAT16 configurations). The config's `math` is cuDNN's
// math type: default CUDNN_DEFAULT_MATH (which permits TF32 tensor cores for f32 from sm_80 on),
// tf32 CUDNN_TENSOR_OP_MATH (f32 only), fp32-strict CUDNN_FMA_MATH. Engines have no math type:
// under fp32-strict an engine noted TENSOR_CORE, DOWN_CONVERT_INPUTS or
// REDUCED_PRECISION_REDUCTION is UNSUPPORTED.
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/cudnn_util.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_cudnn.h"

namespace d9m::conv {
namespace {

constexpr int kAlgorithms = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
static_assert(kAlgorithms == 8, "cudnn.algo0..7 are cudnnConvolutionFwdAlgo_t's eight algorithms");

// The largest workspace cudnn.autotune offers the search: TensorFlow's default limit
// (TF_CUDNN_WORKSPACE_LIMIT_IN_MB, 4096). An algorithm asking for more is not a candidate.
constexpr std::size_t kAutotuneWorkspaceLimit = std::size_t{4} << 30;

// The tensors' unique ids in the graph API's variant pack.
constexpr std::int64_t kUidX = 1, kUidW = 2, kUidY = 3;

std::string algorithm_name(int algo) {
  static const char* const names[kAlgorithms] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                                 "FFT",           "FFT_TILING",            "WINOGRAD", "WINOGRAD_NONFUSED"};
  return std::string("CUDNN_CONVOLUTION_FWD_ALGO_") + (algo >= 0 && algo < kAlgorithms ? names[algo] : "?");
}

std::string math_type_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default_math";
    case CUDNN_TENSOR_OP_MATH: return "tensor_op_math";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor_op_math_allow_conversion";
    case CUDNN_FMA_MATH: return "fma_math";
  }
  return "math_type_" + std::to_string(static_cast<int>(m));
}

// cuDNN's math type for the config's math mode.
cudnnMathType_t math_type(const Problem& p) {
  if (p.math == "tf32") {
    if (p.dtype != DType::f32) throw Unsupported("math mode tf32 applies to f32 inputs");
    return CUDNN_TENSOR_OP_MATH;
  }
  if (p.math == "fp32-strict") return CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}

// What every cuDNN forward variant works with: a handle on the trial's stream, and the input,
// filter and output in cuDNN's layouts (NCHW, KCRS, NCHW), zeroed until the first trial.
struct CudnnView {
  cudnn::Handle handle;
  DeviceMemory x, w, y;

  CudnnView(const Problem& p, const ExecContext& e)
      : x(p.inputs[0].bytes()), w(p.inputs[1].bytes()), y(p.output.bytes()) {
    const auto s = static_cast<cudaStream_t>(e.stream);
    D9M_CUDNN_CHECK(cudnnSetStream(handle.get(), s));
    for (const DeviceMemory* m : {&x, &w, &y})
      if (m->bytes()) D9M_CUDA_CHECK(cudaMemsetAsync(m->get(), 0, m->bytes(), s));
  }

  void stage_inputs(const KernelArgs& a) const {
    const auto& g = a.problem.geom<Geometry>();
    const auto s = static_cast<cudaStream_t>(a.exec.stream);
    const std::int64_t x_dims[4] = {g.n, g.y.in, g.x.in, g.ci}, w_dims[4] = {g.y.k, g.x.k, g.ci, g.co};
    cudnn::permute4(s, a.problem.dtype, a.inputs[0], x.get(), x_dims, {0, 3, 1, 2});  // NHWC -> NCHW
    cudnn::permute4(s, a.problem.dtype, a.inputs[1], w.get(), w_dims, {3, 2, 0, 1});  // HWIO -> KCRS
  }

  void write_output(const KernelArgs& a) const {
    const auto& g = a.problem.geom<Geometry>();
    const std::int64_t y_dims[4] = {g.n, g.co, g.y.out, g.x.out};
    cudnn::permute4(static_cast<cudaStream_t>(a.exec.stream), a.problem.dtype, y.get(), a.output, y_dims, {0, 2, 3, 1});  // NCHW -> NHWC
  }
};

// ---- the legacy API: cudnn.algoK and cudnn.autotune ------------------------------------------

struct LegacyDescriptors {
  cudnn::TensorDesc x, y;
  cudnn::FilterDesc w;
  cudnn::ConvDesc conv;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // the config's

  explicit LegacyDescriptors(const Problem& p) {
    const auto& g = p.geom<Geometry>();
    if (pad_after(g.y) != g.y.pad_before || pad_after(g.x) != g.x.pad_before)
      throw Unsupported("asymmetric SAME padding: cuDNN's legacy API pads both sides equally");
    math = math_type(p);
    const auto I = cudnn::descriptor_int;
    const cudnnDataType_t t = cudnn::data_type(p.dtype);
    D9M_CUDNN_SUPPORTED(cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NCHW, t, I(g.n), I(g.ci), I(g.y.in), I(g.x.in)));
    D9M_CUDNN_SUPPORTED(cudnnSetTensor4dDescriptor(y.get(), CUDNN_TENSOR_NCHW, t, I(g.n), I(g.co), I(g.y.out), I(g.x.out)));
    D9M_CUDNN_SUPPORTED(cudnnSetFilter4dDescriptor(w.get(), t, CUDNN_TENSOR_NCHW, I(g.co), I(g.ci), I(g.y.k), I(g.x.k)));
    D9M_CUDNN_SUPPORTED(cudnnSetConvolution2dDescriptor(conv.get(), I(g.y.pad_before), I(g.x.pad_before), I(g.y.stride),
                                                        I(g.x.stride), I(g.y.dilation), I(g.x.dilation), CUDNN_CROSS_CORRELATION,
                                                        CUDNN_DATA_FLOAT));
    D9M_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math));
  }
};

// y = conv(x, w) with one algorithm, on cuDNN's copies. A "not supported" status is UNSUPPORTED.
void forward(const CudnnView& v, const LegacyDescriptors& d, cudnnConvolutionFwdAlgo_t algo, const DeviceMemory& workspace) {
  const float alpha = 1.0f, beta = 0.0f;
  D9M_CUDNN_SUPPORTED(cudnnConvolutionForward(v.handle.get(), &alpha, d.x.get(), v.x.get(), d.w.get(), v.w.get(), d.conv.get(), algo,
                                              workspace.get(), workspace.bytes(), &beta, d.y.get(), v.y.get()));
}

std::vector<cudnnConvolutionFwdAlgoPerf_t> perf_buffer(const CudnnView& v) {
  int count = 0;
  D9M_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(v.handle.get(), &count));
  return std::vector<cudnnConvolutionFwdAlgoPerf_t>(static_cast<std::size_t>(std::max(count, kAlgorithms)));
}

Claim documented_algorithm_claim(int algo) {
  return {Determinism::deterministic, ClaimSource::vendor_doc,
          algorithm_name(algo) + ": cuDNN's reproducibility notes list no forward-convolution algorithm among the "
                                 "routines that are not bit-wise reproducible"};
}

struct AlgorithmState {
  CudnnView view;
  LegacyDescriptors d;
  cudnnConvolutionFwdAlgo_t algo;
  DeviceMemory workspace;
  AlgorithmState(const Problem& p, const ExecContext& e, int a) : view(p, e), d(p), algo(static_cast<cudnnConvolutionFwdAlgo_t>(a)) {}
};

// cuDNN's own claim for the algorithm on this config: the determinism field of its successful
// entry in cudnnGetConvolutionForwardAlgorithm_v7's list (the entry at the config's math type if
// there is one). Absent from the list, the documented claim stands.
std::optional<Claim> listed_claim(const AlgorithmState& st) {
  auto perf = perf_buffer(st.view);
  int returned = 0;
  D9M_CUDNN_SUPPORTED(cudnnGetConvolutionForwardAlgorithm_v7(st.view.handle.get(), st.d.x.get(), st.d.w.get(), st.d.conv.get(),
                                                             st.d.y.get(), static_cast<int>(perf.size()), &returned, perf.data()));
  const cudnnConvolutionFwdAlgoPerf_t* entry = nullptr;
  for (int i = 0; i < returned; ++i) {
    const auto& e = perf[static_cast<std::size_t>(i)];
    if (e.algo != st.algo || e.status != CUDNN_STATUS_SUCCESS) continue;
    if (!entry || (e.mathType == st.d.math && entry->mathType != st.d.math)) entry = &e;
  }
  if (!entry) return std::nullopt;
  return Claim{entry->determinism == CUDNN_DETERMINISTIC ? Determinism::deterministic : Determinism::nondeterministic,
               ClaimSource::vendor_api,
               "determinism field of cudnnGetConvolutionForwardAlgorithm_v7 for " + algorithm_name(st.algo) + " at " +
                   math_type_name(entry->mathType) + "; documented deterministic"};
}

Prepared prepare_algorithm(int algo, const Problem& p, const ExecContext& e) {
  auto st = std::make_shared<AlgorithmState>(p, e, algo);
  Prepared prepared;
  prepared.claim = listed_claim(*st);
  // Support is what cuDNN does when asked, not whether its heuristic list names the algorithm.
  std::size_t bytes = 0;
  const cudnnStatus_t s = cudnnGetConvolutionForwardWorkspaceSize(st->view.handle.get(), st->d.x.get(), st->d.w.get(),
                                                                  st->d.conv.get(), st->d.y.get(), st->algo, &bytes);
  if (s != CUDNN_STATUS_SUCCESS)
    throw Unsupported("cuDNN: cudnnGetConvolutionForwardWorkspaceSize for " + algorithm_name(algo) + ": " + cudnn::status_text(s));
  st->workspace = DeviceMemory(bytes);
  forward(st->view, st->d, st->algo, st->workspace);  // the attempt
  prepared.state = st;
  return prepared;
}

void run_algorithm(const KernelArgs& a) {
  const auto& st = *static_cast<const AlgorithmState*>(a.state);
  st.view.stage_inputs(a);
  forward(st.view, st.d, st.algo, st.workspace);
  st.view.write_output(a);
}

struct AutotuneState {
  CudnnView view;
  LegacyDescriptors d;
  DeviceMemory workspace;
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf;
  AutotuneState(const Problem& p, const ExecContext& e) : view(p, e), d(p), perf(perf_buffer(view)) {}
};

Prepared prepare_autotune(const Problem& p, const ExecContext& e) {
  auto st = std::make_shared<AutotuneState>(p, e);
  // One workspace, allocated once: the most any algorithm asks for (within the limit), at the
  // config's math type and at CUDNN_DEFAULT_MATH, the two the search may time.
  std::size_t most = 0;
  for (cudnnMathType_t m : {CUDNN_DEFAULT_MATH, st->d.math}) {
    D9M_CUDNN_CHECK(cudnnSetConvolutionMathType(st->d.conv.get(), m));
    for (int algo = 0; algo < kAlgorithms; ++algo) {
      std::size_t bytes = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(st->view.handle.get(), st->d.x.get(), st->d.w.get(), st->d.conv.get(), st->d.y.get(),
                                                  static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes) == CUDNN_STATUS_SUCCESS &&
          bytes <= kAutotuneWorkspaceLimit)
        most = std::max(most, bytes);
    }
  }
  D9M_CUDNN_CHECK(cudnnSetConvolutionMathType(st->d.conv.get(), st->d.math));
  st->workspace = DeviceMemory(most);
  return {st, std::nullopt};
}

// A math type the search may return and the config allows: the config's own, or, under
// CUDNN_TENSOR_OP_MATH (tf32), CUDNN_DEFAULT_MATH, which permits TF32 as well.
bool allowed(cudnnMathType_t found, cudnnMathType_t config) {
  return found == config || (config == CUDNN_TENSOR_OP_MATH && found == CUDNN_DEFAULT_MATH);
}

// What cudnn.autotune names as its choice: "algo1", or "algo1+default_math" where the winner ran
// at another math type than the config's.
std::string choice_text(cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t found, cudnnMathType_t config) {
  return "algo" + std::to_string(static_cast<int>(algo)) + (found == config ? "" : "+" + math_type_name(found));
}

// Runs a choice named before (KernelArgs::replay) without searching, as a framework runs its
// cached winner on every later call of the shape in the same process.
void replay_autotune(const KernelArgs& a, AutotuneState& st) {
  for (int algo = 0; algo < kAlgorithms; ++algo)
    for (cudnnMathType_t m : {st.d.math, CUDNN_DEFAULT_MATH}) {
      const auto fwd = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
      if (choice_text(fwd, m, st.d.math) != *a.replay) continue;
      st.view.stage_inputs(a);
      D9M_CUDNN_CHECK(cudnnSetConvolutionMathType(st.d.conv.get(), m));
      forward(st.view, st.d, fwd, st.workspace);
      st.view.write_output(a);
      a.chose(*a.replay);
      return;
    }
  throw std::logic_error("conv2d cudnn.autotune was told to replay \"" + *a.replay + "\", which it never chooses at " +
                         math_type_name(st.d.math));
}

void run_autotune(const KernelArgs& a) {
  auto& st = *static_cast<AutotuneState*>(a.state);
  if (a.replay) return replay_autotune(a, st);
  st.view.stage_inputs(a);
  // The search runs the algorithms on cuDNN's copies and blocks the host until it has timed
  // them; the copies must be complete first.
  D9M_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(a.exec.stream)));
  D9M_CUDNN_CHECK(cudnnSetConvolutionMathType(st.d.conv.get(), st.d.math));  // every search starts from the config
  int returned = 0;
  D9M_CUDNN_SUPPORTED(cudnnFindConvolutionForwardAlgorithmEx(
      st.view.handle.get(), st.d.x.get(), st.view.x.get(), st.d.w.get(), st.view.w.get(), st.d.conv.get(), st.d.y.get(),
      st.view.y.get(), static_cast<int>(st.perf.size()), &returned, st.perf.data(), st.workspace.get(), st.workspace.bytes()));
  // The results are sorted by time: the first that ran, fits the workspace and the math mode wins.
  const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
  std::string tried;
  for (int i = 0; i < returned && !best; ++i) {
    const auto& e = st.perf[static_cast<std::size_t>(i)];
    if (e.status == CUDNN_STATUS_SUCCESS && e.memory <= st.workspace.bytes() && allowed(e.mathType, st.d.math)) best = &e;
    tried += (tried.empty() ? "" : ", ") + algorithm_name(e.algo) + " at " + math_type_name(e.mathType) + ": " +
             cudnnGetErrorString(e.status);
  }
  if (!best)
    throw Unsupported("cudnnFindConvolutionForwardAlgorithmEx found no algorithm that runs this config at " +
                      math_type_name(st.d.math) + " (" + tried + ")");
  // Run the winner as the frameworks do, at the math type it was timed at; it writes all of y
  // (beta 0), whatever the search left there.
  D9M_CUDNN_CHECK(cudnnSetConvolutionMathType(st.d.conv.get(), best->mathType));
  forward(st.view, st.d, best->algo, st.workspace);
  st.view.write_output(a);
  a.chose(choice_text(best->algo, best->mathType, st.d.math));
}

// ---- the graph API: cudnn.engineK ------------------------------------------------------------

void set_attribute(const cudnn::BackendDesc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                   std::int64_t count, const void* values) {
  const cudnnStatus_t s = cudnnBackendSetAttribute(d.get(), name, type, count, values);
  if (s != CUDNN_STATUS_SUCCESS)
    cudnn::fail(s, ("cudnnBackendSetAttribute(attribute " + std::to_string(static_cast<int>(name)) + ")").c_str(), __FILE__, __LINE__);
}

template <class V>
void set_attribute(const cudnn::BackendDesc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const V& value) {
  set_attribute(d, name, type, 1, &value);
}

void set_int64s(const cudnn::BackendDesc& d, cudnnBackendAttributeName_t name, const std::vector<std::int64_t>& values) {
  set_attribute(d, name, CUDNN_TYPE_INT64, static_cast<std::int64_t>(values.size()), values.data());
}

void set_descriptor(const cudnn::BackendDesc& d, cudnnBackendAttributeName_t name, const cudnn::BackendDesc& value) {
  set_attribute(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, value.ptr());
}

// A packed tensor with dimensions in the graph API's order (N, C, H, W for activations; K, C, R,
// S for filters): the NCHW and KCRS copies of CudnnView.
void describe_tensor(const cudnn::BackendDesc& t, std::int64_t uid, cudnnDataType_t type, const std::vector<std::int64_t>& dims) {
  set_attribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, type);
  set_int64s(t, CUDNN_ATTR_TENSOR_DIMENSIONS, dims);
  set_int64s(t, CUDNN_ATTR_TENSOR_STRIDES, {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1});
  set_attribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid);
  set_attribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, std::int64_t{16});  // cudaMalloc aligns to 256
  D9M_CUDNN_SUPPORTED(cudnnBackendFinalize(t.get()));
}

// The config's forward-convolution operation graph: one CONVOLUTION_FORWARD node y = conv(x, w).
struct OperationGraph {
  cudnn::BackendDesc x{CUDNN_BACKEND_TENSOR_DESCRIPTOR}, w{CUDNN_BACKEND_TENSOR_DESCRIPTOR}, y{CUDNN_BACKEND_TENSOR_DESCRIPTOR};
  cudnn::BackendDesc conv{CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR};
  cudnn::BackendDesc op{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR};
  cudnn::BackendDesc graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
  std::int64_t engines = 0;  // CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT

  OperationGraph(const Problem& p, cudnnHandle_t handle) {
    const auto& g = p.geom<Geometry>();
    const cudnnDataType_t t = cudnn::data_type(p.dtype);
    describe_tensor(x, kUidX, t, {g.n, g.ci, g.y.in, g.x.in});
    describe_tensor(w, kUidW, t, {g.co, g.ci, g.y.k, g.x.k});
    describe_tensor(y, kUidY, t, {g.n, g.co, g.y.out, g.x.out});

    set_attribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
    set_attribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, CUDNN_CROSS_CORRELATION);
    set_attribute(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, std::int64_t{2});
    set_int64s(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, {g.y.dilation, g.x.dilation});
    set_int64s(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {g.y.stride, g.x.stride});
    set_int64s(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {g.y.pad_before, g.x.pad_before});
    set_int64s(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {pad_after(g.y), pad_after(g.x)});
    D9M_CUDNN_SUPPORTED(cudnnBackendFinalize(conv.get()));

    set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
    set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
    set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
    set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
    set_attribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1.0f);
    set_attribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 0.0f);
    D9M_CUDNN_SUPPORTED(cudnnBackendFinalize(op.get()));

    set_descriptor(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, op);
    // The handle names the device whose engines count (a device-properties descriptor replaces it
    // from cuDNN 9.8 on; the handle works on every cuDNN 9).
    set_attribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle);
    D9M_CUDNN_SUPPORTED(cudnnBackendFinalize(graph.get()));
    std::int64_t returned = 0;
    D9M_CUDNN_CHECK(cudnnBackendGetAttribute(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &returned,
                                             &engines));
  }
};

std::string note_name(cudnnBackendNumericalNote_t n) {
  switch (n) {
    case CUDNN_NUMERICAL_NOTE_TENSOR_CORE: return "TENSOR_CORE";
    case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS: return "DOWN_CONVERT_INPUTS";
    case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: return "REDUCED_PRECISION_REDUCTION";
    case CUDNN_NUMERICAL_NOTE_FFT: return "FFT";
    case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: return "NONDETERMINISTIC";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD: return "WINOGRAD";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4: return "WINOGRAD_TILE_4x4";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6: return "WINOGRAD_TILE_6x6";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13: return "WINOGRAD_TILE_13x13";
    case CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP: return "STRICT_NAN_PROP";
    default: return std::to_string(static_cast<int>(n));
  }
}

std::string behavior_name(cudnnBackendBehaviorNote_t n) {
  switch (n) {
    case CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION: return "RUNTIME_COMPILATION";
    case CUDNN_BEHAVIOR_NOTE_REQUIRES_FILTER_INT8x32_REORDER: return "REQUIRES_FILTER_INT8x32_REORDER";
    case CUDNN_BEHAVIOR_NOTE_REQUIRES_BIAS_INT8x32_REORDER: return "REQUIRES_BIAS_INT8x32_REORDER";
    case CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API: return "SUPPORTS_CUDA_GRAPH_NATIVE_API";
    case CUDNN_BEHAVIOR_NOTE_CUBLASLT_DEPENDENCY: return "CUBLASLT_DEPENDENCY";
    default: return std::to_string(static_cast<int>(n));
  }
}

template <class Note>
std::vector<Note> engine_notes(const cudnn::BackendDesc& engine, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                               int type_count) {
  std::vector<Note> notes(static_cast<std::size_t>(type_count));
  std::int64_t returned = 0;
  D9M_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), name, type, type_count, &returned, notes.data()));
  notes.resize(static_cast<std::size_t>(std::clamp<std::int64_t>(returned, 0, type_count)));
  return notes;
}

// The numerical notes that CUDNN_FMA_MATH's "FMA instructions only" rules out.
bool excluded_by_fp32_strict(cudnnBackendNumericalNote_t n) {
  return n == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || n == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
         n == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
}

struct EngineState {
  CudnnView view;
  OperationGraph og;
  cudnn::BackendDesc engine{CUDNN_BACKEND_ENGINE_DESCRIPTOR};
  cudnn::BackendDesc config{CUDNN_BACKEND_ENGINECFG_DESCRIPTOR};
  cudnn::BackendDesc plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  cudnn::BackendDesc pack{CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR};
  DeviceMemory workspace;
  EngineState(const Problem& p, const ExecContext& e) : view(p, e), og(p, view.handle.get()) {}
};

Prepared prepare_engine(std::int64_t index, const Problem& p, const ExecContext& e) {
  const cudnnMathType_t math = math_type(p);  // tf32 on f16 or bf16 is UNSUPPORTED before any cuDNN call
  auto st = std::make_shared<EngineState>(p, e);
  if (index >= st->og.engines)
    throw Unsupported("cuDNN's graph API offers " + std::to_string(st->og.engines) + " engines (global indices 0.." +
                      std::to_string(st->og.engines - 1) + ") for this config's forward convolution");
  set_descriptor(st->engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, st->og.graph);
  set_attribute(st->engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, index);
  if (const cudnnStatus_t s = cudnnBackendFinalize(st->engine.get()); s != CUDNN_STATUS_SUCCESS)
    throw Unsupported("cuDNN: engine " + std::to_string(index) + " does not take this operation graph: " + cudnn::status_text(s));

  const auto notes = engine_notes<cudnnBackendNumericalNote_t>(st->engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  const auto behavior = engine_notes<cudnnBackendBehaviorNote_t>(st->engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                                                 CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
  bool nondeterministic = false;
  std::string noted;
  for (const auto n : notes) {
    if (math == CUDNN_FMA_MATH && excluded_by_fp32_strict(n))
      throw Unsupported("cuDNN: engine " + std::to_string(index) + " carries CUDNN_NUMERICAL_NOTE_" + note_name(n) +
                        ", which math mode fp32-strict (CUDNN_FMA_MATH: FMA instructions only) excludes");
    nondeterministic |= n == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    noted += (noted.empty() ? "" : ", ") + note_name(n);
  }
  std::string behaves;
  for (const auto n : behavior) behaves += (behaves.empty() ? "" : ", ") + behavior_name(n);

  set_descriptor(st->config, CUDNN_ATTR_ENGINECFG_ENGINE, st->engine);  // no knob choices: the engine's defaults
  if (const cudnnStatus_t s = cudnnBackendFinalize(st->config.get()); s != CUDNN_STATUS_SUCCESS)
    throw Unsupported("cuDNN: engine " + std::to_string(index) + " has no configuration at its default knobs: " + cudnn::status_text(s));
  set_attribute(st->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, st->view.handle.get());
  set_descriptor(st->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, st->config);
  if (const cudnnStatus_t s = cudnnBackendFinalize(st->plan.get()); s != CUDNN_STATUS_SUCCESS)
    throw Unsupported("cuDNN: no execution plan for engine " + std::to_string(index) + ": " + cudnn::status_text(s));
  std::int64_t workspace_bytes = 0, returned = 0;
  D9M_CUDNN_CHECK(cudnnBackendGetAttribute(st->plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &returned,
                                           &workspace_bytes));
  st->workspace = DeviceMemory(static_cast<std::size_t>(std::max<std::int64_t>(workspace_bytes, 0)));

  // The tensors live in the state for all trials, so one variant pack serves them all.
  const std::int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* pointers[3] = {st->view.x.get(), st->view.w.get(), st->view.y.get()};
  void* workspace = st->workspace.get();
  set_attribute(st->pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
  set_attribute(st->pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers);
  set_attribute(st->pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  D9M_CUDNN_CHECK(cudnnBackendFinalize(st->pack.get()));
  D9M_CUDNN_SUPPORTED(cudnnBackendExecute(st->view.handle.get(), st->plan.get(), st->pack.get()));  // the attempt

  Claim claim{nondeterministic ? Determinism::nondeterministic : Determinism::deterministic, ClaimSource::vendor_api,
              "numerical notes of cuDNN graph-API engine " + std::to_string(index) + " (of " + std::to_string(st->og.engines) +
                  ") for this config: " + (noted.empty() ? "none" : noted) +
                  (nondeterministic ? "" : " (no NONDETERMINISTIC note)") + "; behavior notes: " + (behaves.empty() ? "none" : behaves)};
  return {st, std::move(claim)};
}

void run_engine(const KernelArgs& a) {
  const auto& st = *static_cast<const EngineState*>(a.state);
  st.view.stage_inputs(a);
  D9M_CUDNN_SUPPORTED(cudnnBackendExecute(st.view.handle.get(), st.plan.get(), st.pack.get()));
  st.view.write_output(a);
}

std::vector<VariantDef> forward_variants() {
  std::vector<VariantDef> out;
  for (int algo = 0; algo < kAlgorithms; ++algo)
    out.push_back({.op = "conv2d", .name = "cudnn.algo" + std::to_string(algo), .backend = Backend::cuda, .role = Role::vendor,
                   .claim = documented_algorithm_claim(algo), .run = run_algorithm,
                   .prepare = [algo](const Problem& p, const ExecContext& e) { return prepare_algorithm(algo, p, e); }});
  out.push_back({.op = "conv2d", .name = "cudnn.autotune", .backend = Backend::cuda, .role = Role::autotune,
                 .claim = {Determinism::nondeterministic, ClaimSource::vendor_doc,
                           "NVIDIA's framework-determinism status table lists cuDNN autotuning as a source of nondeterminism: the "
                           "fastest algorithm, timed afresh (here every trial, as in every new process), can change, and the "
                           "algorithms differ in their bits"},
                 .run = run_autotune, .prepare = prepare_autotune});
  for (std::int64_t k = 0; k < kMaxForwardEngines; ++k)
    out.push_back({.op = "conv2d", .name = "cudnn.engine" + std::to_string(k), .backend = Backend::cuda, .role = Role::vendor,
                   .claim = {Determinism::unknown, ClaimSource::vendor_api,
                             "cuDNN's graph API states per config whether an engine is nondeterministic (numerical note "
                             "CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC): read when the case is prepared"},
                   .run = run_engine,
                   .prepare = [k](const Problem& p, const ExecContext& e) { return prepare_engine(k, p, e); }});
  return out;
}

}  // namespace

std::int64_t cudnn_forward_engine_count(const Problem& p) {
  D9M_CUDA_CHECK(cudaSetDevice(0));
  cudnn::Handle handle;
  return OperationGraph(p, handle.get()).engines;
}

D9M_REGISTER_VARIANTS(forward_variants());

}  // namespace d9m::conv
