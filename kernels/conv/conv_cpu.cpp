// CPU variants of the conv backprops. Source = one forward output position (n, oh, ow).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/conv/conv.h"

namespace d9m::conv {
namespace {

std::size_t positions(const Geometry& g) { return static_cast<std::size_t>(g.n * g.y.out * g.x.out); }

auto bwd_data_taps(const KernelArgs& a) {
  return [&g = a.problem.geom<Geometry>(), w = a.in<float>(0), dy = a.in<float>(1)](
             std::size_t s, auto& emit) {
    const auto pos = static_cast<std::int64_t>(s);
    const std::int64_t ow = pos % g.x.out, oh = (pos / g.x.out) % g.y.out, n = pos / g.x.out / g.y.out;
    const float* dy_row = dy + pos * g.co;
    taps(g, oh, ow, [&](std::int64_t ih, std::int64_t iw, std::int64_t kh, std::int64_t kw) {
      const std::int64_t dx_base = ((n * g.y.in + ih) * g.x.in + iw) * g.ci;
      const float* w_tap = w + (kh * g.x.k + kw) * g.ci * g.co;
      for (std::int64_t ci = 0; ci < g.ci; ++ci)
        for (std::int64_t co = 0; co < g.co; ++co)
          emit(static_cast<std::size_t>(dx_base + ci), dy_row[co] * w_tap[ci * g.co + co]);
    });
  };
}

auto bwd_filter_taps(const KernelArgs& a) {
  return [&g = a.problem.geom<Geometry>(), x = a.in<float>(0), dy = a.in<float>(1)](
             std::size_t s, auto& emit) {
    const auto pos = static_cast<std::int64_t>(s);
    const std::int64_t ow = pos % g.x.out, oh = (pos / g.x.out) % g.y.out, n = pos / g.x.out / g.y.out;
    const float* dy_row = dy + pos * g.co;
    taps(g, oh, ow, [&](std::int64_t ih, std::int64_t iw, std::int64_t kh, std::int64_t kw) {
      const float* x_row = x + ((n * g.y.in + ih) * g.x.in + iw) * g.ci;
      const std::int64_t dw_base = (kh * g.x.k + kw) * g.ci * g.co;
      for (std::int64_t ci = 0; ci < g.ci; ++ci)
        for (std::int64_t co = 0; co < g.co; ++co)
          emit(static_cast<std::size_t>(dw_base + ci * g.co + co), x_row[ci] * dy_row[co]);
    });
  };
}

template <class Taps>
void run(const KernelArgs& a, accumulate::Order order, Taps&& taps_of) {
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::apply(order, a, positions(a.problem.geom<Geometry>()), taps_of(a));
}

}  // namespace

static const bool registered_data = accumulate::register_cpu_variants(
    "conv2d_bwd_data", [](const KernelArgs& a, accumulate::Order o) { run(a, o, bwd_data_taps); });
static const bool registered_filter = accumulate::register_cpu_variants(
    "conv2d_bwd_filter", [](const KernelArgs& a, accumulate::Order o) { run(a, o, bwd_filter_taps); });

}  // namespace d9m::conv
