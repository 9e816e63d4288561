// Direct CUDA variants of the conv family (the cuDNN ones are in conv_cudnn.cu and
// conv_cudnn_forward.cu). conv2d:
//   cuda.ordered  one thread per output computes the reference sum (conv.h): cpu.serial's bits
//   cuda.atomic   one thread per (output, part) adds its part's sum into a float accumulator with
//                 atomicAdd, then each output is rounded to the dtype. Thread i takes part
//                 i / outputs of output i % outputs, so the parts of one output run in different
//                 blocks, on different SMs, in the hardware's order (within one warp the order of
//                 same-address atomics could be a fixed lane order).
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/conv/conv.h"

namespace d9m::conv {
namespace {

template <class T>
__global__ void forward_parts_kernel(Geometry g, const T* x, const T* w, float* acc, std::int64_t outputs, std::int64_t threads) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= threads) return;
  const std::int64_t o = i % outputs;
  atomicAdd(acc + o, forward_part(g, x, w, o, i / outputs));
}

template <class T>
__global__ void narrow_kernel(const float* acc, T* out, std::int64_t outputs) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (o < outputs) out[o] = from_float<T>(acc[o]);
}

template <class T>
void forward_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const cudaStream_t s = cuda::stream_of(a);
  const std::int64_t outputs = forward_outputs(g);
  if (outputs == 0) return;
  const std::int64_t threads = outputs * parts_per_output(g);
  if (threads / 256 >= INT_MAX) throw Unsupported("cuda.atomic: more than 2^31 blocks of (output, part) threads");
  DeviceBuffer acc(static_cast<std::size_t>(outputs) * sizeof(float), s);
  D9M_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, acc.bytes(), s));  // +0.0f
  forward_parts_kernel<T><<<blocks_for(static_cast<std::size_t>(threads)), 256, 0, s>>>(g, a.in<T>(0), a.in<T>(1), acc.get<float>(),
                                                                                       outputs, threads);
  D9M_CUDA_CHECK_LAUNCH();
  narrow_kernel<T><<<blocks_for(static_cast<std::size_t>(outputs)), 256, 0, s>>>(acc.get<float>(), a.out<T>(), outputs);
  D9M_CUDA_CHECK_LAUNCH();
}

template <class T>
void forward_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const T* x = a.in<T>(0);
  const T* w = a.in<T>(1);
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(forward_outputs(g)), [=] __device__(std::size_t o) {
    out[o] = from_float<T>(forward_sum(g, x, w, static_cast<std::int64_t>(o)));
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({
    {.op = "conv2d", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
     .claim = op::nondeterministic("split over filter taps and chunks of 8 input channels: each part's sum added with "
                                   "atomicAdd in hardware scheduling order"),
     .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
     .run = [](const KernelArgs& a) { with_forward_type(a.problem.dtype, [&](auto t) { forward_atomic<decltype(t)>(a); }); }},
    {.op = "conv2d", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
     .claim = op::deterministic("one thread per output sums over kh, kw, ci in the reference order (bit-equal to cpu.serial)"),
     .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
     .run = [](const KernelArgs& a) { with_forward_type(a.problem.dtype, [&](auto t) { forward_ordered<decltype(t)>(a); }); },
     .bit_equal_to = "cpu.serial"},
});

namespace {

// The backprops at the config's dtype, summed in Acc<T> and rounded once (apply_widened). The
// atomic bwd_data takes a thread per (position, tap) (BwdDataTapSplit, conv.h).
void bwd_data(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (order == accumulate::Order::atomic) {
      const BwdDataTapSplit<T> split{g, a.in<T>(0), a.in<T>(1)};
      accumulate::cuda::apply_widened<T>(order, a, positions(g) * split.taps_per_position(), split);
    } else {
      accumulate::cuda::apply_widened<T>(order, a, positions(g), BwdDataTaps<T>{g, a.in<T>(0), a.in<T>(1)});
    }
  });
}

void bwd_filter(const KernelArgs& a, accumulate::Order order) {
  const auto& g = a.problem.geom<Geometry>();
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::cuda::apply_widened<T>(order, a, positions(g), BwdFilterTaps<T>{g, a.in<T>(0), a.in<T>(1)});
  });
}

}  // namespace

D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("conv2d_bwd_data", bwd_data));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("conv2d_bwd_filter", bwd_filter));

namespace {

// cuda.gather: one thread per output element sums its contributions in the reference order
// (conv.h bwd_data_gather, bwd_filter_gather) and rounds once: cpu.serial's bits, no sort, no
// buffer, memory of the output alone.
template <class T>
void bwd_data_gathered(const KernelArgs& a) {
  const Geometry g = a.problem.geom<Geometry>();
  const T* w = a.in<T>(0);
  const T* dy = a.in<T>(1);
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()), [=] __device__(std::size_t i) {
    const auto e = static_cast<std::int64_t>(i);
    const std::int64_t ci = e % g.ci, px = e / g.ci;
    Acc<T> acc = 0;
    bwd_data_gather(g, w, dy, px / g.x.in / g.y.in, (px / g.x.in) % g.y.in, px % g.x.in, ci, 1, &acc);
    out[i] = narrow<T>(acc);
  });
}

template <class T>
void bwd_filter_gathered(const KernelArgs& a) {
  const Geometry g = a.problem.geom<Geometry>();
  const T* x = a.in<T>(0);
  const T* dy = a.in<T>(1);
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()), [=] __device__(std::size_t i) {
    const auto e = static_cast<std::int64_t>(i);
    const std::int64_t co = e % g.co, ci = (e / g.co) % g.ci, kw = (e / g.co / g.ci) % g.x.k, kh = e / g.co / g.ci / g.x.k;
    Acc<T> acc = 0;
    bwd_filter_gather(g, x, dy, kh, kw, ci, co, 1, &acc);
    out[i] = narrow<T>(acc);
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({
    {.op = "conv2d_bwd_data", .name = "cuda.gather", .backend = Backend::cuda, .role = Role::ordered,
     .claim = op::deterministic("one thread per input element sums its contributions in the reference order, nothing "
                                "buffered (bit-equal to cpu.serial)"),
     .run = typed([](const KernelArgs& a, auto tag) { bwd_data_gathered<decltype(tag)>(a); }), .bit_equal_to = "cpu.serial"},
    {.op = "conv2d_bwd_filter", .name = "cuda.gather", .backend = Backend::cuda, .role = Role::ordered,
     .claim = op::deterministic("one thread per filter element sums its contributions over positions in the reference "
                                "order, nothing buffered (bit-equal to cpu.serial)"),
     .run = typed([](const KernelArgs& a, auto tag) { bwd_filter_gathered<decltype(tag)>(a); }), .bit_equal_to = "cpu.serial"},
});

}  // namespace d9m::conv
