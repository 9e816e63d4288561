// The CUDA counterparts of gather_variants.h: cuda.atomic is the scatter form with a thread per
// source adding with atomicAdd (the frameworks' kernels), cuda.ordered one thread per output
// running Op<T>::gather (the CPU's code: cpu.serial's bits).
#pragma once
#include <string>
#include <vector>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/gather_variants.h"

namespace d9m::accumulate::cuda {

template <class T, template <class> class Op, class Geometry>
void scatter_atomic(const KernelArgs& a) {
  d9m::cuda::zero_output(a);
  const Op<T> op{a.problem.geom<Geometry>(), a.in<T>(0)};
  atomic(d9m::cuda::stream_of(a), op.sources(), a.out<T>(), op);
}

template <class T, template <class> class Op, class Geometry>
void gather_all(const KernelArgs& a) {
  const Op<T> op{a.problem.geom<Geometry>(), a.in<T>(0)};
  T* out = a.out<T>();
  d9m::cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()),
                            [=] __device__(std::size_t e) { out[e] = op.gather(e); });
}

template <template <class> class Op, class Geometry>
std::vector<VariantDef> cuda_gather_variants(const std::string& name) {
  std::vector<VariantDef> v = cuda_variants(name, [](const KernelArgs& a, Order) {
    with_float_type(a.problem.dtype, [&](auto tag) { scatter_atomic<decltype(tag), Op, Geometry>(a); });
  });
  for (VariantDef& d : v)
    if (d.role == Role::ordered) {
      d.claim = op::deterministic("one thread per output gathers its own contributions in the reference order "
                                  "(bit-equal to cpu.serial)");
      d.bit_equal_to = "cpu.serial";
      d.memory = nullptr;  // nothing buffered: the sorting variant's estimate does not apply
      d.run = [](const KernelArgs& a) {
        with_float_type(a.problem.dtype, [&](auto tag) { gather_all<decltype(tag), Op, Geometry>(a); });
      };
    }
  return v;
}

}  // namespace d9m::accumulate::cuda
