// The variants of an op without sums across items: every output element (or row of elements) is
// written by one item, a pure function of the inputs (elementwise ops, max-pool forward). No order
// of additions can differ, so the variants differ only in which thread computes which item:
//   cpu.serial    items in order on one thread (role reference)
//   cpu.ordered   fixed blocks of items on the worker threads: cpu.serial's bits on any thread count
//   cuda.ordered  a thread per item running the same D9M_HD code (map_variants_cuda.cuh): the same bits
//
// Op<T> is built on the host as Op<T>(args) (it keeps the geometry and input pointers) and provides
//   std::size_t items() const
//   D9M_HD void operator()(std::size_t item, T* out) const   writes the item's outputs
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"

namespace d9m::map {

// Items per task of cpu.ordered: small enough for a few rows or windows, large enough that an
// elementwise op's tasks are not all overhead.
inline constexpr std::size_t kItemsPerTask = 1024;

template <template <class> class Op>
std::vector<VariantDef> cpu_variants(const std::string& name, std::size_t grain = kItemsPerTask) {
  return {
      {.op = name, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
       .claim = op::deterministic("one thread computes every output once with the reference formula (no sums across outputs)"),
       .run = typed([](const KernelArgs& a, auto tag) {
         const Op<decltype(tag)> op(a);
         auto* out = a.out<decltype(tag)>();
         for (std::size_t i = 0; i < op.items(); ++i) op(i, out);
       })},
      {.op = name, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
       .claim = op::per_output_claim(),
       .run = typed([grain](const KernelArgs& a, auto tag) {
         const Op<decltype(tag)> op(a);
         auto* out = a.out<decltype(tag)>();
         parallel_blocks(*a.exec.pool, op.items(), grain, [&](std::size_t begin, std::size_t end) {
           for (std::size_t i = begin; i < end; ++i) op(i, out);
         });
       }),
       .bit_equal_to = "cpu.serial"},
  };
}

}  // namespace d9m::map
