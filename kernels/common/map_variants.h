// The variants of an op without sums across items: every output element (or row of elements) is
// written by one item, a pure function of the inputs (elementwise ops, max-pool forward). No order
// of additions can differ, so the variants differ only in which thread computes which item:
//   cpu.serial    items in order on one thread (role reference)
//   cpu.ordered   fixed blocks of items on the worker threads: cpu.serial's bits on any thread count
//   cuda.ordered  a thread per item running the same D9M_HD code (map_variants_cuda.cuh): the same bits
//
// An op in scatter form (accumulate.h) can also be written in map form when each output element
// can enumerate its own contributors in the reference order (its sources ascending, and each
// source's emissions in order): the gather form. It then needs neither atomics nor a sort nor
// working memory, and has the reference's bits:
//   cpu.gather    fixed blocks of output elements on the worker threads
//   cuda.gather   a thread per output element (map_variants_cuda.cuh)
//
// Op<T> is built on the host as Op<T>(args) (it keeps the geometry and input pointers) and provides
//   std::size_t items() const
//   D9M_HD void operator()(std::size_t item, T* out) const   writes the item's outputs
// and may provide, for the CPU's blocks,
//   void run_block(std::size_t begin, std::size_t end, T* out) const
// which must write exactly what operator() writes for each item of [begin, end), bit for bit; it
// is there to share work between neighbouring items (a pixel's taps over its channels).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"

namespace d9m::map {

// Items per task of cpu.ordered: small enough for a few rows or windows, large enough that an
// elementwise op's tasks are not all overhead.
inline constexpr std::size_t kItemsPerTask = 1024;

// Op's items in fixed blocks of `grain` on the worker threads.
template <template <class> class Op>
std::function<void(const KernelArgs&)> in_blocks(std::size_t grain) {
  return typed([grain](const KernelArgs& a, auto tag) {
    const Op<decltype(tag)> op(a);
    auto* out = a.out<decltype(tag)>();
    parallel_blocks(*a.exec.pool, op.items(), grain, [&](std::size_t begin, std::size_t end) {
      if constexpr (requires { op.run_block(begin, end, out); })
        op.run_block(begin, end, out);
      else
        for (std::size_t i = begin; i < end; ++i) op(i, out);
    });
  });
}

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
       .run = in_blocks<Op>(grain),
       .bit_equal_to = "cpu.serial"},
  };
}

// The gather form of an op whose cpu.serial is the scatter form's (see the top of this file).
template <template <class> class Op>
std::vector<VariantDef> cpu_gather_variant(const std::string& name, std::size_t grain = kItemsPerTask) {
  return {{.op = name, .name = "cpu.gather", .backend = Backend::cpu, .role = Role::ordered, .claim = op::gather_claim(),
          .run = in_blocks<Op>(grain),
          .bit_equal_to = "cpu.serial"}};
}

}  // namespace d9m::map
