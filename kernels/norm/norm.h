// norm family: layer normalisation over the last dim, PyTorch's semantics (F.layer_norm with an
// elementwise affine, ATen's layer_norm_kernel.cu; TensorFlow's LayerNormalization is the same
// maths), tensors row-major:
//
//   layer_norm(x[R, D], gamma[D], beta[D]; epsilon)     -> y[R, D]
//     y_rc = (x_rc - mean_r) * rstd_r * gamma_c + beta_c,  mean_r = sum_c x_rc / D,
//     rstd_r = 1 / sqrt(var_r + epsilon),  var_r = sum_c (x_rc - mean_r)^2 / D (biased, as both
//     frameworks normalise).
//   layer_norm_grad_input(dy[R, D], x[R, D], gamma[D]; epsilon) -> dx[R, D]
//     dx_rc = rstd_r / D * (D g_rc - xhat_rc s2_r - s1_r),  g_rc = dy_rc gamma_c,
//     xhat_rc = (x_rc - mean_r) rstd_r, s1_r = sum_c g_rc, s2_r = sum_c g_rc xhat_rc.
//   layer_norm_grad_gamma(dy[R, D], x[R, D]; epsilon)   -> dgamma[D] = sum_r dy_rc (x_rc - mean_r) rstd_r
//   layer_norm_grad_beta(dy[R, D])                      -> dbeta[D]  = sum_r dy_rc
//
// Why four ops: an op has one output, and a training step needs dx, dgamma and dbeta as three
// tensors (dx flows on; dgamma and dbeta each feed their own SGD update). dgamma and dbeta stacked
// as [2, D] would need a slice a pipeline does not have to reach two updates, so they are two ops:
// the two row sums PyTorch's GammaBetaBackward kernel fuses into one launch. Saved statistics are
// not inputs: the backward ops recompute mean and rstd from x with the forward's code (the same
// bits), as a framework's saved mean and rstd would be.
//
// Arithmetic, in Acc<T> (f32 for f32, f16 and bf16, f64 for f64; kernels/common/half.h), no fma
// (the build turns contraction off): the row sums run in ascending c from 0 (two passes: the
// mean, then the squared deviations; PyTorch's CUDA kernel uses Welford's online update and a
// block tree, so d9m's values agree with PyTorch's within rounding, not bit for bit); rstd is
// 1 / sqrt(var + epsilon), two correctly rounded operations on the host and the device alike
// (PyTorch calls rsqrt, whose last bit the CUDA library and the C library round differently);
// each output is rounded once to T. Products and differences are associated as written here:
// y = ((x - mean) rstd) gamma + beta; g = dy gamma, xhat = (x - mean) rstd,
// dx = (((D gamma) dy - xhat s2) - s1) ((1 / D) rstd), in the shape of ATen's
// layer_norm_grad_input_kernel; a dgamma term is (dy (x - mean)) rstd.
//
// Every op but the two parameter gradients is row by row: a row's outputs are one task's, in
// the order above, so every variant gives the same bits (no atomic variant: nothing races).
// dgamma and dbeta sum over the R rows, the determinism-relevant part:
//   cpu.serial    each column's R terms in ascending r from 0, one thread.
//   cpu.ordered   rows in fixed blocks of kRowsPerBlock, each block's terms in ascending r from 0,
//                 then the block sums in block order from 0 (not serial's association; its bits
//                 depend on nothing but the inputs).
//   cuda.ordered  the same order: a thread per (block, column), then a thread per column.
//   cpu.atomic    each row adds its D terms into Acc<T> accumulators with atomic float adds from
//                 the worker threads, in the order the scheduler gives; one rounding to T at the
//                 end.
//   cuda.atomic   a thread per (row, column) adds its term with atomicAdd in Acc<T>, then one
//                 rounding: hardware order. PyTorch's own kernel sums in a fixed order; an
//                 arrival-order accumulation is what fused layer-norm backward kernels that
//                 gather partial dgamma and dbeta into shared buffers under a lock (Triton's
//                 tutorial kernel) do.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/registry.h"

namespace d9m::norm {

// Rows per block of the ordered parameter gradients. Fixed, never derived from the machine: it
// is part of the order cuda.ordered repeats.
inline constexpr std::int64_t kRowsPerBlock = 64;

enum class Param : std::uint8_t { gamma, beta };

struct Geometry {
  std::int64_t rows = 0, dim = 0;
  double epsilon = 1e-5;
  Param param = Param::gamma;  // which gradient (the parameter gradients only)

  D9M_HD std::int64_t blocks() const { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }
};

// sqrt, correctly rounded on both sides (IEEE 754 requires it; nvcc's default -prec-sqrt=true
// keeps the device's so).
template <class A>
D9M_HD inline A square_root(A v) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<A, float>) return sqrtf(v);
  else return sqrt(v);
#else
  return std::sqrt(v);
#endif
}

template <class A>
struct Moments {
  A mean = 0, rstd = 0;
};

// mean and rstd of row r.
template <class T>
D9M_HD inline Moments<Acc<T>> row_moments(const Geometry& g, const T* x, std::int64_t r) {
  using A = Acc<T>;
  const T* xr = x + r * g.dim;
  const A n = static_cast<A>(g.dim);
  A sum = 0;
  for (std::int64_t c = 0; c < g.dim; ++c) sum = sum + widen(xr[c]);
  const A mean = sum / n;
  A squares = 0;
  for (std::int64_t c = 0; c < g.dim; ++c) {
    const A d = widen(xr[c]) - mean;
    squares = squares + d * d;
  }
  return {mean, A(1) / square_root(squares / n + static_cast<A>(g.epsilon))};
}

template <class T>
D9M_HD inline void forward_row(const Geometry& g, const T* x, const T* gamma, const T* beta, std::int64_t r, T* y) {
  const Moments<Acc<T>> m = row_moments(g, x, r);
  for (std::int64_t c = 0; c < g.dim; ++c) {
    const std::int64_t i = r * g.dim + c;
    y[i] = narrow<T>(((widen(x[i]) - m.mean) * m.rstd) * widen(gamma[c]) + widen(beta[c]));
  }
}

template <class T>
D9M_HD inline void grad_input_row(const Geometry& g, const T* dy, const T* x, const T* gamma, std::int64_t r, T* dx) {
  using A = Acc<T>;
  const Moments<A> m = row_moments(g, x, r);
  const A n = static_cast<A>(g.dim);
  A s1 = 0, s2 = 0;
  for (std::int64_t c = 0; c < g.dim; ++c) {
    const std::int64_t i = r * g.dim + c;
    const A gc = widen(dy[i]) * widen(gamma[c]);
    s1 = s1 + gc;
    s2 = s2 + gc * ((widen(x[i]) - m.mean) * m.rstd);
  }
  const A scale = (A(1) / n) * m.rstd;
  for (std::int64_t c = 0; c < g.dim; ++c) {
    const std::int64_t i = r * g.dim + c;
    const A f = (n * widen(gamma[c])) * widen(dy[i]) - ((widen(x[i]) - m.mean) * m.rstd) * s2;
    dx[i] = narrow<T>((f - s1) * scale);
  }
}

// The terms the parameter gradients sum over rows: dy (beta), or (dy (x - mean)) rstd (gamma)
// with the row's moments computed beforehand (moments is null for beta).
template <class T>
struct ParamTerms {
  Geometry g;
  const T* dy;
  const T* x;
  const Moments<Acc<T>>* moments;

  D9M_HD Acc<T> operator()(std::int64_t r, std::int64_t c) const {
    const std::int64_t i = r * g.dim + c;
    const Acc<T> d = widen(dy[i]);
    if (g.param == Param::beta) return d;
    return (d * (widen(x[i]) - moments[r].mean)) * moments[r].rstd;
  }
};

// Block b's sum of column c, rows in ascending order from 0 (the ordered variants' first pass).
template <class T>
D9M_HD inline Acc<T> block_sum(const ParamTerms<T>& terms, std::int64_t b, std::int64_t c) {
  const std::int64_t end = (b + 1) * kRowsPerBlock < terms.g.rows ? (b + 1) * kRowsPerBlock : terms.g.rows;
  Acc<T> s = 0;
  for (std::int64_t r = b * kRowsPerBlock; r < end; ++r) s = s + terms(r, c);
  return s;
}

// Column c of the block sums ([blocks, D]) added in block order from 0, rounded once.
template <class T>
D9M_HD inline T blocks_total(const Geometry& g, const Acc<T>* partial, std::int64_t c) {
  Acc<T> s = 0;
  for (std::int64_t b = 0; b < g.blocks(); ++b) s = s + partial[b * g.dim + c];
  return narrow<T>(s);
}

// Row-by-row ops as items of one row (kernels/common/map_variants.h's form).
template <class T>
struct ForwardRows {
  Geometry g;
  const T* x;
  const T* gamma;
  const T* beta;
  explicit ForwardRows(const KernelArgs& a)
      : g(a.problem.geom<Geometry>()), x(a.in<T>(0)), gamma(a.in<T>(1)), beta(a.in<T>(2)) {}
  std::size_t items() const { return static_cast<std::size_t>(g.rows); }
  D9M_HD void operator()(std::size_t r, T* out) const { forward_row(g, x, gamma, beta, static_cast<std::int64_t>(r), out); }
};

template <class T>
struct GradInputRows {
  Geometry g;
  const T* dy;
  const T* x;
  const T* gamma;
  explicit GradInputRows(const KernelArgs& a)
      : g(a.problem.geom<Geometry>()), dy(a.in<T>(0)), x(a.in<T>(1)), gamma(a.in<T>(2)) {}
  std::size_t items() const { return static_cast<std::size_t>(g.rows); }
  D9M_HD void operator()(std::size_t r, T* out) const { grad_input_row(g, dy, x, gamma, static_cast<std::int64_t>(r), out); }
};

}  // namespace d9m::norm
