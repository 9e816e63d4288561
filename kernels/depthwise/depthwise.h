// depthwise family: the gradients of TensorFlow's DepthwiseConv2dNative, NHWC, channel multiplier M
// (tensorflow/core/kernels/depthwise_conv_grad_op.cc, GPU kernels in depthwise_conv_op_gpu.h):
//   forward  out[n, oh, ow, c*M + m] = sum over in-range taps (kh, kw) of
//                                      input[n, ih, iw, c] * filter[kh, kw, c, m]
//            ih = oh * stride_h - pad_top + kh * dilation_h (iw alike), padding and output size
//            from kernels/common/window.h (VALID/SAME, SAME's odd extra row or column after)
//   depthwise_conv2d_bwd_data   = DepthwiseConv2dNativeBackpropInput(input_sizes, filter[KH,KW,C,M],
//                                 out_backprop[N,OH,OW,C*M]) -> in_backprop[N,H,W,C]
//   depthwise_conv2d_bwd_filter = DepthwiseConv2dNativeBackpropFilter(input[N,H,W,C], filter_sizes,
//                                 out_backprop[N,OH,OW,C*M]) -> filter_backprop[KH,KW,C,M]
// Output channel c*M + m (m fastest) is input channel c times its m-th filter column.
//
// TensorFlow's native kernels take one stride for both dimensions and no dilation (the grad ops
// size their windows with dilation_rate = 1; tf.nn.depthwise_conv2d's `dilations` rewrites the op
// with space_to_batch around it). d9m's configs allow stride_h != stride_w and dilations, the
// obvious generalisation PyTorch's conv_depthwise2d and cuDNN's grouped convolution run; a config
// TensorFlow's kernels could run gets exactly their arithmetic.
//
// bwd_data, as TensorFlow's GPU kernel DepthwiseConv2dBackpropInputGPUKernelNHWC computes it: a
// gather, one thread per input element, no atomics. Its sum is of type T (`T sum = 0; sum +=
// out_backprop * filter`): at f16 and bf16 every product and every add rounds to the 16-bit type
// (half.h mul() and add()), at f32 and f64 in the type. The order: output rows ascending, then
// output columns ascending, then m ascending. Written in scatter form, source = one out_backprop
// element (n, oh, ow, c*M + m) in flat NHWC order, emitting dy * w for each in-range tap: each
// input element then receives its products in exactly that order (one tap of a source reaches it),
// from 0, so the serial scatter is TensorFlow's gather bit for bit. The ordered variants are that
// gather (cuda.ordered is TensorFlow's kernel's shape). The atomic variants are not TensorFlow's
// (it has none for this op): the scatter with atomic adds a direct backprop would take.
// TensorFlow has a second kernel for M = 1, stride 1, SAME-like padding and images up to 32x32
// (CanLaunchDepthwiseConv2dGPUSmall: DepthwiseConv2dGPUKernelNHWCSmall, the forward kernel with
// the filter rotated): the same order, but its sum is of PseudoHalfType<T>, float for Eigen::half
// (one rounding at the end). d9m defines bwd_data by the general kernel on every config; at f16 an
// M = 1 config of that shape is rounded as TensorFlow's general kernel would, not its small one.
//
// bwd_filter, as TensorFlow's GPU path computes it: DepthwiseConv2dBackpropFilterGPUKernelNHWC,
// one thread per out_backprop element, GpuAtomicAdd(filter_backprop + tap, input * out_backprop)
// for each in-range tap (kh, then kw): NVIDIA's listed atomicAdd source. For half and bfloat16 the
// op casts input and out_backprop to float, runs the float kernel into a float filter gradient and
// casts it back ("half (or bfloat16) implementation is slow and does not use full precision
// accumulation"): products and sums in Acc<T> (float; double at f64), one rounding to T at the
// end (accumulate::apply_widened). The reference adds in source order, so each filter element
// receives its products in (n, oh, ow) order. Under op determinism TensorFlow sends this op to
// cuDNN's grouped convolution instead (group count C), whose algorithms are the cudnn.algoK
// variants here. (Both gradients also go to cuDNN where in_depth == 1 and, at 16 bits, where
// ShouldCudnnGroupedConvolutionBeUsed favours the filter size; for M = 1, stride 1 and images up to
// 32x32 the native filter gradient takes a shared-memory kernel that reduces in warps before its
// atomics. d9m's cuda.atomic is the general kernel.)
//
// PyTorch's conv_depthwise2d (aten/src/ATen/native/cuda/DepthwiseConv2d.cu, the non-cuDNN path,
// NCHW, weight [C*M, 1, KH, KW]) has no atomics in its backward: grad_input is a per-input gather
// summed in acc_type (float at 16 bits) over m, then kh, kw ascending (output positions
// descending: another order than TensorFlow's), and grad_weight is one block per weight element,
// a warp per image and a fixed block reduction. Neither calls alertNotDeterministic, so
// torch.use_deterministic_algorithms(True) lets both run unchanged (and on the cuDNN path makes
// cuDNN pick deterministic algorithms). d9m follows TensorFlow's arithmetic, not PyTorch's.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/common/window.h"

namespace d9m::depthwise {

struct Geometry {
  std::int64_t n = 0, c = 0, m = 0;  // batch, input channels, channel multiplier
  Window1d y, x;                     // k = filter extent
};

D9M_HD inline std::int64_t out_channels(const Geometry& g) { return g.c * g.m; }
// out_backprop elements: the sources of both scatter forms.
D9M_HD inline std::int64_t dy_elements(const Geometry& g) { return g.n * g.y.out * g.x.out * out_channels(g); }
D9M_HD inline std::int64_t taps(const Geometry& g) { return g.y.k * g.x.k; }

// out_backprop element e (flat NHWC): its position and channels.
struct DyElement {
  std::int64_t n, oh, ow, c, m;
};
D9M_HD inline DyElement dy_element(const Geometry& g, std::int64_t e) {
  const std::int64_t k = e % out_channels(g), pos = e / out_channels(g);
  return {pos / g.x.out / g.y.out, (pos / g.x.out) % g.y.out, pos % g.x.out, k / g.m, k % g.m};
}

// The input row (column) that tap kh (kw) of output row oh (column ow) reads; out of [0, in) is
// the zero padding.
D9M_HD inline std::int64_t input_index(const Window1d& w, std::int64_t o, std::int64_t k) {
  return o * w.stride - w.pad_before + k * w.dilation;
}

// Scatter form of both gradients: source = out_backprop element e (TensorFlow's bwd_filter
// threads), or with split_taps (bwd_data's cuda.atomic) source = tap * dy_elements + e, one tap
// per source, so the sources that meet in one input element lie far apart in the grid and run on
// different SMs at once (with a thread per element, neighbours reach a shared input element at
// different taps, well apart in time, as conv2d_bwd_data's cuda.atomic found on an H100). Order is
// free there; the reference takes split_taps = false.
//   kToFilter false: dx[n, ih, iw, c]   += mul(dy[e], w[kh, kw, c, m])           (in T)
//   kToFilter true:  dw[kh, kw, c, m]   += widen(x[n, ih, iw, c]) * widen(dy[e]) (in Acc<T>)
// `other` is the filter (bwd_data) or the input (bwd_filter).
template <class T, bool kToFilter>
struct Grads {
  Geometry g;
  const T* other;
  const T* dy;
  bool split_taps = false;

  D9M_HD std::size_t sources() const {
    return static_cast<std::size_t>(dy_elements(g) * (split_taps ? taps(g) : 1));
  }

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s);
    const std::int64_t e = split_taps ? i % dy_elements(g) : i;
    const std::int64_t first = split_taps ? i / dy_elements(g) : 0, last = split_taps ? first + 1 : taps(g);
    const DyElement at = dy_element(g, e);
    for (std::int64_t tap = first; tap < last; ++tap) {
      const std::int64_t kh = tap / g.x.k, kw = tap % g.x.k;
      const std::int64_t ih = input_index(g.y, at.oh, kh), iw = input_index(g.x, at.ow, kw);
      if (ih < 0 || ih >= g.y.in || iw < 0 || iw >= g.x.in) continue;
      const std::int64_t x_at = ((at.n * g.y.in + ih) * g.x.in + iw) * g.c + at.c;
      const std::int64_t w_at = (tap * g.c + at.c) * g.m + at.m;
      if constexpr (kToFilter) emit(static_cast<std::size_t>(w_at), widen(other[x_at]) * widen(dy[e]));
      else emit(static_cast<std::size_t>(x_at), mul(dy[e], other[w_at]));
    }
  }
};

// Gather form of bwd_data (TensorFlow's kernel): input element i (flat NHWC) sums its products
// in T from 0, output rows ascending (taps kh descending), output columns ascending (kw
// descending), then m ascending: the reference order.
template <class T>
D9M_HD inline T gather_data(const Geometry& g, const T* filter, const T* dy, std::int64_t i) {
  const std::int64_t c = i % g.c, iw = (i / g.c) % g.x.in, ih = (i / g.c / g.x.in) % g.y.in, n = i / g.c / g.x.in / g.y.in;
  T sum{};  // +0 in every float type
  for (std::int64_t kh = g.y.k - 1; kh >= 0; --kh) {
    const std::int64_t oh_num = ih + g.y.pad_before - kh * g.y.dilation;
    if (oh_num < 0 || oh_num % g.y.stride != 0 || oh_num / g.y.stride >= g.y.out) continue;
    const std::int64_t oh = oh_num / g.y.stride;
    for (std::int64_t kw = g.x.k - 1; kw >= 0; --kw) {
      const std::int64_t ow_num = iw + g.x.pad_before - kw * g.x.dilation;
      if (ow_num < 0 || ow_num % g.x.stride != 0 || ow_num / g.x.stride >= g.x.out) continue;
      const std::int64_t ow = ow_num / g.x.stride;
      const T* dy_at = dy + ((n * g.y.out + oh) * g.x.out + ow) * out_channels(g) + c * g.m;
      const T* w_at = filter + ((kh * g.x.k + kw) * g.c + c) * g.m;
      for (std::int64_t m = 0; m < g.m; ++m) sum = add(sum, mul(dy_at[m], w_at[m]));
    }
  }
  return sum;
}

// Gather form of bwd_filter: filter element j (flat [KH, KW, C, M]) sums its products in Acc<T>
// from 0 over n, oh, ow ascending (the reference order), rounded once to T.
template <class T>
D9M_HD inline T gather_filter(const Geometry& g, const T* input, const T* dy, std::int64_t j) {
  const std::int64_t m = j % g.m, c = (j / g.m) % g.c, tap = j / g.m / g.c;
  const std::int64_t kh = tap / g.x.k, kw = tap % g.x.k;
  Acc<T> sum = 0;
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t oh = 0; oh < g.y.out; ++oh) {
      const std::int64_t ih = input_index(g.y, oh, kh);
      if (ih < 0 || ih >= g.y.in) continue;
      for (std::int64_t ow = 0; ow < g.x.out; ++ow) {
        const std::int64_t iw = input_index(g.x, ow, kw);
        if (iw < 0 || iw >= g.x.in) continue;
        const Acc<T> x = widen(input[((n * g.y.in + ih) * g.x.in + iw) * g.c + c]);
        sum = sum + x * widen(dy[((n * g.y.out + oh) * g.x.out + ow) * out_channels(g) + c * g.m + m]);
      }
    }
  return narrow<T>(sum);
}

}  // namespace d9m::depthwise
