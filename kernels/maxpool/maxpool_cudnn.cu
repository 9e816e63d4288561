// cuDNN variants of maxpool2d_bwd: cudnnPoolingBackward with CUDNN_POOLING_MAX (cudnn.max) and
// CUDNN_POOLING_MAX_DETERMINISTIC (cudnn.max_deterministic), on NHWC tensors as they are.
#include <memory>

#include "kernels/common/cudnn_util.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {
namespace {

struct State {
  cudnn::Handle handle;
  cudnn::TensorDesc x_desc, y_desc;
  cudnn::PoolDesc pool;
};

Prepared prepare(cudnnPoolingMode_t mode, const Problem& p, const ExecContext& exec) {
  const auto& g = p.geom<Geometry>();
  const auto pad_total = [](const Window1d& w) { return std::max<std::int64_t>((w.out - 1) * w.stride + w.k - w.in, 0); };
  if (pad_total(g.y) != 2 * g.y.pad_before || pad_total(g.x) != 2 * g.x.pad_before)
    throw Unsupported("asymmetric SAME padding: cuDNN pads both sides equally");
  auto st = std::make_shared<State>();
  D9M_CUDNN_CHECK(cudnnSetStream(st->handle.get(), static_cast<cudaStream_t>(exec.stream)));
  const auto I = cudnn::descriptor_int;
  const cudnnDataType_t t = cudnn::data_type(p.dtype);
  D9M_CUDNN_SUPPORTED(cudnnSetTensor4dDescriptor(st->x_desc.get(), CUDNN_TENSOR_NHWC, t, I(g.n), I(g.c), I(g.y.in), I(g.x.in)));
  D9M_CUDNN_SUPPORTED(cudnnSetTensor4dDescriptor(st->y_desc.get(), CUDNN_TENSOR_NHWC, t, I(g.n), I(g.c), I(g.y.out), I(g.x.out)));
  D9M_CUDNN_CHECK(cudnnSetPooling2dDescriptor(st->pool.get(), mode, CUDNN_NOT_PROPAGATE_NAN, I(g.y.k), I(g.x.k),
                                              I(g.y.pad_before), I(g.x.pad_before), I(g.y.stride), I(g.x.stride)));
  return {st, std::nullopt};
}

void run(const KernelArgs& a) {
  auto& st = *static_cast<State*>(a.state);
  // cuDNN reads alpha and beta as double for double data, as float otherwise.
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const bool f64 = a.problem.dtype == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  // (orig_input, orig_output, grad) = (x, y, dy); the output is dx.
  D9M_CUDNN_SUPPORTED(cudnnPoolingBackward(st.handle.get(), st.pool.get(), alpha, st.y_desc.get(), a.inputs[1], st.y_desc.get(),
                                           a.inputs[2], st.x_desc.get(), a.inputs[0], beta, st.x_desc.get(), a.output));
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "maxpool2d_bwd", .name = "cudnn.max", .backend = Backend::cuda, .role = Role::vendor,
                       .claim = {Determinism::nondeterministic, ClaimSource::vendor_doc,
                                 "CUDNN_POOLING_MAX backward may be nondeterministic when windows overlap"},
                       .run = run,
                       .prepare = [](const Problem& p, const ExecContext& e) { return prepare(CUDNN_POOLING_MAX, p, e); }}});
D9M_REGISTER_VARIANTS({{.op = "maxpool2d_bwd", .name = "cudnn.max_deterministic", .backend = Backend::cuda, .role = Role::vendor,
                       .claim = {Determinism::deterministic, ClaimSource::vendor_doc,
                                 "CUDNN_POOLING_MAX_DETERMINISTIC is cuDNN's deterministic max-pooling mode"},
                       .run = run,
                       .prepare = [](const Problem& p, const ExecContext& e) { return prepare(CUDNN_POOLING_MAX_DETERMINISTIC, p, e); }}});

}  // namespace d9m::maxpool
