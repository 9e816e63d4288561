// The window parameters conv-like ops share (conv2d and its gradients, the depthwise gradients):
// filter extent, strides, dilations and TensorFlow padding, and the two windows they make
// (kernels/common/window.h).
#pragma once
#include <utility>
#include <vector>

#include "kernels/common/op_helpers.h"
#include "kernels/common/window.h"

namespace d9m::conv {

inline std::vector<ParamSpec> window_params() {
  return {op::integer("kh", "filter height"), op::integer("kw", "filter width"),
          op::integer_or("stride_h", 1, "vertical stride"), op::integer_or("stride_w", 1, "horizontal stride"),
          op::integer_or("dilation_h", 1, "vertical dilation"), op::integer_or("dilation_w", 1, "horizontal dilation"),
          op::choice_or("padding", "SAME", {"VALID", "SAME"}, "TensorFlow padding")};
}

// The vertical and horizontal windows over input extents h and w.
inline std::pair<Window1d, Window1d> windows(const Params& p) {
  const auto& pad = p.choice("padding");
  return {make_window(p.integer("h"), p.integer("kh"), p.integer("stride_h"), p.integer("dilation_h"), pad, "kh"),
          make_window(p.integer("w"), p.integer("kw"), p.integer("stride_w"), p.integer("dilation_w"), pad, "kw")};
}

}  // namespace d9m::conv
