// pool family: the pooling backprops PyTorch still refuses in deterministic mode
// (torch.use_deterministic_algorithms(True) raises for all four on CUDA), with PyTorch's
// semantics, NCHW / NCDHW contiguous, following ATen's CUDA kernels
// (aten/src/ATen/native/cuda/AdaptiveAveragePooling.cu, AdaptiveMaxPooling2d.cu,
// AveragePool3d.cu, DilatedMaxPool3d.cu). A folder of its own, not beside maxpool: maxpool is
// TensorFlow's MaxPoolGrad (NHWC, argmax recomputed from orig_input and orig_output, TF's SAME /
// VALID padding); these are PyTorch's (NCHW, explicit symmetric padding, ceil_mode, argmax
// indices from the forward as an input, adaptive windows), and they share nothing but the idea.
//
// Every op is in scatter form: a source is one element of grad_output (flat N C [D] H W order),
// the thread of PyTorch's atomic kernel; it adds its contributions into grad_input, which starts
// at +0. The reference (cpu.serial) adds sources in increasing order. A window covers each input
// at most once, so an input receives its contributions in increasing window order; the gather
// form (cpu.ordered, cuda.ordered: each input adds the windows that cover it, in that order)
// therefore has the reference's bits.
//
// Windows, per spatial dimension (o an output index, i an input index, I / O the extents):
//   adaptive:  start = floor(o I / O) = (o / O) I + ((o % O) I) / O, end = ceil((o + 1) I / O)
//              = 1 + ((o + 1) I - 1) / O (ATen's START_IND / END_IND; AdaptiveMaxPooling2d.cu's
//              start_index / end_index are the same integers). Windows overlap where O does not
//              divide I, and every input lies in several windows where O > I. Input i lies in the
//              windows [START_IND(i, I, O), END_IND(i, I, O)), the range ATen's own gather kernels
//              use.
//   avg_pool3d: start = o s - p, end = min(start + k, I + p), pool_size = end - start (padding
//              included), then the window is clipped to [max(start, 0), min(end, I)).
//   max_pool3d: start = o s - p, end = min(start + (k - 1) d + 1, I), start moved up by the
//              dilation d while negative; taps start, start + d, ... < end.
//   Output extents (ATen's pooling_output_shape): O = floor((I + 2p - d (k - 1) - 1 + (ceil_mode ?
//   s - 1 : 0)) / s) + 1, less one where ceil_mode would start the last window at or past I + p.
//   PyTorch requires p <= k / 2 (and, for avg_pool3d, I >= k); plan() refuses what PyTorch does.
//
// adaptive_avg_pool2d_bwd(grad_output[N,C,OH,OW]) -> grad_input[N,C,H,W]
//   (aten _adaptive_avg_pool2d_backward; its `self` argument only gives the shape.) NCHW path:
//   atomic_adaptive_average_gradinput, one thread per output (oh, ow) of a plane, strided by
//   (8 gridDim.y, 32) over blocks (N C, max(16 / C, 1)) x threads (32, 8): it computes
//   delta = grad_output / kW / kH in scalar_t (two divisions, each rounded to scalar_t: for
//   Half and BFloat16 c10's operator/ divides in float and rounds) and gpuAtomicAddNoReturn's
//   delta into every input of the window, rows then columns, in scalar_t. The host always takes
//   the atomic kernel for NCHW (`bool atomic = true; // suboptimal, but without atomic it
//   doesn't pass the tests`). Not modelled: the channels-last path,
//   adaptive_average_gradinput_nhwc, which gathers instead (deterministic): each input sums, in
//   scalar_t, grad_output * (r_kW * r_kH) with r_k = scalar_t(1) / k, over its windows in (oh, ow)
//   order -- other operations, so other bits.
//
// adaptive_max_pool2d_bwd(grad_output[N,C,OH,OW], input[N,C,H,W], indices[N,C,OH,OW]) -> grad_input
//   (aten adaptive_max_pool2d_backward.) indices are the forward's (adaptivemaxpool): the plane-
//   local flat index ih W + iw of the window's maximum, scanning rows then columns from max =
//   -inf with `val > max || isnan(val)`: the first maximum in scan order wins ties. The fill
//   computes them so from `input`, which the backward reads for its shape only.
//   atomicadaptivemaxgradinput (always taken: `bool atomic = true`), the same thread layout as
//   the average's, gpuAtomicAddNoReturn's grad_output at plane offset + index, in scalar_t.
//
// avg_pool3d_bwd(grad_output[N,C,OD,OH,OW]) -> grad_input[N,C,D,H,W]
//   (aten avg_pool3d_backward, parameters kernel, stride, padding, ceil_mode, count_include_pad,
//   divisor_override; 0 means none.) avg_pool3d_cuda_update_grad_input_atomic, one thread per
//   output element (block (32, 8), grid (ceil(OW / 32), ceil(OH / 8), slices x OD in chunks of
//   65535)): divide_factor = divisor_override, else pool_size (count_include_pad) or the clipped
//   window's size, as accscalar_t (float for Half, BFloat16 and float, double for double);
//   val = scalar_t(accscalar_t(grad_output) / divide_factor) (one division in accscalar_t, one
//   rounding to scalar_t); val is added with fastAtomicAdd (gpuAtomicAdd in older releases; for
//   Half and BFloat16 a paired __half2 / bfloat162 atomicAdd whose other half adds +0, which
//   changes no value grad_input can hold) into every input of the clipped window, in scalar_t.
//   The host takes that kernel when windows overlap (some k > s); not modelled: non-overlapping
//   windows store val instead of adding it (the same bits but for a -0 gradient), and stride 1
//   with padding 0 takes avg_pool3d_single_backward_out_frame_stride1, a gather that sums
//   grad_output in accscalar_t and multiplies by 1 / divide_factor once (other bits, and
//   count_include_pad ignored). The catalogue keeps to the atomic kernel's configs.
//
// max_pool3d_bwd(grad_output[N,C,OD,OH,OW], input[N,C,D,H,W], indices[N,C,OD,OH,OW],
//                output[N,C,OD,OH,OW]) -> grad_input[N,C,D,H,W]
//   (aten max_pool3d_with_indices_backward, kernel, stride, padding, dilation, ceil_mode.)
//   indices are max_pool3d_with_indices_single_out_frame's: the plane-local flat index
//   (t H + h) W + w, scanning t, h, w over the taps from max = -inf with `max < val ||
//   isnan(val)` (the first maximum wins ties) and starting from the first tap. `output` holds the
//   maxima, which only cuDNN reads (cudnnPoolingBackward's y). max_pool3d_with_indices_backward_
//   single_out_frame, one thread per output element (block (32, 8, 1), grid (ceil(OW / 32),
//   ceil(OH / 8), slices x OD in chunks of 65535)), gpuAtomicAddNoReturn's grad_output at plane
//   offset + index (unless the index is -1), in scalar_t. Not modelled: the channels-last path
//   (block (2, 4, 64)), which adds the same values from other threads.
//
// Arithmetic is in the dtype with one rounding per operation (half.h). PyTorch's indices are
// int64; d9m's are int32 (plane-local, so any plane under 2^31 elements fits). The fills have no
// NaN, so the isnan branches never fire. cuDNN (pool_cudnn.cu): max_pool3d_bwd's cudnn.max and
// cudnn.max_deterministic recompute each window's argmax from input and output; cuDNN's docs do
// not say which of tied maxima gets the gradient, so only a fill without ties (levels 0: the
// values of a plane all differ) defines their expected bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::pool {

// ---- windows --------------------------------------------------------------------------------

D9M_HD inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// ATen's START_IND(a, b, c) = floor(a c / b) and END_IND(a, b, c) = ceil((a + 1) c / b).
D9M_HD inline std::int64_t start_ind(std::int64_t a, std::int64_t b, std::int64_t c) { return (a / b) * c + ((a % b) * c) / b; }
D9M_HD inline std::int64_t end_ind(std::int64_t a, std::int64_t b, std::int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

struct Adaptive1d {
  std::int64_t in = 1, out = 1;
  D9M_HD std::int64_t start(std::int64_t o) const { return start_ind(o, out, in); }
  D9M_HD std::int64_t end(std::int64_t o) const { return end_ind(o, out, in); }
  // The windows that hold input i: [first_window, last_window).
  D9M_HD std::int64_t first_window(std::int64_t i) const { return start_ind(i, in, out); }
  D9M_HD std::int64_t last_window(std::int64_t i) const { return end_ind(i, in, out); }
};

// One dimension of a strided window (avg_pool3d, max_pool3d).
struct Pool1d {
  std::int64_t in = 1, k = 1, stride = 1, pad = 0, dilation = 1, out = 1;

  // avg_pool3d: the padded extent (pool_size's factor) and the clipped window [lo, hi).
  D9M_HD std::int64_t avg_padded(std::int64_t o) const {
    const std::int64_t start = o * stride - pad, end = start + k < in + pad ? start + k : in + pad;
    return end - start;
  }
  D9M_HD std::int64_t avg_lo(std::int64_t o) const {
    const std::int64_t start = o * stride - pad;
    return start > 0 ? start : 0;
  }
  D9M_HD std::int64_t avg_hi(std::int64_t o) const {
    const std::int64_t start = o * stride - pad, end = start + k < in + pad ? start + k : in + pad;
    return end < in ? end : in;
  }
  // The outputs whose avg window holds input i: o s - p <= i < o s - p + k.
  D9M_HD std::int64_t avg_first(std::int64_t i) const {
    const std::int64_t o = floor_div(i + pad - k, stride) + 1;
    return o > 0 ? o : 0;
  }
  D9M_HD std::int64_t avg_last(std::int64_t i) const {  // exclusive
    const std::int64_t o = (i + pad) / stride + 1;
    return o < out ? o : out;
  }

  // max_pool3d: the first tap at or past 0, and the end of the taps.
  D9M_HD std::int64_t max_lo(std::int64_t o) const {
    std::int64_t start = o * stride - pad;
    if (start < 0) start += ((-start + dilation - 1) / dilation) * dilation;
    return start;
  }
  D9M_HD std::int64_t max_hi(std::int64_t o) const {
    const std::int64_t end = o * stride - pad + (k - 1) * dilation + 1;
    return end < in ? end : in;
  }
  // A superset of the outputs with a tap at input i: o s - p <= i <= o s - p + (k - 1) d.
  D9M_HD std::int64_t max_first(std::int64_t i) const {
    const std::int64_t o = floor_div(i + pad - (k - 1) * dilation + stride - 1, stride);
    return o > 0 ? o : 0;
  }
  D9M_HD std::int64_t max_last(std::int64_t i) const { return avg_last(i); }  // exclusive
};

// ---- geometries -----------------------------------------------------------------------------

struct Adaptive2d {
  std::int64_t n = 0, c = 0;
  Adaptive1d y, x;
  std::int64_t levels = 0;  // the max pool's fill (pool_ops.cpp)
  D9M_HD std::int64_t plane_in() const { return y.in * x.in; }
  D9M_HD std::int64_t plane_out() const { return y.out * x.out; }
};

struct Pool3d {
  std::int64_t n = 0, c = 0;
  Pool1d z, y, x;
  bool count_include_pad = true;
  std::int64_t divisor_override = 0;  // 0: none
  std::int64_t levels = 0;
  D9M_HD std::int64_t plane_in() const { return z.in * y.in * x.in; }
  D9M_HD std::int64_t plane_out() const { return z.out * y.out * x.out; }
};

// T from a small positive integer, as scalar_t(int) converts it (exact below 2^11 in f16, 2^8 in
// bf16: window extents here).
template <class T>
D9M_HD inline T of_int(std::int64_t v) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) return static_cast<T>(v);
  else return from_float<T>(static_cast<float>(v));
}

// ---- adaptive_avg_pool2d_bwd ----------------------------------------------------------------

// The window's gradient, grad_output / kW / kH in T.
template <class T>
D9M_HD inline T adaptive_delta(const Adaptive2d& g, T grad, std::int64_t oh, std::int64_t ow) {
  const std::int64_t kh = g.y.end(oh) - g.y.start(oh), kw = g.x.end(ow) - g.x.start(ow);
  return div(div(grad, of_int<T>(kw)), of_int<T>(kh));
}

template <class T>
struct AdaptiveAvgGrads {
  Adaptive2d g;
  const T* grad;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s);
    const std::int64_t ow = i % g.x.out, oh = (i / g.x.out) % g.y.out, plane = i / g.plane_out();
    const T delta = adaptive_delta(g, grad[s], oh, ow);
    for (std::int64_t ih = g.y.start(oh); ih < g.y.end(oh); ++ih)
      for (std::int64_t iw = g.x.start(ow); iw < g.x.end(ow); ++iw)
        emit(static_cast<std::size_t>(plane * g.plane_in() + ih * g.x.in + iw), delta);
  }
};

// grad_input at (plane, ih, iw) gathered: its windows in increasing (oh, ow).
template <class T>
D9M_HD inline T adaptive_avg_gather(const Adaptive2d& g, const T* grad, std::int64_t plane, std::int64_t ih, std::int64_t iw) {
  T acc = of_int<T>(0);
  for (std::int64_t oh = g.y.first_window(ih); oh < g.y.last_window(ih); ++oh)
    for (std::int64_t ow = g.x.first_window(iw); ow < g.x.last_window(iw); ++ow)
      acc = add(acc, adaptive_delta(g, grad[(plane * g.y.out + oh) * g.x.out + ow], oh, ow));
  return acc;
}

// ---- the max pools: grad_output added at the forward's index --------------------------------

// Source s (an element of grad_output) adds its gradient at its plane's indexed input.
template <class T>
struct IndexedGrads {
  std::int64_t plane_in = 0, plane_out = 0;
  const T* grad;
  const std::int32_t* indices;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const std::int32_t at = indices[s];
    if (at == -1) return;  // PyTorch's guard; never from its forward
    emit(static_cast<std::size_t>(static_cast<std::int64_t>(s) / plane_out * plane_in + at), grad[s]);
  }
};

// The forward's argmax of an adaptive window (adaptivemaxpool): plane-local ih W + iw.
template <class T>
D9M_HD inline std::int32_t adaptive_argmax(const Adaptive2d& g, const T* plane_input, std::int64_t oh, std::int64_t ow) {
  std::int64_t best = g.y.start(oh) * g.x.in + g.x.start(ow);
  bool seen = false;
  Acc<T> max = 0;
  for (std::int64_t ih = g.y.start(oh); ih < g.y.end(oh); ++ih)
    for (std::int64_t iw = g.x.start(ow); iw < g.x.end(ow); ++iw) {
      const Acc<T> v = widen(plane_input[ih * g.x.in + iw]);
      if (!seen || v > max || v != v) {  // max starts at -inf: the first value always wins
        max = v;
        best = ih * g.x.in + iw;
        seen = true;
      }
    }
  return static_cast<std::int32_t>(best);
}

// grad_input at (plane, ih, iw) of a max pool gathered: the windows in [first, last) per
// dimension that index it, in increasing order (windows elsewhere cannot index it: an index lies
// in its window).
template <class T>
D9M_HD inline T adaptive_max_gather(const Adaptive2d& g, const T* grad, const std::int32_t* indices, std::int64_t plane,
                                    std::int64_t ih, std::int64_t iw) {
  const std::int64_t local = ih * g.x.in + iw;
  T acc = of_int<T>(0);
  for (std::int64_t oh = g.y.first_window(ih); oh < g.y.last_window(ih); ++oh)
    for (std::int64_t ow = g.x.first_window(iw); ow < g.x.last_window(iw); ++ow) {
      const std::int64_t o = (plane * g.y.out + oh) * g.x.out + ow;
      if (indices[o] == local) acc = add(acc, grad[o]);
    }
  return acc;
}

// The forward's argmax of a max_pool3d window (max_pool3d_with_indices_single_out_frame).
template <class T>
D9M_HD inline std::int32_t pool3d_argmax(const Pool3d& g, const T* plane_input, std::int64_t od, std::int64_t oh, std::int64_t ow) {
  const std::int64_t t0 = g.z.max_lo(od), h0 = g.y.max_lo(oh), w0 = g.x.max_lo(ow);
  std::int64_t best = (t0 * g.y.in + h0) * g.x.in + w0;
  bool seen = false;
  Acc<T> max = 0;
  for (std::int64_t t = t0; t < g.z.max_hi(od); t += g.z.dilation)
    for (std::int64_t h = h0; h < g.y.max_hi(oh); h += g.y.dilation)
      for (std::int64_t w = w0; w < g.x.max_hi(ow); w += g.x.dilation) {
        const std::int64_t at = (t * g.y.in + h) * g.x.in + w;
        const Acc<T> v = widen(plane_input[at]);
        if (!seen || max < v || v != v) {
          max = v;
          best = at;
          seen = true;
        }
      }
  return static_cast<std::int32_t>(best);
}

template <class T>
D9M_HD inline T max3d_gather(const Pool3d& g, const T* grad, const std::int32_t* indices, std::int64_t plane, std::int64_t it,
                             std::int64_t ih, std::int64_t iw) {
  const std::int64_t local = (it * g.y.in + ih) * g.x.in + iw;
  T acc = of_int<T>(0);
  for (std::int64_t od = g.z.max_first(it); od < g.z.max_last(it); ++od)
    for (std::int64_t oh = g.y.max_first(ih); oh < g.y.max_last(ih); ++oh)
      for (std::int64_t ow = g.x.max_first(iw); ow < g.x.max_last(iw); ++ow) {
        const std::int64_t o = ((plane * g.z.out + od) * g.y.out + oh) * g.x.out + ow;
        if (indices[o] == local) acc = add(acc, grad[o]);
      }
  return acc;
}

// ---- avg_pool3d_bwd -------------------------------------------------------------------------

// The window's gradient: scalar_t(accscalar_t(grad_output) / divide_factor).
template <class T>
D9M_HD inline T avg3d_value(const Pool3d& g, T grad, std::int64_t od, std::int64_t oh, std::int64_t ow) {
  std::int64_t divisor = g.divisor_override;
  if (divisor == 0)
    divisor = g.count_include_pad ? g.z.avg_padded(od) * g.y.avg_padded(oh) * g.x.avg_padded(ow)
                                  : (g.z.avg_hi(od) - g.z.avg_lo(od)) * (g.y.avg_hi(oh) - g.y.avg_lo(oh)) *
                                        (g.x.avg_hi(ow) - g.x.avg_lo(ow));
  return narrow<T>(widen(grad) / static_cast<Acc<T>>(divisor));
}

template <class T>
struct AvgPool3dGrads {
  Pool3d g;
  const T* grad;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s);
    const std::int64_t ow = i % g.x.out, oh = (i / g.x.out) % g.y.out, od = (i / (g.x.out * g.y.out)) % g.z.out;
    const std::int64_t plane = i / g.plane_out();
    const T val = avg3d_value(g, grad[s], od, oh, ow);
    for (std::int64_t t = g.z.avg_lo(od); t < g.z.avg_hi(od); ++t)
      for (std::int64_t h = g.y.avg_lo(oh); h < g.y.avg_hi(oh); ++h)
        for (std::int64_t w = g.x.avg_lo(ow); w < g.x.avg_hi(ow); ++w)
          emit(static_cast<std::size_t>(plane * g.plane_in() + (t * g.y.in + h) * g.x.in + w), val);
  }
};

template <class T>
D9M_HD inline T avg3d_gather(const Pool3d& g, const T* grad, std::int64_t plane, std::int64_t it, std::int64_t ih, std::int64_t iw) {
  T acc = of_int<T>(0);
  for (std::int64_t od = g.z.avg_first(it); od < g.z.avg_last(it); ++od)
    for (std::int64_t oh = g.y.avg_first(ih); oh < g.y.avg_last(ih); ++oh)
      for (std::int64_t ow = g.x.avg_first(iw); ow < g.x.avg_last(iw); ++ow)
        acc = add(acc, avg3d_value(g, grad[((plane * g.z.out + od) * g.y.out + oh) * g.x.out + ow], od, oh, ow));
  return acc;
}

}  // namespace d9m::pool
