// CUDA variants of the depthwise gradients (depthwise.h; the cuDNN ones are in depthwise_cudnn.cu):
//   cuda.atomic   bwd_filter: TensorFlow's DepthwiseConv2dBackpropFilterGPUKernelNHWC, one thread
//                 per out_backprop element adding input * out_backprop into each in-range tap's
//                 filter element with atomicAdd, in float for the 16-bit types (TF casts them),
//                 rounded once at the end. bwd_data: d9m's scatter (TensorFlow has no atomic
//                 kernel for it), one thread per (tap, out_backprop element), atomicAdd in T.
//   cuda.ordered  one thread per output element gathers its products in the reference order:
//                 for bwd_data TensorFlow's own kernel (DepthwiseConv2dBackpropInputGPUKernelNHWC).
//                 cpu.serial's bits.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/depthwise/depthwise.h"

namespace d9m::depthwise {
namespace {

template <bool kToFilter>
void atomic(const KernelArgs& a) {
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const Grads<T, kToFilter> en{a.problem.geom<Geometry>(), a.in<T>(0), a.in<T>(1), !kToFilter};
    if constexpr (kToFilter) accumulate::cuda::apply_widened<T>(accumulate::Order::atomic, a, en.sources(), en);
    else accumulate::cuda::apply<T>(accumulate::Order::atomic, a, en.sources(), en);
  });
}

template <class T, bool kToFilter>
void ordered(const KernelArgs& a) {
  const Geometry g = a.problem.geom<Geometry>();
  const T* first = a.in<T>(0);
  const T* dy = a.in<T>(1);
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()), [g, first, dy, out] __device__(std::size_t i) {
    const auto at = static_cast<std::int64_t>(i);
    if constexpr (kToFilter) out[i] = gather_filter(g, first, dy, at);
    else out[i] = gather_data(g, first, dy, at);
  });
}

template <bool kToFilter>
void ordered(const KernelArgs& a) {
  with_float_type(a.problem.dtype, [&](auto tag) { ordered<decltype(tag), kToFilter>(a); });
}

template <bool kToFilter>
std::vector<VariantDef> variants(const std::string& op) {
  return {{.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic(kToFilter ? "TensorFlow's kernel: a thread per out_backprop element adds into the "
                                                     "filter gradient with atomicAdd (float for f16 and bf16) in hardware scheduling order"
                                                   : "a thread per (filter tap, out_backprop element) adds into the input "
                                                     "gradient with atomicAdd in hardware scheduling order"),
           .run = atomic<kToFilter>},
          {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic(kToFilter ? "one thread per filter element sums over n, oh, ow in the reference order "
                                                  "(bit-equal to cpu.serial)"
                                                : "TensorFlow's kernel: one thread per input element gathers its products in "
                                                  "the reference order (bit-equal to cpu.serial)"),
           .run = ordered<kToFilter>, .bit_equal_to = "cpu.serial"}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants<false>("depthwise_conv2d_bwd_data"));
D9M_REGISTER_VARIANTS(variants<true>("depthwise_conv2d_bwd_filter"));

}  // namespace d9m::depthwise
