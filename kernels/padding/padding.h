// padding family: the backward of PyTorch's ReflectionPad2d and ReplicationPad2d (NCHW):
//
//   reflection_pad2d_bwd(grad_output[N,C,H+top+bottom,W+left+right])  -> grad_input[N,C,H,W]
//     reflection_pad2d_backward_out_kernel, ATen native/cuda/ReflectionPad.cu
//   replication_pad2d_bwd(grad_output[N,C,H+top+bottom,W+left+right]) -> grad_input[N,C,H,W]
//     replication_pad_backward_kernel (4-D), ATen native/cuda/ReplicationPadding.cu
//
// Each grad_output element (n, c, oy, ox) is added to the grad_input element its forward copied
// from. Per axis, with input size L and paddings lo (left or top) and hi (right or bottom), both
// >= 0 (PyTorch also takes negative ones, which crop; not modelled here):
//   reflection:  i = o - lo inside, lo - o before (the edge is not repeated), 2 (L - 1) - (o - lo)
//                after: PyTorch's |o - lo| - |o - (L + lo - 1)| - o + lo + L - 1. It needs lo, hi < L
//                (PyTorch's check), so one reflection suffices. With the widest paddings an input
//                row is hit three times (itself, reflected from the top and from the bottom), an
//                element up to nine times.
//   replication: i = min(max(o, lo), L + lo - 1) - lo: every padded row or column repeats the
//                edge, so a corner element collects (lo + 1)(lo' + 1) gradients (any padding size).
// Left and right (top and bottom) are separate parameters, and an asymmetric config gives a
// different gradient from its mirror image.
//
// Thread shape (cuda.atomic, as PyTorch's): one thread per grad_output element adding it with an
// atomic add in the dtype (gpuAtomicAddNoReturn: atomicAdd on float, double, __half and
// __nv_bfloat16), so at every precision each add rounds once to the dtype (half.h add()). PyTorch
// launches a 3-D grid (x: blocks of 256 over the output plane, y: channels, z: batch); d9m's
// launch is 1-D over the same elements, so only which threads share a block at plane boundaries
// differs. The gradient itself involves no arithmetic but the adds.
//
// PyTorch's current ReflectionPad.cu (older releases raise in deterministic mode) runs, with
// deterministic algorithms on, reflection_pad2d_backward_det_out_kernel instead: a thread per
// grad_input element adding its copies in a fixed order (the top reflection, one top corner, the
// bottom reflection, one bottom corner, left, right, itself). It is not modelled here. As read (not
// run: no GPU build of PyTorch here), it adds the left corner or else the right one, so where a
// column is reflected from both sides (1 <= col <= left and W - 1 - right <= col <= W - 2, possible
// once left + right >= W - 1) in a row reflected from the top or bottom, one corner's gradient is
// left out; this catalogue's widest configs are such cases. ReplicationPad2d's backward still raises.
//
// Reference order (cpu.serial): grad_output elements in increasing index. The gather form
// (cpu.ordered, cuda.ordered) finds each grad_input element's preimage per axis (at most three
// single indices for reflection, one range for replication, each ascending) and adds those
// gradients in increasing output index: cpu.serial's bits, memory of the output only.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::padding {

enum class Mode : std::uint8_t { reflect, replicate };

struct Axis {
  std::int64_t in = 0, lo = 0, hi = 0;

  D9M_HD std::int64_t out() const { return in + lo + hi; }

  // The input index output index o copies.
  D9M_HD std::int64_t source(std::int64_t o, Mode mode) const {
    if (mode == Mode::replicate) return (o < lo ? lo : (o > in + lo - 1 ? in + lo - 1 : o)) - lo;
    const std::int64_t a = o - lo, b = o - (in + lo - 1);
    return (a < 0 ? -a : a) - (b < 0 ? -b : b) - o + lo + in - 1;
  }

  // The output indices that copy input index i, as ascending disjoint ranges [first[k], last[k]].
  struct Preimage {
    int count = 0;
    std::int64_t first[3], last[3];
    D9M_HD void push(std::int64_t f, std::int64_t l) {
      first[count] = f;
      last[count] = l;
      ++count;
    }
  };
  D9M_HD Preimage preimage(std::int64_t i, Mode mode) const {
    Preimage p;
    if (mode == Mode::replicate) {
      p.push(i == 0 ? 0 : lo + i, i == in - 1 ? out() - 1 : lo + i);
      return p;
    }
    if (i >= 1 && i <= lo) p.push(lo - i, lo - i);
    p.push(lo + i, lo + i);
    if (i <= in - 2 && i >= in - 1 - hi) p.push(lo + 2 * (in - 1) - i, lo + 2 * (in - 1) - i);
    return p;
  }
};

struct Geometry {
  std::int64_t n = 0, c = 0;
  Axis y, x;
  Mode mode = Mode::reflect;
};

// Scatter form: source s = grad_output element s (PyTorch's thread); gather(e) = grad_input
// element e summed from +0 in the reference order.
template <class T>
struct PadGrad {
  Geometry g;
  const T* grad_output;

  D9M_HD std::size_t sources() const { return static_cast<std::size_t>(g.n * g.c * g.y.out() * g.x.out()); }

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s);
    const std::int64_t ow = g.x.out(), oh = g.y.out();
    const std::int64_t ox = i % ow, oy = (i / ow) % oh, nc = i / (ow * oh);
    emit(static_cast<std::size_t>((nc * g.y.in + g.y.source(oy, g.mode)) * g.x.in + g.x.source(ox, g.mode)), grad_output[s]);
  }

  D9M_HD T gather(std::size_t e) const {
    const auto i = static_cast<std::int64_t>(e);
    const std::int64_t ix = i % g.x.in, iy = (i / g.x.in) % g.y.in, nc = i / (g.x.in * g.y.in);
    const std::int64_t ow = g.x.out(), plane = nc * g.y.out() * ow;
    const Axis::Preimage rows = g.y.preimage(iy, g.mode), cols = g.x.preimage(ix, g.mode);
    T sum{};  // +0 in every float type
    for (int r = 0; r < rows.count; ++r)
      for (std::int64_t oy = rows.first[r]; oy <= rows.last[r]; ++oy)
        for (int k = 0; k < cols.count; ++k)
          for (std::int64_t ox = cols.first[k]; ox <= cols.last[k]; ++ox) sum = add(sum, grad_output[plane + oy * ow + ox]);
    return sum;
  }
};

}  // namespace d9m::padding
