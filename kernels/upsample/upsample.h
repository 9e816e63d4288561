// upsample family: the gradients of PyTorch's interpolate for the two modes whose CUDA backward
// kernels still scatter with atomics and raise in deterministic mode:
//
//   resize_bicubic_grad(grad_output[N,C,OH,OW])      -> grad_input[N,C,H,W]     (NCHW)
//     upsample_bicubic2d_backward_out_frame, ATen native/cuda/UpSampleBicubic2d.cu
//   resize_trilinear_grad(grad_output[N,C,OD,OH,OW]) -> grad_input[N,C,D,H,W]   (NCDHW)
//     upsample_trilinear3d_backward_out_frame, ATen native/cuda/UpSampleTrilinear3d.cu
//
// Why a family of its own and not kernels/resize/: resize is TensorFlow's ResizeBilinear /
// ResizeNearestNeighbor (NHWC, TF's legacy and half-pixel coordinate rules, a source per grads
// pixel). These are PyTorch's (NCHW / NCDHW, ATen's area_pixel_* coordinate rules, accscalar_t
// weights, a thread per output position looping over the batch and channels). They share no
// coordinate code, no layout and no thread shape.
//
// Why PyTorch's semantics only: PyTorch is the framework whose GPU kernel races. TensorFlow has no
// trilinear resize, and registers ResizeBicubicGrad on the CPU only (float and double,
// kernels/image/resize_bicubic_op.cc): one serial loop over (b, y, x, c) with no atomics, with its
// own coefficients (a 1024-entry table of Keys' cubic, A = -0.5 and weights renormalised at the
// border with half_pixel_centers, A = -0.75 and TF's legacy coordinates without). A "TF" variant
// here would be d9m's invention of a GPU kernel TensorFlow does not have.
//
// PyTorch's rules, as modelled (scales_h / scales_w / scales_d absent: the output_size path, which
// interpolate(size=...) and interpolate(scale_factor=s, recompute_scale_factor=True) take; given
// scale_factor alone PyTorch passes s and uses A(1 / s), the same scale when s is a power of two):
//   accscalar_t A: float for f32, f16 and bf16, double for f64 (at::acc_type<scalar_t, true>).
//   scale = align_corners ? (out > 1 ? A(in - 1) / A(out - 1) : 0) : A(in) / A(out)
//           (area_pixel_compute_scale, computed on the host in A)
//   src(o) = align_corners ? scale * A(o) : scale * (A(o) + 0.5) - 0.5, and for the linear modes
//           (trilinear) a negative src is clamped to 0 (area_pixel_compute_source_index, cubic=false).
//   bicubic: fl = (int)floorf(src) (floorf: at f64 the double is first rounded to float, as the
//           device's floorf(float) takes it), t = src - A(fl); taps fl-1 .. fl+2 with the weights
//           get_cubic_upsampling_coefficients(t), A = -0.75:
//             w0 = c2(t + 1), w1 = c1(t), w2 = c1(1 - t), w3 = c2((1 - t) + 1),
//             c1(x) = (((A + 2) x - (A + 3)) x) x + 1,  c2(x) = (((A x - 5A) x + 8A) x) - 4A.
//           (t + 1.0 and 1.0 - t are double sums rounded to float in PyTorch's source; that is one
//           rounding of the exact sum for every t in [0, 1), so d9m adds in A.)
//           Taps outside the image are clamped to the border row or column
//           (upsample_increment_value_bounded), so one thread may add several times to one border
//           pixel. Contribution (i, j) is static_cast<T>((A(g) * wy[i]) * wx[j]), i outer, j inner.
//   trilinear: i0 = (int)src (src >= 0), p = i0 < in - 1 ? 1 : 0, l1 = src - A(i0), l0 = 1 - l1;
//           corners (dz, dy, dx) in {0,1}^3 in lexicographic order at (i0 + dz p, ...), contribution
//           static_cast<T>(((lz * ly) * lx) * A(g)). At the last index p = 0 and both corners of that
//           axis land on it.
//   Input and output of the same size (every axis): PyTorch's kernel copies grad_output; here the
//           one contribution is added onto the zeroed output (the same bits but for a -0 gradient,
//           which d9m's fills do not make).
// Thread shape (cuda.atomic, as PyTorch's): one thread per output position (oy, ox) or
// (oz, oy, ox), looping n then c inside, every contribution an atomic add in T: atomicAdd on float
// and double, gpuAtomicAddNoReturn / fastAtomicAdd on __half and __nv_bfloat16 (the half2 form
// adds +0 to the neighbouring element, which changes nothing: grad_input starts at +0 and never
// holds -0). So at f16 and bf16 every add rounds to the 16-bit type, as half.h add() does. Block
// sizes differ (PyTorch: 1024 threads for bicubic, 256 for trilinear; d9m: 256 for both).
// Arithmetic: every A operation rounds once, with contraction off on the CPU and the GPU (d9m's
// build). PyTorch's build lets nvcc contract multiply-adds into fma (its default), so a weight may
// differ from PyTorch's in its last bits; the order of the additions into grad_input, which is
// what the audit measures, is PyTorch's.
//
// Reference order (cpu.serial): sources (output positions) in increasing index, each in
// PyTorch's in-thread order. The gather form (cpu.ordered, cuda.ordered) gives each grad_input
// element its own sum: the output positions whose clamped taps reach it form a box (the taps
// move monotonically with the output index, so each end of the box is where a monotone predicate
// flips, per axis), visited in increasing index, each position's taps in PyTorch's order:
// cpu.serial's bits, memory of the output only.
#pragma once
#include <math.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::upsample {

// 2-D ops have d = od = 1.
struct Geometry {
  std::int64_t n = 0, c = 0, d = 1, h = 0, w = 0, od = 1, oh = 0, ow = 0;
  bool align_corners = false;

  D9M_HD bool same_size() const { return d == od && h == oh && w == ow; }
  D9M_HD std::int64_t planes() const { return n * c; }
  D9M_HD std::int64_t positions() const { return od * oh * ow; }
};

template <class A>
D9M_HD inline A area_pixel_scale(std::int64_t in, std::int64_t out, bool align_corners) {
  if (align_corners) return out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  return static_cast<A>(in) / static_cast<A>(out);
}

template <class A>
D9M_HD inline A source_index(A scale, std::int64_t o, bool align_corners, bool cubic) {
  if (align_corners) return scale * static_cast<A>(o);
  const A src = scale * (static_cast<A>(o) + A(0.5)) - A(0.5);
  return (!cubic && src < A(0)) ? A(0) : src;
}

D9M_HD inline std::int64_t clamp_index(std::int64_t i, std::int64_t size) {
  return i < 0 ? 0 : (i > size - 1 ? size - 1 : i);
}

// ---- the weights along one axis ------------------------------------------------------------

template <class A>
D9M_HD inline A cubic_convolution1(A x, A a) {
  return ((a + A(2)) * x - (a + A(3))) * x * x + A(1);
}
template <class A>
D9M_HD inline A cubic_convolution2(A x, A a) {
  return ((a * x - A(5) * a) * x + A(8) * a) * x - A(4) * a;
}

template <class A>
struct CubicTaps {
  std::int64_t first = 0;  // taps first .. first + 3, before clamping
  A w[4];
};

template <class A>
struct LinearTaps {
  std::int64_t i0 = 0, p = 0;  // corners i0 and i0 + p
  A l[2];                      // their weights l0, l1
};

// One axis: its sizes and PyTorch's scale, computed once (on PyTorch's host).
template <class A>
struct Axis {
  std::int64_t in, out;
  bool align_corners, cubic;
  A scale;

  D9M_HD Axis(std::int64_t in_size, std::int64_t out_size, bool align, bool is_cubic)
      : in(in_size), out(out_size), align_corners(align), cubic(is_cubic), scale(area_pixel_scale<A>(in_size, out_size, align)) {}

  D9M_HD CubicTaps<A> cubic_taps(std::int64_t o) const {
    const A src = source_index(scale, o, align_corners, true);
    const auto fl = static_cast<std::int64_t>(floorf(static_cast<float>(src)));
    const A t = src - static_cast<A>(fl);
    const A a = A(-0.75);
    CubicTaps<A> taps;
    taps.first = fl - 1;
    taps.w[0] = cubic_convolution2(t + A(1), a);
    taps.w[1] = cubic_convolution1(t, a);
    const A x2 = A(1) - t;
    taps.w[2] = cubic_convolution1(x2, a);
    taps.w[3] = cubic_convolution2(x2 + A(1), a);
    return taps;
  }

  D9M_HD LinearTaps<A> linear_taps(std::int64_t o) const {
    const A src = source_index(scale, o, align_corners, false);
    LinearTaps<A> taps;
    taps.i0 = static_cast<std::int64_t>(src);
    taps.p = taps.i0 < in - 1 ? 1 : 0;
    taps.l[1] = src - static_cast<A>(taps.i0);
    taps.l[0] = A(1) - taps.l[1];
    return taps;
  }

  // The lowest and highest input index output index o reaches (after clamping): both
  // non-decreasing in o, as the source index is.
  D9M_HD std::int64_t lowest(std::int64_t o) const {
    return cubic ? clamp_index(cubic_taps(o).first, in) : linear_taps(o).i0;
  }
  D9M_HD std::int64_t highest(std::int64_t o) const {
    if (cubic) return clamp_index(cubic_taps(o).first + 3, in);
    const LinearTaps<A> t = linear_taps(o);
    return t.i0 + t.p;
  }

  // The output index whose source index is about `src` (a starting point for the walks below;
  // any value gives the same result, a close one fewer steps).
  D9M_HD std::int64_t near(double src) const {
    if (!(scale > A(0))) return 0;
    const double o = align_corners ? src / static_cast<double>(scale) : (src + 0.5) / static_cast<double>(scale) - 0.5;
    return o <= 0 ? 0 : (o >= static_cast<double>(out) ? out : static_cast<std::int64_t>(o));
  }

  // The output indices whose taps reach input index i: [first, last] (empty when first > last).
  // Both tap bounds are non-decreasing in o, so each end is where a monotone predicate flips:
  // walked to from a nearby start, exact whatever the start.
  D9M_HD void contributors(std::int64_t i, std::int64_t& first, std::int64_t& last) const {
    const double reach = cubic ? 2 : 1;
    std::int64_t o = near(static_cast<double>(i) - reach);  // the first o whose highest tap reaches i
    while (o > 0 && highest(o - 1) >= i) --o;
    while (o < out && highest(o) < i) ++o;
    first = o;
    o = near(static_cast<double>(i) + reach);  // the first o whose lowest tap is past i
    while (o > 0 && lowest(o - 1) > i) --o;
    while (o < out && lowest(o) <= i) ++o;
    last = o - 1;
  }
};

// The taps j in [0, 3] of a window starting at `first` that land on index i after clamping to
// [0, size): one inside, every tap at or past the border at the border (lo > hi: none).
struct TapRange {
  int lo, hi;
};
D9M_HD inline TapRange taps_reaching(std::int64_t first, std::int64_t i, std::int64_t size) {
  const std::int64_t lo = i == 0 ? 0 : i - first, hi = i == size - 1 ? 3 : i - first;
  return {static_cast<int>(lo < 0 ? 0 : lo), static_cast<int>(hi > 3 ? 3 : hi)};
}

// ---- the two ops ----------------------------------------------------------------------------
// Scatter form: source s = one output position (PyTorch's thread), emitting, plane by plane
// (nc = n C + c ascending), its contributions in PyTorch's order. gather(e): grad_input element e
// summed from +0 over the same contributions in the same order (the output positions in its box
// ascending, each position's taps in PyTorch's order).

template <class T>
struct BicubicGrad {
  using A = Acc<T>;
  Geometry g;
  const T* grad_output;  // [N, C, OH, OW]

  D9M_HD std::size_t sources() const { return static_cast<std::size_t>(g.oh * g.ow); }
  D9M_HD Axis<A> y_axis() const { return Axis<A>(g.h, g.oh, g.align_corners, true); }
  D9M_HD Axis<A> x_axis() const { return Axis<A>(g.w, g.ow, g.align_corners, true); }

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto pos = static_cast<std::int64_t>(s);
    if (g.same_size()) {
      for (std::int64_t nc = 0; nc < g.planes(); ++nc)
        emit(static_cast<std::size_t>(nc * g.h * g.w + pos), grad_output[nc * g.oh * g.ow + pos]);
      return;
    }
    const CubicTaps<A> ty = y_axis().cubic_taps(pos / g.ow), tx = x_axis().cubic_taps(pos % g.ow);
    for (std::int64_t nc = 0; nc < g.planes(); ++nc) {
      const A v = widen(grad_output[nc * g.oh * g.ow + pos]);
      for (int i = 0; i < 4; ++i) {
        const std::int64_t row = (nc * g.h + clamp_index(ty.first + i, g.h)) * g.w;
        const A vy = v * ty.w[i];
        for (int j = 0; j < 4; ++j) emit(static_cast<std::size_t>(row + clamp_index(tx.first + j, g.w)), narrow<T>(vy * tx.w[j]));
      }
    }
  }

  D9M_HD T gather(std::size_t e) const {
    if (g.same_size()) return add(T{}, grad_output[e]);
    const auto i = static_cast<std::int64_t>(e);
    const std::int64_t x = i % g.w, y = (i / g.w) % g.h, nc = i / (g.w * g.h);
    const Axis<A> ay = y_axis(), ax = x_axis();
    std::int64_t y0, y1, x0, x1;
    ay.contributors(y, y0, y1);
    ax.contributors(x, x0, x1);
    T sum{};  // +0 in every float type
    for (std::int64_t oy = y0; oy <= y1; ++oy) {
      const CubicTaps<A> ty = ay.cubic_taps(oy);
      for (std::int64_t ox = x0; ox <= x1; ++ox) {
        const CubicTaps<A> tx = ax.cubic_taps(ox);
        const A v = widen(grad_output[(nc * g.oh + oy) * g.ow + ox]);
        const TapRange rows = taps_reaching(ty.first, y, g.h), cols = taps_reaching(tx.first, x, g.w);
        for (int r = rows.lo; r <= rows.hi; ++r) {
          const A vy = v * ty.w[r];
          for (int k = cols.lo; k <= cols.hi; ++k) sum = add(sum, narrow<T>(vy * tx.w[k]));
        }
      }
    }
    return sum;
  }
};

template <class T>
struct TrilinearGrad {
  using A = Acc<T>;
  Geometry g;
  const T* grad_output;  // [N, C, OD, OH, OW]

  D9M_HD std::size_t sources() const { return static_cast<std::size_t>(g.positions()); }
  D9M_HD Axis<A> axis(int k) const {
    return k == 0 ? Axis<A>(g.d, g.od, g.align_corners, false)
                  : k == 1 ? Axis<A>(g.h, g.oh, g.align_corners, false) : Axis<A>(g.w, g.ow, g.align_corners, false);
  }

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto pos = static_cast<std::int64_t>(s);
    const std::int64_t in_plane = g.d * g.h * g.w;
    if (g.same_size()) {
      for (std::int64_t nc = 0; nc < g.planes(); ++nc)
        emit(static_cast<std::size_t>(nc * in_plane + pos), grad_output[nc * g.positions() + pos]);
      return;
    }
    const LinearTaps<A> tz = axis(0).linear_taps(pos / (g.oh * g.ow)), ty = axis(1).linear_taps((pos / g.ow) % g.oh),
                        tx = axis(2).linear_taps(pos % g.ow);
    for (std::int64_t nc = 0; nc < g.planes(); ++nc) {
      const A v = widen(grad_output[nc * g.positions() + pos]);
      for (int dz = 0; dz < 2; ++dz)
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) {
            const std::int64_t at = ((tz.i0 + dz * tz.p) * g.h + ty.i0 + dy * ty.p) * g.w + tx.i0 + dx * tx.p;
            emit(static_cast<std::size_t>(nc * in_plane + at), narrow<T>(tz.l[dz] * ty.l[dy] * tx.l[dx] * v));
          }
    }
  }

  D9M_HD T gather(std::size_t e) const {
    if (g.same_size()) return add(T{}, grad_output[e]);
    const auto i = static_cast<std::int64_t>(e);
    const std::int64_t x = i % g.w, y = (i / g.w) % g.h, z = (i / (g.w * g.h)) % g.d, nc = i / (g.w * g.h * g.d);
    const Axis<A> az = axis(0), ay = axis(1), ax = axis(2);
    std::int64_t z0, z1, y0, y1, x0, x1;
    az.contributors(z, z0, z1);
    ay.contributors(y, y0, y1);
    ax.contributors(x, x0, x1);
    T sum{};  // +0 in every float type
    for (std::int64_t oz = z0; oz <= z1; ++oz) {
      const LinearTaps<A> tz = az.linear_taps(oz);
      for (std::int64_t oy = y0; oy <= y1; ++oy) {
        const LinearTaps<A> ty = ay.linear_taps(oy);
        for (std::int64_t ox = x0; ox <= x1; ++ox) {
          const LinearTaps<A> tx = ax.linear_taps(ox);
          const A v = widen(grad_output[((nc * g.od + oz) * g.oh + oy) * g.ow + ox]);
          for (int dz = 0; dz < 2; ++dz) {
            if (tz.i0 + dz * tz.p != z) continue;
            for (int dy = 0; dy < 2; ++dy) {
              if (ty.i0 + dy * ty.p != y) continue;
              for (int dx = 0; dx < 2; ++dx)
                if (tx.i0 + dx * tx.p == x) sum = add(sum, narrow<T>(tz.l[dz] * ty.l[dy] * tx.l[dx] * v));
            }
          }
        }
      }
    }
    return sum;
  }
};

}  // namespace d9m::upsample
