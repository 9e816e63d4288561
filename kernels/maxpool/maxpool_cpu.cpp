// CPU variants of maxpool2d (map form: kernels/common/map_variants.h) and maxpool2d_bwd (source =
// one window (n, oh, ow, c) in flat NHWC order of grad; cpu.gather: each input element sums the
// windows whose maximum it is).
#include <cstring>
#include <memory>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/map_variants.h"
#include "kernels/common/parallel.h"
#include "kernels/common/op_helpers.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {

D9M_REGISTER_VARIANTS(map::cpu_variants<PoolMap>("maxpool2d", 64));

namespace {
// Output starts at zero: positions that are no window's maximum get no gradient.
void maxpool2d_bwd(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<T>(order, a, static_cast<std::size_t>(a.problem.inputs[2].numel()),
                         WindowGrads<T>{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(2)});
  });
}

// The gather form (maxpool.h): pass 1 over the windows, then pass 2 over grad_input, each in
// fixed blocks on the worker threads.
void maxpool2d_bwd_gathered(const KernelArgs& a) {
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Geometry>();
    const T* orig_input = a.in<T>(0);
    const T* grad = a.in<T>(2);
    T* out = a.out<T>();
    auto* maxima = static_cast<std::int64_t*>(a.state);
    parallel_blocks(*a.exec.pool, windows_of(a.problem), 256, [&](std::size_t begin, std::size_t end) {
      for (std::size_t s = begin; s < end; ++s) maxima[s] = window_argmax(g, orig_input, static_cast<std::int64_t>(s));
    });
    parallel_blocks(*a.exec.pool, static_cast<std::size_t>(a.problem.output.numel()), 256, [&](std::size_t begin, std::size_t end) {
      for (std::size_t e = begin; e < end; ++e) out[e] = gathered_grad(g, maxima, grad, static_cast<std::int64_t>(e));
    });
  });
}
}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cpu_variants("maxpool2d_bwd", maxpool2d_bwd));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("maxpool2d_bwd", maxpool2d_bwd));

D9M_REGISTER_VARIANTS({{.op = "maxpool2d_bwd", .name = "cpu.gather", .backend = Backend::cpu, .role = Role::ordered,
                        .claim = gather_claim(), .run = maxpool2d_bwd_gathered,
                        .prepare = [](const Problem& p, const ExecContext&) {
                          return Prepared{std::shared_ptr<std::int64_t[]>(new std::int64_t[windows_of(p)]), std::nullopt};
                        },
                        .bit_equal_to = "cpu.serial", .memory = gather_memory}});

}  // namespace d9m::maxpool
