// dilation family: the gradients of TensorFlow's Dilation2D (grey-scale morphological dilation),
// NHWC, as its CPU and GPU kernels compute them (tensorflow/core/kernels/dilation_ops*.cc):
//   forward  out[n,oh,ow,c] = max over (kh, kw) of input[n, ih, iw, c] + filter[kh, kw, c],
//            ih = oh * stride_h - pad_top + kh * rate_h (iw alike), out-of-range taps skipped
//   dilation2d_bwd_input(input[N,H,W,C], filter[KH,KW,C], out_backprop[N,OH,OW,C]) -> [N,H,W,C]
//   dilation2d_bwd_filter(the same)                                                -> [KH,KW,C]
// Each output position's gradient goes to the input position (bwd_input) or the filter tap
// (bwd_filter) of its maximum: the first in scan order (kh, then kw), because TensorFlow starts
// from NumTraits<T>::lowest() and replaces the maximum only on a strict '>' (its comment speaks
// of the last branch; its code keeps the first). Where no tap of a window beats that start (every
// tap out of range, possible with SAME padding and a rate larger than the input, or every tap
// -inf or NaN), TensorFlow's defaults stand: input position (max(ih0, 0), max(iw0, 0)) of the
// window's first tap, filter tap (0, 0).
// input + filter is computed in T (one rounding, half.h add()) and compared exactly, widened.
// Padding and output size follow window.h with dilation = rate (k_eff = (k - 1) rate + 1).
// The reference adds the gradients in increasing (n, oh, ow, c) order, in T, one rounding per
// add (TF's GpuAtomicAdd on T). bwd_filter adds N * OH * OW gradients into each tap of a
// channel: the heavy collisions of this family.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/common/window.h"

namespace d9m::dilation {

struct Geometry {
  std::int64_t n = 0, c = 0;
  Window1d y, x;  // k = filter extent, dilation = rate
};

struct Argmax {
  std::int64_t ih, iw, kh, kw;
};

// The maximum of input + filter over the window of output (n, oh, ow, c), TensorFlow's way.
template <class T>
D9M_HD inline Argmax argmax(const Geometry& g, const T* input, const T* filter, std::int64_t n, std::int64_t oh,
                            std::int64_t ow, std::int64_t c) {
  const std::int64_t ih0 = oh * g.y.stride - g.y.pad_before, iw0 = ow * g.x.stride - g.x.pad_before;
  Argmax best{ih0 < 0 ? 0 : ih0, iw0 < 0 ? 0 : iw0, 0, 0};
  // TensorFlow's start, so that a tap of -inf, of NaN or of exactly the lowest value never wins,
  // and a window of only such taps keeps the defaults (found by an oracle audit: the first
  // in-range tap won there; no catalogue fill makes such values).
  Acc<T> best_value = widen(lowest_finite<T>());
  for (std::int64_t kh = 0; kh < g.y.k; ++kh) {
    const std::int64_t ih = ih0 + kh * g.y.dilation;
    if (ih < 0 || ih >= g.y.in) continue;
    for (std::int64_t kw = 0; kw < g.x.k; ++kw) {
      const std::int64_t iw = iw0 + kw * g.x.dilation;
      if (iw < 0 || iw >= g.x.in) continue;
      const Acc<T> v = widen(add(input[((n * g.y.in + ih) * g.x.in + iw) * g.c + c], filter[(kh * g.x.k + kw) * g.c + c]));
      if (v > best_value) {
        best = {ih, iw, kh, kw};
        best_value = v;
      }
    }
  }
  return best;
}

// Scatter form: source = one output position (n, oh, ow, c) in flat NHWC order of out_backprop;
// it adds its gradient at its maximum's input position, or at its filter tap.
template <class T, bool kToFilter>
struct MaxGrads {
  Geometry g;
  const T* input;
  const T* filter;
  const T* out_backprop;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s);
    const std::int64_t c = i % g.c, ow = (i / g.c) % g.x.out, oh = (i / g.c / g.x.out) % g.y.out,
                       n = i / g.c / g.x.out / g.y.out;
    const Argmax m = argmax(g, input, filter, n, oh, ow, c);
    const std::int64_t at = kToFilter ? (m.kh * g.x.k + m.kw) * g.c + c : ((n * g.y.in + m.ih) * g.x.in + m.iw) * g.c + c;
    emit(static_cast<std::size_t>(at), out_backprop[s]);
  }
};

}  // namespace d9m::dilation
