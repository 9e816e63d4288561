// The CPU variants of an op in scatter form whose every output can also enumerate its own
// contributors (interpolation and padding gradients): cpu.serial and cpu.atomic apply the scatter
// form (accumulate.h), cpu.ordered is the gather form: each output sums its own contributions in
// the reference order, one task per block of outputs, no buffer beyond the output. It claims
// cpu.serial's bits.
//
// Op<T> is built as Op<T>{geometry, first input} and provides
//   sources(), operator()(s, emit)   the scatter form (accumulate.h)
//   T gather(std::size_t e) const    output e, summed from +0 in the reference order
#pragma once
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"

namespace d9m::accumulate {

inline Claim gather_claim() {
  return op::deterministic("each output gathers its own contributions in the reference order (no sort, memory of the output only)");
}

template <template <class> class Op, class Geometry>
std::vector<VariantDef> cpu_gather_variants(const std::string& name) {
  std::vector<VariantDef> v = cpu_variants(name, [](const KernelArgs& a, Order order) {
    std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
    with_float_type(a.problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      const Op<T> op{a.problem.geom<Geometry>(), a.in<T>(0)};
      apply<T>(order, a, op.sources(), op);
    });
  });
  for (VariantDef& d : v)
    if (d.role == Role::ordered) {
      d.claim = gather_claim();
      d.memory = nullptr;  // nothing buffered: the bucketed variant's estimate does not apply
      d.run = [](const KernelArgs& a) {
        with_float_type(a.problem.dtype, [&](auto tag) {
          using T = decltype(tag);
          const Op<T> op{a.problem.geom<Geometry>(), a.in<T>(0)};
          T* out = a.out<T>();
          parallel_blocks(*a.exec.pool, static_cast<std::size_t>(a.problem.output.numel()), 256,
                          [&](std::size_t begin, std::size_t end) {
                            for (std::size_t e = begin; e < end; ++e) out[e] = op.gather(e);
                          });
        });
      };
    }
  return v;
}

}  // namespace d9m::accumulate
