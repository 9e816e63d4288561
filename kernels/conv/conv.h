// conv family, TensorFlow semantics: NHWC activations, HWIO filters, strides, dilations,
// VALID/SAME padding (kernels/common/window.h).
//   conv2d_bwd_data   = Conv2DBackpropInput(input_sizes, filter[KH,KW,CI,CO], out_backprop[N,OH,OW,CO])
//                       -> output[N,H,W,CI]
//   conv2d_bwd_filter = Conv2DBackpropFilter(input[N,H,W,CI], filter_sizes, out_backprop)
//                       -> output[KH,KW,CI,CO]
// Both are written in scatter form over the forward conv's output positions (n, oh, ow):
//   for kh, kw (input position in range), ci, co:
//     bwd_data:   dx[n, ih, iw, ci]   += dy[n, oh, ow, co] * w[kh, kw, ci, co]
//     bwd_filter: dw[kh, kw, ci, co]  += x[n, ih, iw, ci]  * dy[n, oh, ow, co]
// with ih = oh*stride_h - pad_top + kh*dilation_h (and likewise iw). Products are rounded
// before they are added (no fma): the build turns contraction off.
#pragma once
#include <cstdint>

#include "kernels/common/window.h"

namespace d9m::conv {

struct Geometry {
  std::int64_t n = 0, ci = 0, co = 0;
  Window1d y, x;
};

// Calls visit(ih, iw, kh, kw) for every in-range tap of output position (oh, ow).
template <class Visit>
inline void taps(const Geometry& g, std::int64_t oh, std::int64_t ow, Visit&& visit) {
  for (std::int64_t kh = 0; kh < g.y.k; ++kh) {
    const std::int64_t ih = oh * g.y.stride - g.y.pad_before + kh * g.y.dilation;
    if (ih < 0 || ih >= g.y.in) continue;
    for (std::int64_t kw = 0; kw < g.x.k; ++kw) {
      const std::int64_t iw = ow * g.x.stride - g.x.pad_before + kw * g.x.dilation;
      if (iw < 0 || iw >= g.x.in) continue;
      visit(ih, iw, kh, kw);
    }
  }
}

}  // namespace d9m::conv
