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
#include <cstddef>
#include <cstdint>

#include "kernels/common/hd.h"
#include "kernels/common/window.h"

namespace d9m::conv {

struct Geometry {
  std::int64_t n = 0, ci = 0, co = 0;
  Window1d y, x;
};

// Calls visit(ih, iw, kh, kw) for every in-range tap of output position (oh, ow).
template <class Visit>
D9M_HD inline void taps(const Geometry& g, std::int64_t oh, std::int64_t ow, Visit&& visit) {
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

// Source s of both backprops: the forward output position (n, oh, ow) in flat NHW order.
struct Position {
  std::int64_t n, oh, ow;
};
D9M_HD inline Position position_of(const Geometry& g, std::size_t s) {
  const auto pos = static_cast<std::int64_t>(s);
  return {pos / g.x.out / g.y.out, (pos / g.x.out) % g.y.out, pos % g.x.out};
}

// Scatter form of conv2d_bwd_data: source = forward output position (n, oh, ow).
struct BwdDataTaps {
  Geometry g;
  const float* filter;
  const float* out_backprop;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const Position at = position_of(g, s);
    const std::int64_t n = at.n, oh = at.oh, ow = at.ow;
    const float* dy = out_backprop + static_cast<std::int64_t>(s) * g.co;
    const Geometry& gg = g;
    const float* w = filter;
    taps(g, oh, ow, [&](std::int64_t ih, std::int64_t iw, std::int64_t kh, std::int64_t kw) {
      const std::int64_t dx_base = ((n * gg.y.in + ih) * gg.x.in + iw) * gg.ci;
      const float* w_tap = w + (kh * gg.x.k + kw) * gg.ci * gg.co;
      for (std::int64_t ci = 0; ci < gg.ci; ++ci)
        for (std::int64_t co = 0; co < gg.co; ++co)
          emit(static_cast<std::size_t>(dx_base + ci), dy[co] * w_tap[ci * gg.co + co]);
    });
  }
};

// conv2d_bwd_data for the atomic variant only: source = (forward output position, tap), one
// thread per tap. With a thread per position (BwdDataTaps) every thread walks the taps in the
// same order, so the threads whose taps meet in one dx element reach it at different taps, well
// apart in time: on an H100 that gave one digest in 1000 trials on every config. A thread per
// tap makes those adds concurrent, as in the atomic kernels this variant models. Addition order
// is free here (the ordered variants keep BwdDataTaps and its reference order).
struct BwdDataTapSplit {
  Geometry g;
  const float* filter;
  const float* out_backprop;

  D9M_HD std::size_t taps_per_position() const { return static_cast<std::size_t>(g.y.k * g.x.k); }

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const std::size_t p = s / taps_per_position(), tap = s % taps_per_position();
    const Position at = position_of(g, p);
    const std::int64_t kh = static_cast<std::int64_t>(tap) / g.x.k, kw = static_cast<std::int64_t>(tap) % g.x.k;
    const std::int64_t ih = at.oh * g.y.stride - g.y.pad_before + kh * g.y.dilation;
    const std::int64_t iw = at.ow * g.x.stride - g.x.pad_before + kw * g.x.dilation;
    if (ih < 0 || ih >= g.y.in || iw < 0 || iw >= g.x.in) return;
    const float* dy = out_backprop + static_cast<std::int64_t>(p) * g.co;
    const float* w_tap = filter + (kh * g.x.k + kw) * g.ci * g.co;
    const std::int64_t dx_base = ((at.n * g.y.in + ih) * g.x.in + iw) * g.ci;
    for (std::int64_t ci = 0; ci < g.ci; ++ci)
      for (std::int64_t co = 0; co < g.co; ++co) emit(static_cast<std::size_t>(dx_base + ci), dy[co] * w_tap[ci * g.co + co]);
  }
};

// Scatter form of conv2d_bwd_filter: source = forward output position (n, oh, ow).
struct BwdFilterTaps {
  Geometry g;
  const float* input;
  const float* out_backprop;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const Position at = position_of(g, s);
    const std::int64_t n = at.n, oh = at.oh, ow = at.ow;
    const float* dy = out_backprop + static_cast<std::int64_t>(s) * g.co;
    const Geometry& gg = g;
    const float* x = input;
    taps(g, oh, ow, [&](std::int64_t ih, std::int64_t iw, std::int64_t kh, std::int64_t kw) {
      const float* x_row = x + ((n * gg.y.in + ih) * gg.x.in + iw) * gg.ci;
      const std::int64_t dw_base = (kh * gg.x.k + kw) * gg.ci * gg.co;
      for (std::int64_t ci = 0; ci < gg.ci; ++ci)
        for (std::int64_t co = 0; co < gg.co; ++co)
          emit(static_cast<std::size_t>(dw_base + ci * gg.co + co), x_row[ci] * dy[co]);
    });
  }
};

inline std::size_t positions(const Geometry& g) { return static_cast<std::size_t>(g.n * g.y.out * g.x.out); }

}  // namespace d9m::conv
