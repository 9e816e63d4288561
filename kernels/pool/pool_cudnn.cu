// cuDNN variants of max_pool3d_bwd: cudnnPoolingBackward with a 3-D pooling descriptor
// (cudnnSetPoolingNdDescriptor) in CUDNN_POOLING_MAX (cudnn.max) and
// CUDNN_POOLING_MAX_DETERMINISTIC (cudnn.max_deterministic), on the NCDHW tensors as they are
// (kernels/common/cudnn_pooling.h; maxpool2d_bwd's pair is the 2-D NHWC one). cuDNN reads x
// (input), y (output) and dy (grad_output) and finds each window's maximum itself: it never sees
// PyTorch's indices, and its docs do not say which of tied maxima gets the gradient, so it agrees
// with PyTorch's first-max rule only where maxima are unique (levels 0, pool_ops.cpp). What cuDNN
// cannot express is UNSUPPORTED: dilation (its pooling descriptor has none) and a ceil_mode window
// past cuDNN's own output extent; a shape or type cuDNN refuses is UNSUPPORTED with its status.
#include <string>

#include "kernels/common/cudnn_pooling.h"
#include "kernels/common/op_helpers.h"
#include "kernels/pool/pool.h"

namespace d9m::pool {
namespace {

void describe(cudnnPoolingMode_t mode, const Problem& p, cudnn::PoolingState& st) {
  const auto& g = p.geom<Pool3d>();
  if (g.z.dilation != 1 || g.y.dilation != 1 || g.x.dilation != 1)
    throw Unsupported("dilation: cuDNN's pooling descriptor has no dilation");
  const auto I = cudnn::descriptor_int;
  const cudnnDataType_t t = cudnn::data_type(p.dtype);
  const int x_dims[5] = {I(g.n), I(g.c), I(g.z.in), I(g.y.in), I(g.x.in)};
  const int y_dims[5] = {I(g.n), I(g.c), I(g.z.out), I(g.y.out), I(g.x.out)};
  D9M_CUDNN_SUPPORTED(cudnnSetTensorNdDescriptorEx(st.x_desc.get(), CUDNN_TENSOR_NCHW, t, 5, x_dims));
  D9M_CUDNN_SUPPORTED(cudnnSetTensorNdDescriptorEx(st.y_desc.get(), CUDNN_TENSOR_NCHW, t, 5, y_dims));
  const int window[3] = {I(g.z.k), I(g.y.k), I(g.x.k)}, padding[3] = {I(g.z.pad), I(g.y.pad), I(g.x.pad)},
            stride[3] = {I(g.z.stride), I(g.y.stride), I(g.x.stride)};
  D9M_CUDNN_SUPPORTED(cudnnSetPoolingNdDescriptor(st.pool.get(), mode, CUDNN_NOT_PROPAGATE_NAN, 3, window, padding, stride));
  int cudnn_out[5] = {};
  D9M_CUDNN_SUPPORTED(cudnnGetPoolingNdForwardOutputDim(st.pool.get(), st.x_desc.get(), 5, cudnn_out));
  for (int d = 2; d < 5; ++d)
    if (cudnn_out[d] != y_dims[d])
      throw Unsupported("ceil_mode: cuDNN's pooling output extent is " + std::to_string(cudnn_out[d]) + " where PyTorch's is " +
                        std::to_string(y_dims[d]) + " (cudnnGetPoolingNdForwardOutputDim, dimension " + std::to_string(d) + ")");
}

}  // namespace

// (grad_output, input, indices, output) = (dy, x, -, y); the result is dx.
D9M_REGISTER_VARIANTS(cudnn::max_pooling_backward_variants("max_pool3d_bwd", {.x = 1, .y = 3, .dy = 0}, describe));

}  // namespace d9m::pool
