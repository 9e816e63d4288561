// CPU variants of the resize family. Forward ops write each output once (serial, and ordered
// over threads); the grads are in scatter form with source = one grads pixel (n, y, x).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/resize/resize.h"

namespace d9m::resize {
namespace {

// Writes output rows [begin, end) of a forward resize; row = (n, oy).
template <bool bilinear>
void forward_rows(const KernelArgs& a, std::size_t begin, std::size_t end) {
  const auto& g = a.problem.geom<Geometry>();
  const float* in = a.in<float>(0);
  float* out = a.out<float>();
  for (std::size_t row = begin; row < end; ++row) {
    const auto r = static_cast<std::int64_t>(row);
    const std::int64_t n = r / g.oh, oy = r % g.oh;
    for (std::int64_t ox = 0; ox < g.ow; ++ox) {
      float* o = out + (r * g.ow + ox) * g.c;
      if constexpr (bilinear) {
        const float* tl = in + ((n * g.h + g.y.lower[oy]) * g.w + g.x.lower[ox]) * g.c;
        const float* tr = in + ((n * g.h + g.y.lower[oy]) * g.w + g.x.upper[ox]) * g.c;
        const float* bl = in + ((n * g.h + g.y.upper[oy]) * g.w + g.x.lower[ox]) * g.c;
        const float* br = in + ((n * g.h + g.y.upper[oy]) * g.w + g.x.upper[ox]) * g.c;
        const float xl = g.x.lerp[ox], yl = g.y.lerp[oy];
        for (std::int64_t c = 0; c < g.c; ++c) {
          const float top = tl[c] + (tr[c] - tl[c]) * xl;
          const float bottom = bl[c] + (br[c] - bl[c]) * xl;
          o[c] = top + (bottom - top) * yl;
        }
      } else {
        const float* src = in + ((n * g.h + g.y.nearest[oy]) * g.w + g.x.nearest[ox]) * g.c;
        std::memcpy(o, src, static_cast<std::size_t>(g.c) * sizeof(float));
      }
    }
  }
}

template <bool bilinear>
void forward_serial(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  forward_rows<bilinear>(a, 0, static_cast<std::size_t>(g.n * g.oh));
}

template <bool bilinear>
void forward_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  parallel_blocks(*a.exec.pool, static_cast<std::size_t>(g.n * g.oh), 4,
                  [&](std::size_t b, std::size_t e) { forward_rows<bilinear>(a, b, e); });
}

auto bilinear_grad_taps(const KernelArgs& a) {
  return [&g = a.problem.geom<Geometry>(), dy = a.in<float>(0)](std::size_t s, auto& emit) {
    const auto px = static_cast<std::int64_t>(s);
    const std::int64_t ox = px % g.ow, oy = (px / g.ow) % g.oh, n = px / g.ow / g.oh;
    const float yl = g.y.lerp[oy], xl = g.x.lerp[ox];
    const float iyl = 1.0f - yl, ixl = 1.0f - xl;
    const std::int64_t top = (n * g.h + g.y.lower[oy]) * g.w, bottom = (n * g.h + g.y.upper[oy]) * g.w;
    const std::int64_t left = g.x.lower[ox], right = g.x.upper[ox];
    for (std::int64_t c = 0; c < g.c; ++c) {
      const float v = dy[px * g.c + c];
      emit(static_cast<std::size_t>((top + left) * g.c + c), v * iyl * ixl);
      emit(static_cast<std::size_t>((top + right) * g.c + c), v * iyl * xl);
      emit(static_cast<std::size_t>((bottom + left) * g.c + c), v * yl * ixl);
      emit(static_cast<std::size_t>((bottom + right) * g.c + c), v * yl * xl);
    }
  };
}

auto nearest_grad_taps(const KernelArgs& a) {
  return [&g = a.problem.geom<Geometry>(), dy = a.in<float>(0)](std::size_t s, auto& emit) {
    const auto px = static_cast<std::int64_t>(s);
    const std::int64_t ox = px % g.ow, oy = (px / g.ow) % g.oh, n = px / g.ow / g.oh;
    const std::int64_t base = ((n * g.h + g.y.nearest[oy]) * g.w + g.x.nearest[ox]) * g.c;
    for (std::int64_t c = 0; c < g.c; ++c) emit(static_cast<std::size_t>(base + c), dy[px * g.c + c]);
  };
}

template <class Taps>
void grad(const KernelArgs& a, accumulate::Order order, Taps&& taps_of) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::apply(order, a, static_cast<std::size_t>(g.n * g.oh * g.ow), taps_of(a));
}

}  // namespace

D9M_REGISTER_VARIANT({.op = "resize_bilinear", .name = "cpu.serial", .backend = Backend::cpu,
                      .claim = op::serial_claim(), .run = forward_serial<true>});
D9M_REGISTER_VARIANT({.op = "resize_bilinear", .name = "cpu.ordered", .backend = Backend::cpu,
                      .claim = op::per_output_claim(), .run = forward_ordered<true>});
D9M_REGISTER_VARIANT({.op = "resize_nearest", .name = "cpu.serial", .backend = Backend::cpu,
                      .claim = op::serial_claim(), .run = forward_serial<false>});
D9M_REGISTER_VARIANT({.op = "resize_nearest", .name = "cpu.ordered", .backend = Backend::cpu,
                      .claim = op::per_output_claim(), .run = forward_ordered<false>});

static const bool registered_bilinear_grad = accumulate::register_cpu_variants(
    "resize_bilinear_grad", [](const KernelArgs& a, accumulate::Order o) { grad(a, o, bilinear_grad_taps); });
static const bool registered_nearest_grad = accumulate::register_cpu_variants(
    "resize_nearest_grad", [](const KernelArgs& a, accumulate::Order o) { grad(a, o, nearest_grad_taps); });

}  // namespace d9m::resize
