// cuDNN variants of maxpool2d_bwd: cudnnPoolingBackward with CUDNN_POOLING_MAX (cudnn.max) and
// CUDNN_POOLING_MAX_DETERMINISTIC (cudnn.max_deterministic), on NHWC tensors as they are.
#include "kernels/common/cudnn_pooling.h"
#include "kernels/common/op_helpers.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {
namespace {

void describe(cudnnPoolingMode_t mode, const Problem& p, cudnn::PoolingState& st) {
  const auto& g = p.geom<Geometry>();
  const auto pad_total = [](const Window1d& w) { return std::max<std::int64_t>((w.out - 1) * w.stride + w.k - w.in, 0); };
  if (pad_total(g.y) != 2 * g.y.pad_before || pad_total(g.x) != 2 * g.x.pad_before)
    throw Unsupported("asymmetric SAME padding: cuDNN pads both sides equally");
  const auto I = cudnn::descriptor_int;
  const cudnnDataType_t t = cudnn::data_type(p.dtype);
  D9M_CUDNN_SUPPORTED(cudnnSetTensor4dDescriptor(st.x_desc.get(), CUDNN_TENSOR_NHWC, t, I(g.n), I(g.c), I(g.y.in), I(g.x.in)));
  D9M_CUDNN_SUPPORTED(cudnnSetTensor4dDescriptor(st.y_desc.get(), CUDNN_TENSOR_NHWC, t, I(g.n), I(g.c), I(g.y.out), I(g.x.out)));
  D9M_CUDNN_CHECK(cudnnSetPooling2dDescriptor(st.pool.get(), mode, CUDNN_NOT_PROPAGATE_NAN, I(g.y.k), I(g.x.k),
                                              I(g.y.pad_before), I(g.x.pad_before), I(g.y.stride), I(g.x.stride)));
}

}  // namespace

// (orig_input, orig_output, grad) = (x, y, dy); the output is dx.
D9M_REGISTER_VARIANTS(cudnn::max_pooling_backward_variants("maxpool2d_bwd", {.x = 0, .y = 1, .dy = 2}, describe));

}  // namespace d9m::maxpool
