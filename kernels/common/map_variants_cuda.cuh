// The CUDA variant of map_variants.h: a thread per item running Op<T>'s D9M_HD code, which is
// cpu.serial's code, so it claims cpu.serial's bits.
#pragma once
#include <string>
#include <vector>

#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/map_variants.h"

namespace d9m::map::cuda {

template <class T, template <class> class Op>
void run_all(const KernelArgs& a) {
  const Op<T> op(a);
  T* out = a.out<T>();
  d9m::cuda::for_each_index(a, op.items(), [=] __device__(std::size_t i) { op(i, out); });
}

template <template <class> class Op>
std::vector<VariantDef> cuda_variants(const std::string& name) {
  return {{.op = name, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("one thread per output with the reference formula, no sums across outputs "
                                      "(bit-equal to cpu.serial)"),
           .run = [](const KernelArgs& a) { with_float_type(a.problem.dtype, [&](auto tag) { run_all<decltype(tag), Op>(a); }); },
           .bit_equal_to = "cpu.serial"}};
}

// The gather form (map_variants.h): a thread per output element, no atomics, no sort, no
// working memory; the same D9M_HD code as cpu.gather, so cpu.serial's bits.
template <template <class> class Op>
std::vector<VariantDef> cuda_gather_variant(const std::string& name) {
  return {{.op = name, .name = "cuda.gather", .backend = Backend::cuda, .role = Role::ordered, .claim = op::gather_claim(),
          .run = [](const KernelArgs& a) { with_float_type(a.problem.dtype, [&](auto tag) { run_all<decltype(tag), Op>(a); }); },
          .bit_equal_to = "cpu.serial"}};
}

}  // namespace d9m::map::cuda
