// cuDNN variants of the depthwise gradients: cuDNN's grouped convolution with group count C, as
// TensorFlow calls it (always for the filter gradient under op determinism), through the legacy
// backprop implementation conv2d's gradients use (kernels/conv/conv_cudnn.cu): one cudnn.algoK
// per backward-data or backward-filter algorithm, with the same claims, support decided by a
// real attempt, the NHWC <-> NCHW and HWIM (read as HWIO [KH, KW, 1, C*M]) <-> KCRS transposes
// part of the timed op, and asymmetric SAME padding UNSUPPORTED.
#include "kernels/conv/conv_cudnn_backprop.h"
#include "kernels/depthwise/depthwise.h"

namespace d9m::depthwise {
namespace {

// groups = C: C input channels, C * M output channels, 1 input channel per group.
conv::LegacyConv grouped(const Problem& p) {
  const auto& g = p.geom<Geometry>();
  return {conv::Geometry{g.n, g.c, out_channels(g), g.y, g.x}, g.c};
}

}  // namespace

D9M_REGISTER_VARIANTS(conv::cudnn_backprop_variants(conv::Direction::data, "depthwise_conv2d_bwd_data", grouped));
D9M_REGISTER_VARIANTS(conv::cudnn_backprop_variants(conv::Direction::filter, "depthwise_conv2d_bwd_filter", grouped));

}  // namespace d9m::depthwise
