// conv family, TensorFlow semantics: NHWC activations, HWIO filters, strides, dilations,
// VALID/SAME padding (kernels/common/window.h).
//   conv2d            = Conv2D(input[N,H,W,CI], filter[KH,KW,CI,CO]) -> output[N,OH,OW,CO]
//   conv2d_bwd_data   = Conv2DBackpropInput(input_sizes, filter[KH,KW,CI,CO], out_backprop[N,OH,OW,CO])
//                       -> output[N,H,W,CI]
//   conv2d_bwd_filter = Conv2DBackpropFilter(input[N,H,W,CI], filter_sizes, out_backprop)
//                       -> output[KH,KW,CI,CO]
// with ih = oh*stride_h - pad_top + kh*dilation_h (and likewise iw); taps outside the input are
// the zero padding.
//
// conv2d is written in gather form, at f32, f16 and bf16: each output is
//   y[n, oh, ow, co] = sum over kh, kw (input position in range), ci of x[n, ih, iw, ci] * w[kh, kw, ci, co]
// accumulated in float from 0 in the reference order kh, kw, ci ascending (one running sum), and
// rounded once to the dtype. The split variants cut that sum into parts, one per filter tap and
// chunk of kChannelChunk input channels, each summed in ascending ci from 0, and add the parts.
// A config's `math` (default, tf32, fp32-strict) is cuDNN's math type; d9m's own kernels compute
// in plain float and are UNSUPPORTED under any but "default" (the serial reference still runs).
//
// Both backprops are written in scatter form over the forward conv's output positions (n, oh, ow):
//   for kh, kw (input position in range), ci, co:
//     bwd_data:   dx[n, ih, iw, ci]   += dy[n, oh, ow, co] * w[kh, kw, ci, co]
//     bwd_filter: dw[kh, kw, ci, co]  += x[n, ih, iw, ci]  * dy[n, oh, ow, co]
// Products are rounded before they are added (no fma): the build turns contraction off. At f16
// and bf16 the backprops multiply and sum in float and round each output once to the dtype at the
// end (accumulate::apply_widened), as cuDNN does with its float compute type; at f64 in double.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/common/tensor.h"
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

// Scatter form of conv2d_bwd_data: source = forward output position (n, oh, ow). T is the
// storage type; products and sums are in Acc<T> (accumulate::apply_widened).
template <class T>
struct BwdDataTaps {
  Geometry g;
  const T* filter;
  const T* out_backprop;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const Position at = position_of(g, s);
    const std::int64_t n = at.n, oh = at.oh, ow = at.ow;
    const T* dy = out_backprop + static_cast<std::int64_t>(s) * g.co;
    const Geometry& gg = g;
    const T* w = filter;
    taps(g, oh, ow, [&](std::int64_t ih, std::int64_t iw, std::int64_t kh, std::int64_t kw) {
      const std::int64_t dx_base = ((n * gg.y.in + ih) * gg.x.in + iw) * gg.ci;
      const T* w_tap = w + (kh * gg.x.k + kw) * gg.ci * gg.co;
      for (std::int64_t ci = 0; ci < gg.ci; ++ci)
        for (std::int64_t co = 0; co < gg.co; ++co)
          emit(static_cast<std::size_t>(dx_base + ci), widen(dy[co]) * widen(w_tap[ci * gg.co + co]));
    });
  }
};

// conv2d_bwd_data for the atomic variant only: source = (forward output position, tap), one
// thread per tap. With a thread per position (BwdDataTaps) every thread walks the taps in the
// same order, so the threads whose taps meet in one dx element reach it at different taps, well
// apart in time: on an H100 that gave one digest in 1000 trials on every config. A thread per
// tap makes those adds concurrent, as in the atomic kernels this variant models. Addition order
// is free here (the ordered variants keep BwdDataTaps and its reference order).
template <class T>
struct BwdDataTapSplit {
  Geometry g;
  const T* filter;
  const T* out_backprop;

  D9M_HD std::size_t taps_per_position() const { return static_cast<std::size_t>(g.y.k * g.x.k); }

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const std::size_t p = s / taps_per_position(), tap = s % taps_per_position();
    const Position at = position_of(g, p);
    const std::int64_t kh = static_cast<std::int64_t>(tap) / g.x.k, kw = static_cast<std::int64_t>(tap) % g.x.k;
    const std::int64_t ih = at.oh * g.y.stride - g.y.pad_before + kh * g.y.dilation;
    const std::int64_t iw = at.ow * g.x.stride - g.x.pad_before + kw * g.x.dilation;
    if (ih < 0 || ih >= g.y.in || iw < 0 || iw >= g.x.in) return;
    const T* dy = out_backprop + static_cast<std::int64_t>(p) * g.co;
    const T* w_tap = filter + (kh * g.x.k + kw) * g.ci * g.co;
    const std::int64_t dx_base = ((at.n * g.y.in + ih) * g.x.in + iw) * g.ci;
    for (std::int64_t ci = 0; ci < g.ci; ++ci)
      for (std::int64_t co = 0; co < g.co; ++co)
        emit(static_cast<std::size_t>(dx_base + ci), widen(dy[co]) * widen(w_tap[ci * g.co + co]));
  }
};

// Scatter form of conv2d_bwd_filter: source = forward output position (n, oh, ow); products
// and sums in Acc<T>.
template <class T>
struct BwdFilterTaps {
  Geometry g;
  const T* input;
  const T* out_backprop;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const Position at = position_of(g, s);
    const std::int64_t n = at.n, oh = at.oh, ow = at.ow;
    const T* dy = out_backprop + static_cast<std::int64_t>(s) * g.co;
    const Geometry& gg = g;
    const T* x = input;
    taps(g, oh, ow, [&](std::int64_t ih, std::int64_t iw, std::int64_t kh, std::int64_t kw) {
      const T* x_row = x + ((n * gg.y.in + ih) * gg.x.in + iw) * gg.ci;
      const std::int64_t dw_base = (kh * gg.x.k + kw) * gg.ci * gg.co;
      for (std::int64_t ci = 0; ci < gg.ci; ++ci)
        for (std::int64_t co = 0; co < gg.co; ++co)
          emit(static_cast<std::size_t>(dw_base + ci * gg.co + co), widen(x_row[ci]) * widen(dy[co]));
    });
  }
};

inline std::size_t positions(const Geometry& g) { return static_cast<std::size_t>(g.n * g.y.out * g.x.out); }

// ---- the backprops in gather form (cpu.gather, cuda.gather) -------------------------------
// Each output sums its own contributions, in the order the scatter reference adds them, so the
// result is cpu.serial's to the bit with memory of the output alone (issue 13: ordered variants
// that scale to real models, where the scatter form emits billions of contributions).

// The forward output position whose window reaches input row `in` at tap k, or -1.
D9M_HD inline std::int64_t position_reaching(const Window1d& w, std::int64_t in, std::int64_t k) {
  const std::int64_t num = in + w.pad_before - k * w.dilation;
  if (num < 0 || num % w.stride != 0) return -1;
  const std::int64_t o = num / w.stride;
  return o < w.out ? o : -1;
}

// dx[n, ih, iw, ci] for ci in [ci0, ci0 + count), added onto acc[0..count). The reference adds
// into one dx element once per position whose window covers (ih, iw), at the single tap that
// does, co ascending, positions in increasing (oh, ow): walking the taps from the last to the
// first meets those positions in exactly that order (oh = (ih + pad - kh * dilation) / stride
// grows as kh falls).
template <class T>
D9M_HD inline void bwd_data_gather(const Geometry& g, const T* filter, const T* out_backprop, std::int64_t n, std::int64_t ih,
                                   std::int64_t iw, std::int64_t ci0, std::int64_t count, Acc<T>* acc) {
  for (std::int64_t kh = g.y.k - 1; kh >= 0; --kh) {
    const std::int64_t oh = position_reaching(g.y, ih, kh);
    if (oh < 0) continue;
    for (std::int64_t kw = g.x.k - 1; kw >= 0; --kw) {
      const std::int64_t ow = position_reaching(g.x, iw, kw);
      if (ow < 0) continue;
      const T* dy = out_backprop + ((n * g.y.out + oh) * g.x.out + ow) * g.co;
      const T* w_tap = filter + (kh * g.x.k + kw) * g.ci * g.co;
      for (std::int64_t j = 0; j < count; ++j)
        for (std::int64_t co = 0; co < g.co; ++co) acc[j] = acc[j] + widen(dy[co]) * widen(w_tap[(ci0 + j) * g.co + co]);
    }
  }
}

// dw[kh, kw, ci, co] for co in [co0, co0 + count), added onto acc[0..count): one product per
// position whose tap (kh, kw) falls inside the input, positions in increasing (n, oh, ow), as
// the reference adds them.
template <class T>
D9M_HD inline void bwd_filter_gather(const Geometry& g, const T* input, const T* out_backprop, std::int64_t kh, std::int64_t kw,
                                     std::int64_t ci, std::int64_t co0, std::int64_t count, Acc<T>* acc) {
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t oh = 0; oh < g.y.out; ++oh) {
      const std::int64_t ih = oh * g.y.stride - g.y.pad_before + kh * g.y.dilation;
      if (ih < 0 || ih >= g.y.in) continue;
      for (std::int64_t ow = 0; ow < g.x.out; ++ow) {
        const std::int64_t iw = ow * g.x.stride - g.x.pad_before + kw * g.x.dilation;
        if (iw < 0 || iw >= g.x.in) continue;
        const Acc<T> x = widen(input[((n * g.y.in + ih) * g.x.in + iw) * g.ci + ci]);
        const T* dy = out_backprop + ((n * g.y.out + oh) * g.x.out + ow) * g.co + co0;
        for (std::int64_t j = 0; j < count; ++j) acc[j] = acc[j] + x * widen(dy[j]);
      }
    }
}

// Padding after the input in one dimension: TensorFlow's SAME puts an odd extra row or column
// there, so it can exceed pad_before by one (cuDNN's legacy API pads both sides equally).
inline std::int64_t pad_after(const Window1d& w) {
  const std::int64_t total = (w.out - 1) * w.stride + (w.k - 1) * w.dilation + 1 - w.in;
  return (total > 0 ? total : 0) - w.pad_before;
}

// ---- conv2d (forward) ---------------------------------------------------------------------

// Input channels per part of the split variants. Fixed, never derived from the machine.
inline constexpr std::int64_t kChannelChunk = 8;

inline std::int64_t forward_outputs(const Geometry& g) { return g.n * g.y.out * g.x.out * g.co; }
D9M_HD inline std::int64_t channel_chunks(const Geometry& g) { return (g.ci + kChannelChunk - 1) / kChannelChunk; }
// Parts of one output: every filter tap (in range or not: a tap in the padding adds nothing)
// times every channel chunk.
D9M_HD inline std::int64_t parts_per_output(const Geometry& g) { return g.y.k * g.x.k * channel_chunks(g); }

// Calls f with a value of the storage type of conv2d's dtype (float, Half or BFloat16).
template <class F>
decltype(auto) with_forward_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f16: return f(Half{});
    case DType::bf16: return f(BFloat16{});
    default: break;
  }
  // The registry refuses configs naming a dtype the op does not list.
  throw std::logic_error("conv2d has no variant at this dtype");
}

// Forward output o (flat NHWC index, co fastest): its position and output channel.
struct ForwardOutput {
  Position at;
  std::int64_t co;
};
D9M_HD inline ForwardOutput forward_output_of(const Geometry& g, std::int64_t o) {
  return {position_of(g, static_cast<std::size_t>(o / g.co)), o % g.co};
}

// sum over ci in [ci0, ci1) of x[n, ih, iw, ci] * w[kh, kw, ci, co], added onto acc in ascending ci.
template <class T>
D9M_HD inline float add_channels(const Geometry& g, const T* x, const T* w, const ForwardOutput& out, std::int64_t ih,
                                 std::int64_t iw, std::int64_t kh, std::int64_t kw, std::int64_t ci0, std::int64_t ci1,
                                 float acc) {
  const T* x_pixel = x + ((out.at.n * g.y.in + ih) * g.x.in + iw) * g.ci;
  const T* w_column = w + (kh * g.x.k + kw) * g.ci * g.co + out.co;
  for (std::int64_t ci = ci0; ci < ci1; ++ci) acc = acc + widen(x_pixel[ci]) * widen(w_column[ci * g.co]);
  return acc;
}

// The reference sum of output o: one running float sum over kh, kw, ci ascending.
template <class T>
D9M_HD inline float forward_sum(const Geometry& g, const T* x, const T* w, std::int64_t o) {
  const ForwardOutput out = forward_output_of(g, o);
  float acc = 0;
  taps(g, out.at.oh, out.at.ow, [&](std::int64_t ih, std::int64_t iw, std::int64_t kh, std::int64_t kw) {
    acc = add_channels(g, x, w, out, ih, iw, kh, kw, 0, g.ci, acc);
  });
  return acc;
}

// Part `part` of output o (tap = part / chunks, chunk = part % chunks): its channels' sum from 0,
// or 0 for a tap in the padding.
template <class T>
D9M_HD inline float forward_part(const Geometry& g, const T* x, const T* w, std::int64_t o, std::int64_t part) {
  const ForwardOutput out = forward_output_of(g, o);
  const std::int64_t tap = part / channel_chunks(g), chunk = part % channel_chunks(g);
  const std::int64_t kh = tap / g.x.k, kw = tap % g.x.k;
  const std::int64_t ih = out.at.oh * g.y.stride - g.y.pad_before + kh * g.y.dilation;
  const std::int64_t iw = out.at.ow * g.x.stride - g.x.pad_before + kw * g.x.dilation;
  if (ih < 0 || ih >= g.y.in || iw < 0 || iw >= g.x.in) return 0;
  const std::int64_t ci0 = chunk * kChannelChunk, ci1 = ci0 + kChannelChunk < g.ci ? ci0 + kChannelChunk : g.ci;
  return add_channels(g, x, w, out, ih, iw, kh, kw, ci0, ci1, 0.0f);
}

// d9m's own kernels compute in plain float: a cuDNN math mode is the library's setting.
inline std::optional<std::string> own_kernels_support(const std::string& math) {
  if (math == "default") return std::nullopt;
  return "d9m's own kernels have no math mode \"" + math + "\" (cuDNN's setting)";
}

}  // namespace d9m::conv
