// CPU variants of the conv family. The backprops are in scatter form (source = one forward output
// position (n, oh, ow)), and in gather form (cpu.gather: each output sums its own contributions
// in the reference order, conv.h); conv2d gathers:
//   cpu.serial   one thread, each output's reference sum (conv.h) in turn
//   cpu.ordered  outputs in fixed blocks on all threads, each with the reference sum: serial's bits
//   cpu.atomic   tasks of (block of outputs, part), parts of one block on neighbouring tasks, so
//                several threads add into the same outputs at once (walking the block in opposite
//                directions): each part's sum goes into a float accumulator with an atomic add, in
//                the order the threads get there
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/conv/conv.h"

namespace d9m::conv {
namespace {

// A backprop at the config's dtype: Taps is BwdDataTaps or BwdFilterTaps (both read their two
// inputs in order), summed in Acc<T> and rounded once (accumulate::apply_widened).
template <template <class> class Taps>
void backprop(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Geometry>();
    accumulate::apply_widened<T>(order, a, positions(g), Taps<T>{g, a.in<T>(0), a.in<T>(1)});
  });
}

// cpu.gather of conv2d_bwd_data: a task per block of input pixels (n, ih, iw), each summing all
// its channels (conv.h bwd_data_gather).
void bwd_data_gathered(const KernelArgs& a) {
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Geometry>();
    T* out = a.out<T>();
    parallel_blocks(*a.exec.pool, static_cast<std::size_t>(g.n * g.y.in * g.x.in), 16, [&](std::size_t begin, std::size_t end) {
      std::vector<Acc<T>> acc(static_cast<std::size_t>(g.ci));
      for (std::size_t px = begin; px < end; ++px) {
        const auto p = static_cast<std::int64_t>(px);
        std::fill(acc.begin(), acc.end(), Acc<T>{0});
        bwd_data_gather(g, a.in<T>(0), a.in<T>(1), p / g.x.in / g.y.in, (p / g.x.in) % g.y.in, p % g.x.in, 0, g.ci, acc.data());
        for (std::int64_t ci = 0; ci < g.ci; ++ci) out[p * g.ci + ci] = narrow<T>(acc[static_cast<std::size_t>(ci)]);
      }
    });
  });
}

// cpu.gather of conv2d_bwd_filter: a task per filter input channel (kh, kw, ci), summing every
// output channel at once (conv.h bwd_filter_gather).
void bwd_filter_gathered(const KernelArgs& a) {
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto& g = a.problem.geom<Geometry>();
    T* out = a.out<T>();
    a.exec.pool->parallel_for(static_cast<std::size_t>(g.y.k * g.x.k * g.ci), [&](std::size_t task) {
      const auto t = static_cast<std::int64_t>(task);
      std::vector<Acc<T>> acc(static_cast<std::size_t>(g.co), Acc<T>{0});
      bwd_filter_gather(g, a.in<T>(0), a.in<T>(1), t / g.ci / g.x.k, (t / g.ci) % g.x.k, t % g.ci, 0, g.co, acc.data());
      for (std::int64_t co = 0; co < g.co; ++co) out[t * g.co + co] = narrow<T>(acc[static_cast<std::size_t>(co)]);
    });
  });
}

// Outputs per task of cpu.ordered and cpu.atomic.
constexpr std::int64_t kOutputsPerTask = 64;

template <class T>
void forward_serial(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  T* out = a.out<T>();
  for (std::int64_t o = 0; o < forward_outputs(g); ++o) out[o] = from_float<T>(forward_sum(g, a.in<T>(0), a.in<T>(1), o));
}

template <class T>
void forward_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  T* out = a.out<T>();
  parallel_blocks(*a.exec.pool, static_cast<std::size_t>(forward_outputs(g)), kOutputsPerTask, [&](std::size_t begin, std::size_t end) {
    for (std::size_t o = begin; o < end; ++o) out[o] = from_float<T>(forward_sum(g, a.in<T>(0), a.in<T>(1), static_cast<std::int64_t>(o)));
  });
}

template <class T>
void forward_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const std::int64_t outputs = forward_outputs(g), parts = parts_per_output(g);
  const std::int64_t blocks = (outputs + kOutputsPerTask - 1) / kOutputsPerTask;
  std::vector<float> acc(static_cast<std::size_t>(outputs), 0.0f);
  // Task = block * parts + part: the threads that claim neighbouring tasks work on one block.
  a.exec.pool->parallel_for(static_cast<std::size_t>(blocks * parts), [&](std::size_t task) {
    const std::int64_t block = static_cast<std::int64_t>(task) / parts, part = static_cast<std::int64_t>(task) % parts;
    const std::int64_t begin = block * kOutputsPerTask, end = std::min(outputs, begin + kOutputsPerTask);
    // Even parts walk the block forwards, odd parts backwards: two threads on neighbouring parts
    // meet inside the block, and where they cross depends on their relative speed.
    for (std::int64_t i = 0; i < end - begin; ++i) {
      const std::int64_t o = part % 2 == 0 ? begin + i : end - 1 - i;
      std::atomic_ref<float>(acc[static_cast<std::size_t>(o)]).fetch_add(forward_part(g, a.in<T>(0), a.in<T>(1), o, part),
                                                                         std::memory_order_relaxed);
    }
  });
  T* out = a.out<T>();
  for (std::int64_t o = 0; o < outputs; ++o) out[o] = from_float<T>(acc[static_cast<std::size_t>(o)]);
}

}  // namespace

D9M_REGISTER_VARIANTS({
    {.op = "conv2d", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
     .claim = op::deterministic("one thread sums each output over kh, kw, ci in turn"),
     .run = [](const KernelArgs& a) { with_forward_type(a.problem.dtype, [&](auto t) { forward_serial<decltype(t)>(a); }); }},
    {.op = "conv2d", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered, .claim = op::per_output_claim(),
     .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
     .run = [](const KernelArgs& a) { with_forward_type(a.problem.dtype, [&](auto t) { forward_ordered<decltype(t)>(a); }); },
     .bit_equal_to = "cpu.serial"},
    {.op = "conv2d", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
     .claim = op::nondeterministic("split over filter taps and chunks of 8 input channels: each part's sum added with float "
                                   "atomic adds from worker threads in scheduler order"),
     .unsupported = [](const Problem& p) { return own_kernels_support(p.math); },
     .run = [](const KernelArgs& a) { with_forward_type(a.problem.dtype, [&](auto t) { forward_atomic<decltype(t)>(a); }); }},
});

D9M_REGISTER_VARIANTS(accumulate::cpu_variants("conv2d_bwd_data", backprop<BwdDataTaps>));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("conv2d_bwd_filter", backprop<BwdFilterTaps>));
D9M_REGISTER_VARIANTS({
    {.op = "conv2d_bwd_data", .name = "cpu.gather", .backend = Backend::cpu, .role = Role::ordered,
     .claim = op::deterministic("each input pixel sums its contributions in the reference order, one task per pixel, "
                                "nothing buffered: cpu.serial's bits"),
     .run = bwd_data_gathered, .bit_equal_to = "cpu.serial"},
    {.op = "conv2d_bwd_filter", .name = "cpu.gather", .backend = Backend::cpu, .role = Role::ordered,
     .claim = op::deterministic("each filter tap and input channel sums its contributions over positions in the reference "
                                "order, one task each, nothing buffered: cpu.serial's bits"),
     .run = bwd_filter_gathered, .bit_equal_to = "cpu.serial"},
});

}  // namespace d9m::conv
