// resize family, TensorFlow semantics (tf.raw_ops), NHWC:
//   resize_bilinear(images[N,H,W,C], size=[OH,OW], align_corners, half_pixel_centers) -> [N,OH,OW,C]
//   resize_bilinear_grad(grads[N,OH,OW,C], original_image[N,H,W,C], ...)             -> [N,H,W,C]
//   resize_nearest(images, size, align_corners, half_pixel_centers)                  -> [N,OH,OW,C]
//   resize_nearest_grad(grads[N,OH,OW,C], size=[H,W], ...)                           -> [N,H,W,C]
// scale = (align_corners && out > 1) ? (in - 1) / (out - 1) : in / out   (float, as TF)
// Bilinear source coordinate of output index i:
//   half_pixel_centers ? (i + 0.5) * scale - 0.5 : i * scale
//   lower = min(max(floor(c), 0), in - 1), upper = min(ceil(c), in - 1), lerp = c - floor(c)
//   forward: top = tl + (tr - tl) * xl; bottom = bl + (br - bl) * xl; out = top + (bottom - top) * yl
//   grad:    each grads element g adds g*(1-yl)*(1-xl), g*(1-yl)*xl, g*yl*(1-xl), g*yl*xl to
//            (lower,lower), (lower,upper), (upper,lower), (upper,upper), in that order
// Nearest source index: c = half_pixel_centers ? (i + 0.5) * scale : i * scale;
//   min(align_corners ? round(c) : floor(c), in - 1), then max(., 0) with half_pixel_centers.
// The grads share the forward mapping (grads are at the resized size).
// At every float dtype: coordinates and lerps are float as above; the forward interpolates in
// Acc<T> (f32, or f64 for f64) and rounds once to the dtype; each grad contribution is g times
// its weights in Acc<T>, rounded to the dtype, and added in the dtype (one rounding per add, as
// PyTorch's upsample backward adds with atomicAdd on __half).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/registry.h"

namespace d9m::resize {

struct Geometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;  // h, w: small side; oh, ow: resized
  bool align_corners = false, half_pixel_centers = true;
  float y_scale = 0, x_scale = 0;                         // source pixels per resized pixel
};

inline float resize_scale(std::int64_t in, std::int64_t out, bool align_corners) {
  return (align_corners && out > 1) ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                                    : static_cast<float>(in) / static_cast<float>(out);
}

struct BilinearTap {
  std::int64_t lower, upper;
  float lerp;
};

// Computed per index rather than tabulated, so that host and device run the same operations.
D9M_HD inline BilinearTap bilinear_tap(std::int64_t i, std::int64_t in, float scale, bool half_pixel) {
  const float fi = static_cast<float>(i);
  const float c = half_pixel ? (fi + 0.5f) * scale - 0.5f : fi * scale;
  const float cf = floorf(c);
  const auto lower = static_cast<std::int64_t>(cf);
  const auto upper = static_cast<std::int64_t>(ceilf(c));
  // TensorFlow clamps lower below only: its coordinate stays under `in` in real arithmetic, but in
  // float it can round up to `in` (in or out near 2^24), and lower = in then reads and writes a
  // row past the image (the next image's, or past the tensor). Clamped both ways, the tap keeps
  // lower <= upper <= in - 1, which the gather form relies on too; no valid config changes.
  const std::int64_t top = in - 1;
  return {lower < 0 ? 0 : lower > top ? top : lower, upper < top ? upper : top, c - cf};
}

D9M_HD inline std::int64_t nearest_tap(std::int64_t i, std::int64_t in, float scale, bool align_corners, bool half_pixel) {
  const float fi = static_cast<float>(i);
  const float c = half_pixel ? (fi + 0.5f) * scale : fi * scale;
  std::int64_t k = static_cast<std::int64_t>(align_corners ? roundf(c) : floorf(c));
  if (k > in - 1) k = in - 1;
  if (half_pixel && k < 0) k = 0;
  return k;
}

// Forward value at resized (n, oy, ox, c), rounded once to T.
template <class T>
D9M_HD inline T bilinear_value(const Geometry& g, const T* in, std::int64_t n, std::int64_t oy, std::int64_t ox, std::int64_t c) {
  using A = Acc<T>;
  const BilinearTap ty = bilinear_tap(oy, g.h, g.y_scale, g.half_pixel_centers);
  const BilinearTap tx = bilinear_tap(ox, g.w, g.x_scale, g.half_pixel_centers);
  const A tl = widen(in[((n * g.h + ty.lower) * g.w + tx.lower) * g.c + c]);
  const A tr = widen(in[((n * g.h + ty.lower) * g.w + tx.upper) * g.c + c]);
  const A bl = widen(in[((n * g.h + ty.upper) * g.w + tx.lower) * g.c + c]);
  const A br = widen(in[((n * g.h + ty.upper) * g.w + tx.upper) * g.c + c]);
  const A top = tl + (tr - tl) * A(tx.lerp);
  const A bottom = bl + (br - bl) * A(tx.lerp);
  return narrow<T>(top + (bottom - top) * A(ty.lerp));
}

template <class T>
D9M_HD inline T nearest_value(const Geometry& g, const T* in, std::int64_t n, std::int64_t oy, std::int64_t ox, std::int64_t c) {
  const std::int64_t y = nearest_tap(oy, g.h, g.y_scale, g.align_corners, g.half_pixel_centers);
  const std::int64_t x = nearest_tap(ox, g.w, g.x_scale, g.align_corners, g.half_pixel_centers);
  return in[((n * g.h + y) * g.w + x) * g.c + c];
}

// Source s of both grads: the grads pixel (n, y, x) at the resized size.
struct Pixel {
  std::int64_t px, n, oy, ox;
};
D9M_HD inline Pixel pixel_of(const Geometry& g, std::size_t s) {
  const auto px = static_cast<std::int64_t>(s);
  return {px, px / g.ow / g.oh, (px / g.ow) % g.oh, px % g.ow};
}

// Corner k of a grads value v: 0 (lower, lower), 1 (lower, upper), 2 (upper, lower), 3 (upper,
// upper) as (y, x); v times the corner's y weight, then its x weight, rounded to T. The scatter
// and the gather forms both call it, so each contribution has the same bits in both.
template <class T>
D9M_HD inline T bilinear_share(Acc<T> v, const BilinearTap& ty, const BilinearTap& tx, int k) {
  using A = Acc<T>;
  const A wy = (k & 2) ? A(ty.lerp) : A(1.0f - ty.lerp);
  const A wx = (k & 1) ? A(tx.lerp) : A(1.0f - tx.lerp);
  return narrow<T>(v * wy * wx);
}

// Scatter form of resize_bilinear_grad: source = one grads pixel (n, y, x); per channel it adds
// g*(1-yl)*(1-xl), g*(1-yl)*xl, g*yl*(1-xl), g*yl*xl to the four taps, in that order.
template <class T>
struct BilinearGradTaps {
  Geometry g;
  const T* grads;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    using A = Acc<T>;
    const auto [px, n, oy, ox] = pixel_of(g, s);
    const BilinearTap ty = bilinear_tap(oy, g.h, g.y_scale, g.half_pixel_centers);
    const BilinearTap tx = bilinear_tap(ox, g.w, g.x_scale, g.half_pixel_centers);
    const std::int64_t top = (n * g.h + ty.lower) * g.w, bottom = (n * g.h + ty.upper) * g.w;
    for (std::int64_t c = 0; c < g.c; ++c) {
      const A v = widen(grads[px * g.c + c]);
      emit(static_cast<std::size_t>((top + tx.lower) * g.c + c), bilinear_share<T>(v, ty, tx, 0));
      emit(static_cast<std::size_t>((top + tx.upper) * g.c + c), bilinear_share<T>(v, ty, tx, 1));
      emit(static_cast<std::size_t>((bottom + tx.lower) * g.c + c), bilinear_share<T>(v, ty, tx, 2));
      emit(static_cast<std::size_t>((bottom + tx.upper) * g.c + c), bilinear_share<T>(v, ty, tx, 3));
    }
  }
};

// Scatter form of resize_nearest_grad: source = one grads pixel; it adds to its nearest pixel.
template <class T>
struct NearestGradTaps {
  Geometry g;
  const T* grads;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto [px, n, oy, ox] = pixel_of(g, s);
    const std::int64_t y = nearest_tap(oy, g.h, g.y_scale, g.align_corners, g.half_pixel_centers);
    const std::int64_t x = nearest_tap(ox, g.w, g.x_scale, g.align_corners, g.half_pixel_centers);
    const std::int64_t base = ((n * g.h + y) * g.w + x) * g.c;
    for (std::int64_t c = 0; c < g.c; ++c) emit(static_cast<std::size_t>(base + c), grads[px * g.c + c]);
  }
};

// ---- gather forms (map_variants.h): a source pixel enumerates the grads pixels that sample it --
//
// Along one axis, a tap's lower and upper (and a nearest tap) never decrease as the resized index
// grows: the coordinate is a monotone float expression, and floor, ceil, round and the clamps
// keep the order. So the resized indices that sample source index i form one range, found with
// the very tap functions of the scatter form (no closed form that float rounding could make miss
// an index): from a guess, step down while the index before still reaches i, then up while this
// one does not. Any guess gives the same answer; a close one (the inverse of the scale) makes
// it a step or two instead of a binary search's log2(out) taps (on the CPU, bench_2MiB: the
// variant at 2.6x the atomic one's time instead of 3.05x).

// The first resized index o in [0, out) with key(o) >= i, or out; key never decreases.
template <class Key>
D9M_HD inline std::int64_t first_reaching(std::int64_t out, std::int64_t i, float scale, Key key) {
  const float guess = scale > 0 ? (static_cast<float>(i) - 1.0f) / scale : 0.0f;  // o ~ c / scale, one short
  std::int64_t o = guess <= 0 ? 0 : guess >= static_cast<float>(out) ? out : static_cast<std::int64_t>(guess);
  while (o > 0 && key(o - 1) >= i) --o;
  while (o < out && key(o) < i) ++o;
  return o;
}

// What both gathers hold (the map form's Op<T>, map_variants.h): the geometry, the grads, and
// the output element (n, y, x, c) at a flat index.
//
// Each gather finds an element's contributions with each_share(at, visit), the one walk both its
// forms use: operator() (an element, a GPU thread) sums them for one channel, and run_block (the
// CPU's blocks) walks a pixel once and adds each contribution to every channel of the pixel in the
// block. A channel's sum still takes its contributions in the walk's order, from +0, one rounding
// per add, so both forms have the same bits; run_block only stops recomputing the taps per channel
// (bench_2MiB has 16 channels).
template <class T>
struct GradGather {
  Geometry g;
  const T* grads;
  std::size_t n_out;
  explicit GradGather(const KernelArgs& a)
      : g(a.problem.geom<Geometry>()), grads(a.in<T>(0)), n_out(static_cast<std::size_t>(a.problem.output.numel())) {}
  std::size_t items() const { return n_out; }
  struct Element {
    std::int64_t n, y, x, c;
  };
  D9M_HD Element element(std::size_t o) const {
    const auto e = static_cast<std::int64_t>(o);
    return {e / g.c / g.w / g.h, (e / g.c / g.w) % g.h, (e / g.c) % g.w, e % g.c};
  }
  D9M_HD std::int64_t grad_index(const Element& at, std::int64_t oy, std::int64_t ox) const {
    return ((at.n * g.oh + oy) * g.ow + ox) * g.c + at.c;
  }

  // The elements [begin, end) of the output, pixel by pixel: pixel(at, first, last) for the
  // elements [first, last) of one pixel, at = element(first).
  template <class PixelFn>
  void by_pixel(std::size_t begin, std::size_t end, PixelFn pixel) const {
    for (std::size_t o = begin; o < end;) {
      const Element at = element(o);
      const std::size_t rest = static_cast<std::size_t>(g.c - at.c);
      const std::size_t last = end - o < rest ? end : o + rest;
      pixel(at, o, last);
      o = last;
    }
  }

  // operator() and run_block of a gather Self (CRTP), from Self::each_share(at, visit), where
  // visit(grad_index, share) gets the grads element of channel at.c and share(v) turns its value
  // v (widened) into the contribution.
  template <class Self>
  D9M_HD void element_sum(const Self& self, std::size_t o, T* out) const {
    const Element at = element(o);
    T sum{};  // +0, as the scatter form's zeroed output
    self.each_share(at, [&](std::int64_t i, auto share) { sum = add(sum, share(widen(grads[i]))); });
    out[o] = sum;
  }
  template <class Self>
  void block_sum(const Self& self, std::size_t begin, std::size_t end, T* out) const {
    by_pixel(begin, end, [&](const Element& at, std::size_t first, std::size_t last) {
      const std::size_t k = last - first;
      T* sums = out + first;
      for (std::size_t j = 0; j < k; ++j) sums[j] = T{};
      self.each_share(at, [&](std::int64_t i, auto share) {
        const T* v = grads + i;  // channels at.c, at.c + 1, ... of the grads pixel
        for (std::size_t j = 0; j < k; ++j) sums[j] = add(sums[j], share(widen(v[j])));
      });
    });
  }
};

// resize_bilinear_grad gathered: output element (n, y, x, c) adds, over the grads pixels (oy, ox)
// in increasing order (the scatter's source order), the corners of that pixel that are (y, x), in
// corner order: the contributions serial adds to it, in serial's order, from the same +0.
template <class T>
struct BilinearGradGather : GradGather<T> {
  using GradGather<T>::GradGather;
  using Element = typename GradGather<T>::Element;
  template <class Visit>
  D9M_HD void each_share(const Element& at, Visit visit) const {
    const Geometry& geo = this->g;
    const std::int64_t oy0 =
        first_reaching(geo.oh, at.y, geo.y_scale, [&](std::int64_t i) { return bilinear_tap(i, geo.h, geo.y_scale, geo.half_pixel_centers).upper; });
    const std::int64_t ox0 =
        first_reaching(geo.ow, at.x, geo.x_scale, [&](std::int64_t i) { return bilinear_tap(i, geo.w, geo.x_scale, geo.half_pixel_centers).upper; });
    for (std::int64_t oy = oy0; oy < geo.oh; ++oy) {
      const BilinearTap ty = bilinear_tap(oy, geo.h, geo.y_scale, geo.half_pixel_centers);
      if (ty.lower > at.y) break;
      for (std::int64_t ox = ox0; ox < geo.ow; ++ox) {
        const BilinearTap tx = bilinear_tap(ox, geo.w, geo.x_scale, geo.half_pixel_centers);
        if (tx.lower > at.x) break;
        for (int k = 0; k < 4; ++k)
          if (((k & 2) ? ty.upper : ty.lower) == at.y && ((k & 1) ? tx.upper : tx.lower) == at.x)
            visit(this->grad_index(at, oy, ox), [&](Acc<T> v) { return bilinear_share<T>(v, ty, tx, k); });
      }
    }
  }
  D9M_HD void operator()(std::size_t o, T* out) const { this->element_sum(*this, o, out); }
  void run_block(std::size_t begin, std::size_t end, T* out) const { this->block_sum(*this, begin, end, out); }
};

// resize_nearest_grad gathered: output element (n, y, x, c) adds the grads pixels whose nearest
// tap is (y, x), in increasing order.
template <class T>
struct NearestGradGather : GradGather<T> {
  using GradGather<T>::GradGather;
  using Element = typename GradGather<T>::Element;
  template <class Visit>
  D9M_HD void each_share(const Element& at, Visit visit) const {
    const Geometry& geo = this->g;
    auto tap_y = [&](std::int64_t i) { return nearest_tap(i, geo.h, geo.y_scale, geo.align_corners, geo.half_pixel_centers); };
    auto tap_x = [&](std::int64_t i) { return nearest_tap(i, geo.w, geo.x_scale, geo.align_corners, geo.half_pixel_centers); };
    const std::int64_t ox0 = first_reaching(geo.ow, at.x, geo.x_scale, tap_x);
    for (std::int64_t oy = first_reaching(geo.oh, at.y, geo.y_scale, tap_y); oy < geo.oh && tap_y(oy) == at.y; ++oy)
      for (std::int64_t ox = ox0; ox < geo.ow && tap_x(ox) == at.x; ++ox)
        visit(this->grad_index(at, oy, ox), [](Acc<T> v) { return narrow<T>(v); });
  }
  D9M_HD void operator()(std::size_t o, T* out) const { this->element_sum(*this, o, out); }
  void run_block(std::size_t begin, std::size_t end, T* out) const { this->block_sum(*this, begin, end, out); }
};

}  // namespace d9m::resize
