// resampler family: the gradients of bilinear sampling at arbitrary points, with the semantics of
// the two frameworks that define it (parameter `semantics`):
//
// tensorflow: tfa.image.resampler / tf.contrib.resampler (ResamplerGrad), NHWC, pixel coordinates:
//   resampler_grad_data(warp[B,P,2], grad_output[B,P,C])              -> grad_data[B,H,W,C]
//   resampler_grad_warp(data[B,H,W,C], warp[B,P,2], grad_output[B,P,C]) -> grad_warp[B,P,2]
//   warp holds (x, y). A point counts only if -1 < x < W and -1 < y < H (compared in T); then
//   fx = floor(float(x)) (TF floors the coordinate cast to float, at every T), cx = fx + 1, and
//   dx = T(cx) - x, likewise for y. Its gradient, thread (b, p, c) of TF's GPU kernel, adds
//     g dx dy at (fx, fy), g (1-dx)(1-dy) at (cx, cy), g dx (1-dy) at (fx, cy), g (1-dx) dy at
//     (cx, fy), in that order and with that association ((g dx) dy), each corner only if inside,
//   and to the warp g ((1-dy)(I_cc - I_fc) + dy (I_cf - I_ff)) for x and
//   g ((1-dx)(I_cc - I_cf) + dx (I_fc - I_ff)) for y (I_xy the data at corner (x, y), 0 outside).
//   TF's GPU kernel adds both gradients with atomicAdd: grad_data's from every point near a
//   pixel, grad_warp's from every channel of a point.
//
// grid_sample: PyTorch's grid_sample backward (bilinear, padding_mode zeros), NCHW, coordinates
// normalised to [-1, 1]:
//   resampler_grad_data(grid[N,1,P,2], grad_output[N,C,1,P]) -> grad_input[N,C,H,W]
//   ix = ((x + 1) / 2) (W - 1) with align_corners, ((x + 1) W - 1) / 2 without, computed in
//   float (double at f64) and rounded to T, as PyTorch's unnormalize; ix_nw = floor(ix); the
//   weights nw = (ix_nw + 1 - ix)(iy_nw + 1 - iy), ne = (ix - ix_nw)(iy_nw + 1 - iy),
//   sw = (ix_nw + 1 - ix)(iy - iy_nw), se = (ix - ix_nw)(iy - iy_nw) in T; thread (n, p) of
//   PyTorch's kernel adds, for each channel, nw g, ne g, sw g, se g at the corners that are
//   inside (fastAtomicAdd). Every point counts; only corners outside are dropped.
//
// The two differ in bits where they agree in value: TF's (1 - dx) against PyTorch's (ix - ix_nw),
// TF's (g dx) dy against PyTorch's (dx dy) g, TF's cut at -1 < x against PyTorch's per corner.
//
// Arithmetic is in T, one rounding per operation (half.h add, sub, mul: Eigen's and c10's 16-bit
// arithmetic), and each contribution is added in T. The reference adds in increasing source
// order: (b, p, c) for TF, (n, p) then c for PyTorch, which is increasing point for every target.
// TF registers its GPU gradient for float only and its CPU one for half, float and double; d9m
// runs both semantics at every precision.
#pragma once
#include <math.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::resampler {

enum class Semantics : std::uint8_t { tensorflow, grid_sample };

struct Geometry {
  std::int64_t batch = 0, h = 0, w = 0, c = 0, points = 0;
  Semantics semantics = Semantics::tensorflow;
  bool align_corners = false;
};

template <class T>
D9M_HD inline T of_int(std::int64_t v) {
  return from_float<T>(static_cast<float>(v));
}

// TensorFlow's bilinear point: whether it counts, its floor corner and the weights dx, dy.
template <class T>
struct TfPoint {
  bool counts = false;
  std::int64_t fx = 0, fy = 0;
  T dx{}, dy{};
};

template <class T>
D9M_HD inline TfPoint<T> tf_point(const Geometry& g, T x, T y) {
  TfPoint<T> p;
  const Acc<T> wx = widen(x), wy = widen(y), minus_one = widen(of_int<T>(-1));
  p.counts = wx > minus_one && wy > minus_one && wx < widen(of_int<T>(g.w)) && wy < widen(of_int<T>(g.h));
  if (!p.counts) return p;
  p.fx = static_cast<std::int64_t>(floorf(to_float(x)));
  p.fy = static_cast<std::int64_t>(floorf(to_float(y)));
  p.dx = sub(of_int<T>(p.fx + 1), x);
  p.dy = sub(of_int<T>(p.fy + 1), y);
  return p;
}

// PyTorch's unnormalize (padding_mode zeros: no clipping).
template <class T>
D9M_HD inline T unnormalize(T coord, std::int64_t size, bool align_corners) {
  const Acc<T> c = widen(coord);
  const auto n = static_cast<Acc<T>>(size);
  return narrow<T>(align_corners ? ((c + 1) / 2) * (n - 1) : ((c + 1) * n - 1) / 2);
}

// Scatter form of resampler_grad_data. Sources: (b, p, c) for TF, (n, p) for PyTorch, the
// threads of their kernels.
template <class T>
struct DataGrads {
  Geometry g;
  const T* coords;       // warp or grid: (x, y) per point
  const T* grad_output;  // [B,P,C] or [N,C,1,P]

  D9M_HD std::size_t sources() const {
    return static_cast<std::size_t>(g.batch * g.points * (g.semantics == Semantics::tensorflow ? g.c : 1));
  }

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s);
    if (g.semantics == Semantics::tensorflow) {
      const std::int64_t c = i % g.c, bp = i / g.c, b = bp / g.points;
      const TfPoint<T> p = tf_point(g, coords[bp * 2], coords[bp * 2 + 1]);
      if (!p.counts) return;
      const T gv = grad_output[i], one = of_int<T>(1), ex = sub(one, p.dx), ey = sub(one, p.dy);
      const std::int64_t cx = p.fx + 1, cy = p.fy + 1;
      auto at = [&](std::int64_t x, std::int64_t y) { return static_cast<std::size_t>(((b * g.h + y) * g.w + x) * g.c + c); };
      if (p.fx >= 0 && p.fy >= 0) emit(at(p.fx, p.fy), mul(mul(gv, p.dx), p.dy));
      if (cx <= g.w - 1 && cy <= g.h - 1) emit(at(cx, cy), mul(mul(gv, ex), ey));
      if (p.fx >= 0 && cy <= g.h - 1) emit(at(p.fx, cy), mul(mul(gv, p.dx), ey));
      if (cx <= g.w - 1 && p.fy >= 0) emit(at(cx, p.fy), mul(mul(gv, ex), p.dy));
      return;
    }
    const std::int64_t n = i / g.points, p = i % g.points;
    const T ix = unnormalize(coords[i * 2], g.w, g.align_corners), iy = unnormalize(coords[i * 2 + 1], g.h, g.align_corners);
    // PyTorch floors in scalar_t's arithmetic type (float for 16-bit T, double at f64).
    const auto x0 = static_cast<std::int64_t>(floor(static_cast<double>(widen(ix))));
    const auto y0 = static_cast<std::int64_t>(floor(static_cast<double>(widen(iy))));
    const T lx = sub(ix, of_int<T>(x0)), hx = sub(of_int<T>(x0 + 1), ix);
    const T ly = sub(iy, of_int<T>(y0)), hy = sub(of_int<T>(y0 + 1), iy);
    const T nw = mul(hx, hy), ne = mul(lx, hy), sw = mul(hx, ly), se = mul(lx, ly);
    for (std::int64_t c = 0; c < g.c; ++c) {
      const T gv = grad_output[(n * g.c + c) * g.points + p];
      auto add_at = [&](std::int64_t x, std::int64_t y, T weight) {
        if (x >= 0 && x < g.w && y >= 0 && y < g.h) emit(static_cast<std::size_t>(((n * g.c + c) * g.h + y) * g.w + x), mul(weight, gv));
      };
      add_at(x0, y0, nw);
      add_at(x0 + 1, y0, ne);
      add_at(x0, y0 + 1, sw);
      add_at(x0 + 1, y0 + 1, se);
    }
  }
};

// Scatter form of resampler_grad_warp (TF): source (b, p, c) adds its channel's share to the
// point's x and y gradients.
template <class T>
struct WarpGrads {
  Geometry g;
  const T* data;
  const T* warp;
  const T* grad_output;

  D9M_HD std::size_t sources() const { return static_cast<std::size_t>(g.batch * g.points * g.c); }

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s);
    const std::int64_t c = i % g.c, bp = i / g.c, b = bp / g.points;
    const TfPoint<T> p = tf_point(g, warp[bp * 2], warp[bp * 2 + 1]);
    if (!p.counts) return;
    const std::int64_t cx = p.fx + 1, cy = p.fy + 1;
    auto img = [&](std::int64_t x, std::int64_t y) {
      return x >= 0 && x < g.w && y >= 0 && y < g.h ? data[((b * g.h + y) * g.w + x) * g.c + c] : of_int<T>(0);
    };
    const T ff = img(p.fx, p.fy), cc = img(cx, cy), fc = img(p.fx, cy), cf = img(cx, p.fy);
    const T gv = grad_output[i], one = of_int<T>(1);
    emit(static_cast<std::size_t>(bp * 2), mul(gv, add(mul(sub(one, p.dy), sub(cc, fc)), mul(p.dy, sub(cf, ff)))));
    emit(static_cast<std::size_t>(bp * 2 + 1), mul(gv, add(mul(sub(one, p.dx), sub(cc, cf)), mul(p.dx, sub(fc, ff)))));
  }
};

}  // namespace d9m::resampler
