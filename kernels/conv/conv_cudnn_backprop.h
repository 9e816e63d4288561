// The legacy cuDNN backprops (conv_cudnn.cu): one implementation for every op that is a cuDNN
// convolution backprop, conv2d's gradients and the depthwise ones (a grouped convolution).
// Declared in plain C++; defined only in a CUDA build.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/conv/conv.h"
#include "kernels/registry.h"

namespace d9m::conv {

enum class Direction { data, filter };

// A convolution as cuDNN's legacy API takes it: conv2d's geometry with g.ci input and g.co output
// channels in `groups` groups (cudnnSetConvolutionGroupCount). Its filter is [KH, KW, g.ci /
// groups, g.co] in memory (TensorFlow's HWIO with the grouped layout), so output channel o reads
// the g.ci / groups input channels of group o / (g.co / groups). A depthwise convolution with
// multiplier M is groups = C, g.ci = C, g.co = C * M: TensorFlow's HWIM filter [KH, KW, C, M] is
// that filter read as [KH, KW, 1, C * M], output channel c * M + m in group c (TensorFlow reshapes
// it so before calling cuDNN). Tensors cross in the op's order: bwd_data (filter, out_backprop)
// -> in_backprop, bwd_filter (input, out_backprop) -> filter_backprop, NHWC activations.
struct LegacyConv {
  Geometry g;
  std::int64_t groups = 1;
};

// cudnn.algo0 ... of `dir` for `op`: one per cudnnConvolutionBwdDataAlgo_t or
// cudnnConvolutionBwdFilterAlgo_t, each with cuDNN's documented claim, replaced at prepare by
// the determinism field of the _v7 heuristic's entry where it lists the algorithm; support is
// decided by a workspace query and one call on zeroed tensors. `describe` reads the op's problem.
std::vector<VariantDef> cudnn_backprop_variants(Direction dir, const std::string& op,
                                                std::function<LegacyConv(const Problem&)> describe);

}  // namespace d9m::conv
