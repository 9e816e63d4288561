// CPU variants of the depthwise gradients (depthwise.h):
//   cpu.serial   the scatter form, sources (out_backprop elements) in order: the reference
//   cpu.atomic   the same scatter on all threads, atomic adds in the order the threads get there
//   cpu.ordered  each output element gathers its own products in the reference order (TensorFlow's
//                bwd_data kernel), elements in fixed blocks on all threads: serial's bits, memory
//                of the output only
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/depthwise/depthwise.h"

namespace d9m::depthwise {
namespace {

// bwd_data sums in T (TensorFlow's `T sum`), bwd_filter in Acc<T> rounded once at the end.
template <bool kToFilter>
void scatter(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const Grads<T, kToFilter> en{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(1)};
    if constexpr (kToFilter) accumulate::apply_widened<T>(order, a, en.sources(), en);
    else accumulate::apply<T>(order, a, en.sources(), en);
  });
}

template <bool kToFilter>
void gather(const KernelArgs& a) {
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Geometry>();
    T* out = a.out<T>();
    parallel_blocks(*a.exec.pool, static_cast<std::size_t>(a.problem.output.numel()), 256, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const auto at = static_cast<std::int64_t>(i);
        if constexpr (kToFilter) out[i] = gather_filter(g, a.in<T>(0), a.in<T>(1), at);
        else out[i] = gather_data(g, a.in<T>(0), a.in<T>(1), at);
      }
    });
  });
}

template <bool kToFilter>
std::vector<VariantDef> variants(const std::string& op) {
  return {{.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference, .claim = op::serial_claim(),
           .run = [](const KernelArgs& a) { scatter<kToFilter>(a, accumulate::Order::serial); }},
          {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic, .claim = op::atomic_claim(),
           .run = [](const KernelArgs& a) { scatter<kToFilter>(a, accumulate::Order::atomic); }},
          {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
           .claim = op::deterministic(kToFilter ? "each filter element sums its products over n, oh, ow in the reference order"
                                                : "each input element gathers its products (output rows, columns, then m "
                                                  "ascending) as TensorFlow's kernel does: the reference order"),
           .run = gather<kToFilter>, .bit_equal_to = "cpu.serial"}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants<false>("depthwise_conv2d_bwd_data"));
D9M_REGISTER_VARIANTS(variants<true>("depthwise_conv2d_bwd_filter"));

}  // namespace d9m::depthwise
