// maxpool family, TensorFlow semantics, NHWC:
//   maxpool2d     = MaxPool(input[N,H,W,C], ksize, strides, padding) -> output[N,OH,OW,C]
//   maxpool2d_bwd = MaxPoolGrad(orig_input[N,H,W,C], orig_output[N,OH,OW,C], grad[N,OH,OW,C],
//                               ksize, strides, padding) -> output[N,H,W,C]
// Both take the same parameters with the same meanings and defaults, so one config serves a
// forward and its backward. A window's maximum is its first maximum in scan order (kh, then kw),
// as TensorFlow's kernels compare with a strict '>': the forward outputs its value, the backward
// sends the window's gradient to its position. A NaN wins only as a window's first element (every
// comparison with a NaN is false), as TensorFlow's GPU kernels without TF_ENABLE_MAXPOOL_NANPROP.
// Padded positions never win. Overlapping windows (kernel > stride) add into shared positions;
// the reference adds windows in increasing (n, oh, ow, c) order. orig_output is the forward max
// pool of orig_input (pool_at below, the code of maxpool2d itself), generated so the arguments are
// consistent. At f16/bf16/f64 every tensor has that dtype; maxima are compared exactly (widened),
// and each window's gradient is added at its argmax in the dtype (one rounding per add, as
// PyTorch's atomicAdd on __half). The forward only selects: every variant gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/common/window.h"

namespace d9m::maxpool {

struct Geometry {
  std::int64_t n = 0, c = 0;
  Window1d y, x;
  std::int64_t levels = 0;  // orig_input's fill: 0 random, L > 0 the integers [0, L) (maxima tie)
};

// Flat NHWC index of the first maximum of the window at (n, oh, ow, c), or -1 if the window
// lies entirely in padding (impossible with TensorFlow's padding, kept for safety).
template <class T>
D9M_HD inline std::int64_t argmax(const Geometry& g, const T* in, std::int64_t n, std::int64_t oh, std::int64_t ow,
                                  std::int64_t c) {
  std::int64_t best = -1;
  Acc<T> best_value = 0;
  for (std::int64_t kh = 0; kh < g.y.k; ++kh) {
    const std::int64_t ih = oh * g.y.stride - g.y.pad_before + kh;
    if (ih < 0 || ih >= g.y.in) continue;
    for (std::int64_t kw = 0; kw < g.x.k; ++kw) {
      const std::int64_t iw = ow * g.x.stride - g.x.pad_before + kw;
      if (iw < 0 || iw >= g.x.in) continue;
      const std::int64_t idx = ((n * g.y.in + ih) * g.x.in + iw) * g.c + c;
      if (best < 0 || widen(in[idx]) > best_value) {
        best = idx;
        best_value = widen(in[idx]);
      }
    }
  }
  return best;
}

// The forward max pool at output element o (flat NHWC index into [N, OH, OW, C]): the value of the
// window's first maximum (0 for a window entirely in padding, which TensorFlow's padding never makes).
template <class T>
D9M_HD inline T pool_at(const Geometry& g, const T* in, std::int64_t o) {
  const std::int64_t c = o % g.c, ow = (o / g.c) % g.x.out, oh = (o / g.c / g.x.out) % g.y.out,
                     n = o / g.c / g.x.out / g.y.out;
  const std::int64_t at = argmax(g, in, n, oh, ow, c);
  return at < 0 ? T{} : in[at];
}

// maxpool2d in map form (kernels/common/map_variants.h): one item per output element.
template <class T>
struct PoolMap {
  Geometry g;
  const T* input;
  std::size_t n;
  explicit PoolMap(const KernelArgs& a)
      : g(a.problem.geom<Geometry>()), input(a.in<T>(0)), n(static_cast<std::size_t>(a.problem.output.numel())) {}
  std::size_t items() const { return n; }
  D9M_HD void operator()(std::size_t o, T* out) const { out[o] = pool_at(g, input, static_cast<std::int64_t>(o)); }
};

// Scatter form: source = one window (n, oh, ow, c) in flat NHWC order of grad; it adds its
// gradient at the window's first maximum.
template <class T>
struct WindowGrads {
  Geometry g;
  const T* orig_input;
  const T* grad;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s);
    const std::int64_t c = i % g.c, ow = (i / g.c) % g.x.out, oh = (i / g.c / g.x.out) % g.y.out,
                       n = i / g.c / g.x.out / g.y.out;
    const std::int64_t at = argmax(g, orig_input, n, oh, ow, c);
    if (at >= 0) emit(static_cast<std::size_t>(at), grad[s]);
  }
};

// Gather form of maxpool2d_bwd, in two passes (cpu.gather, cuda.gather):
//   1. every window's first maximum, found as the scatter form finds it (argmax), kept as a flat
//      index: 8 bytes per window, allocated once per case (prepare), not per trial;
//   2. input element e adds the gradients of the windows that cover it and whose maximum it is,
//      in increasing (oh, ow) order: the windows serial adds into e, in serial's order, from the
//      same +0. A window covers ih when oh s - pad <= ih <= oh s - pad + k - 1.
// Recomputing the maxima in pass 2 instead would read k_h k_w values per covering window (81 per
// element for 3x3 windows at stride 1): 5x the atomic variant's time on the CPU, measured.

inline std::size_t windows_of(const Problem& p) { return static_cast<std::size_t>(p.inputs[2].numel()); }
inline std::optional<WorkingMemory> gather_memory(const Problem& p) {
  return WorkingMemory{8 * windows_of(p), "the first maximum of every window, 8 bytes each"};
}
inline Claim gather_claim() {
  return {Determinism::deterministic, ClaimSource::design,
          "each window's maximum found once, then each input sums the windows whose maximum it is in the reference "
          "order: no atomics, no sort"};
}

// The windows along one axis that cover input index i: [first_window, last_window).
D9M_HD inline std::int64_t first_window(const Window1d& w, std::int64_t i) {
  const std::int64_t lowest = i + w.pad_before - (w.k - 1);  // o s >= this
  return lowest <= 0 ? 0 : (lowest + w.stride - 1) / w.stride;
}
D9M_HD inline std::int64_t last_window(const Window1d& w, std::int64_t i) {
  const std::int64_t last = (i + w.pad_before) / w.stride + 1;  // o s <= i + pad
  return last < w.out ? last : w.out;
}

// Pass 1 at window s (flat NHWC index into grad).
template <class T>
D9M_HD inline std::int64_t window_argmax(const Geometry& g, const T* orig_input, std::int64_t s) {
  const std::int64_t c = s % g.c, ow = (s / g.c) % g.x.out, oh = (s / g.c / g.x.out) % g.y.out, n = s / g.c / g.x.out / g.y.out;
  return argmax(g, orig_input, n, oh, ow, c);
}

// Pass 2 at input element e, from pass 1's maxima.
template <class T>
D9M_HD inline T gathered_grad(const Geometry& g, const std::int64_t* maxima, const T* grad, std::int64_t e) {
  const std::int64_t c = e % g.c, iw = (e / g.c) % g.x.in, ih = (e / g.c / g.x.in) % g.y.in, n = e / g.c / g.x.in / g.y.in;
  T sum{};  // +0, as the scatter form's zeroed output
  const std::int64_t oh_end = last_window(g.y, ih), ow_begin = first_window(g.x, iw), ow_end = last_window(g.x, iw);
  for (std::int64_t oh = first_window(g.y, ih); oh < oh_end; ++oh)
    for (std::int64_t ow = ow_begin; ow < ow_end; ++ow) {
      const std::int64_t s = ((n * g.y.out + oh) * g.x.out + ow) * g.c + c;
      if (maxima[s] == e) sum = add(sum, grad[s]);
    }
  return sum;
}

}  // namespace d9m::maxpool
