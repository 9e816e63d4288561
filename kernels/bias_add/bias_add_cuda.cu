// CUDA variants of the bias_add family.
#include "kernels/bias_add/bias_add.h"
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"

namespace d9m::bias_add {
namespace {

template <class T>
void forward_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const T* value = a.in<T>(0);
  const T* bias = a.in<T>(1);
  T* out = a.out<T>();
  const std::int64_t c = g.channels;
  cuda::for_each_index(a, static_cast<std::size_t>(g.rows * c),
                       [=] __device__(std::size_t i) { out[i] = add(value[i], bias[static_cast<std::int64_t>(i) % c]); });
}

template <class T>
void forward_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const auto n = static_cast<std::size_t>(g.rows * g.channels);
  T* out = a.out<T>();
  const T negative_zero = from_float<T>(-0.0f);
  cuda::for_each_index(a, n, [=] __device__(std::size_t i) { out[i] = negative_zero; });
  accumulate::cuda::atomic(cuda::stream_of(a), 2 * n, out, BiasSplat<T>{n, g.channels, a.in<T>(0), a.in<T>(1)});
}

template <class T>
void grad_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  cuda::zero_output(a);
  accumulate::cuda::atomic(cuda::stream_of(a), static_cast<std::size_t>(g.rows), a.out<T>(),
                           GradRows<T>{g.channels, a.in<T>(0)});
}

// The order of cpu.ordered: one thread per (block of kRowsPerBlock rows, channel) sums its rows
// in order from 0; then one thread per channel sums the block partials in order from 0.
template <class T>
void grad_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const std::int64_t c = g.channels, rows = g.rows, blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  DeviceBuffer partial(static_cast<std::size_t>(blocks * c) * sizeof(T), cuda::stream_of(a));
  T* p = partial.get<T>();
  const T* dy = a.in<T>(0);
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(blocks * c), [=] __device__(std::size_t i) {
    const std::int64_t b = static_cast<std::int64_t>(i) / c, k = static_cast<std::int64_t>(i) % c;
    const std::int64_t end = (b + 1) * kRowsPerBlock < rows ? (b + 1) * kRowsPerBlock : rows;
    T acc{};
    for (std::int64_t r = b * kRowsPerBlock; r < end; ++r) acc = add(acc, dy[r * c + k]);
    p[i] = acc;
  });
  cuda::for_each_index(a, static_cast<std::size_t>(c), [=] __device__(std::size_t k) {
    T acc{};
    for (std::int64_t b = 0; b < blocks; ++b) acc = add(acc, p[b * c + static_cast<std::int64_t>(k)]);
    out[k] = acc;
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = typed([](const KernelArgs& a, auto tag) { forward_ordered<decltype(tag)>(a); }), .bit_equal_to = "cpu.ordered"}});
D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
                       .claim = op::deterministic("two atomicAdds per output onto -0 commute"), .run = typed([](const KernelArgs& a, auto tag) { forward_atomic<decltype(tag)>(a); })}});
// (No bit_equal_to claim: atom.add.f32 flushes subnormals to zero, so on subnormal inputs its
// bits can differ from the CPU's, deterministically.)
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
                       .claim = op::nondeterministic("float atomicAdd of every row into the channel sums, in hardware order"),
                       .run = typed([](const KernelArgs& a, auto tag) { grad_atomic<decltype(tag)>(a); })}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::deterministic("blocks of 256 rows summed in order, then block sums in order (two passes)"),
                       .run = typed([](const KernelArgs& a, auto tag) { grad_ordered<decltype(tag)>(a); }), .bit_equal_to = "cpu.ordered"}});

}  // namespace d9m::bias_add
