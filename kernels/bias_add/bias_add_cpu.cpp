// CPU variants of the bias_add family.
#include <cstring>
#include <vector>

#include "kernels/bias_add/bias_add.h"
#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"

namespace d9m::bias_add {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

// ---- bias_add ----------------------------------------------------------------------------

template <class T>
void forward_serial(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const T* value = a.in<T>(0);
  const T* bias = a.in<T>(1);
  T* out = a.out<T>();
  for (std::int64_t r = 0; r < g.rows; ++r)
    for (std::int64_t c = 0; c < g.channels; ++c) out[r * g.channels + c] = add(value[r * g.channels + c], bias[c]);
}

template <class T>
void forward_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const T* value = a.in<T>(0);
  const T* bias = a.in<T>(1);
  T* out = a.out<T>();
  parallel_blocks(*a.exec.pool, sz(g.rows), 64, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r)
      for (std::size_t c = 0; c < sz(g.channels); ++c)
        out[r * sz(g.channels) + c] = add(value[r * sz(g.channels) + c], bias[c]);
  });
}

// Splats value and bias as separate atomic adds, so the two adds into one output come from
// different tasks in either order. With exactly two addends onto -0 (the additive identity of
// IEEE addition) the order cannot show: (-0 + a) + b == (-0 + b) + a == a + b. An atomic is not
// proof of nondeterminism, and this variant is there to show it.
template <class T>
void forward_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const T* value = a.in<T>(0);
  const T* bias = a.in<T>(1);
  T* out = a.out<T>();
  const std::size_t n = sz(g.rows * g.channels);
  std::fill(out, out + n, from_float<T>(-0.0f));
  accumulate::atomic(*a.exec.pool, 2 * n, out, BiasSplat<T>{n, g.channels, value, bias});
}

// ---- bias_add_grad -----------------------------------------------------------------------

template <class T>
GradRows<T> grad_rows(const KernelArgs& a) { return {a.problem.geom<Geometry>().channels, a.in<T>(0)}; }

template <class T>
void grad_serial(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  accumulate::serial(sz(g.rows), a.out<T>(), grad_rows<T>(a));
}

template <class T>
void grad_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::atomic(*a.exec.pool, sz(g.rows), a.out<T>(), grad_rows<T>(a));
}

template <class T>
void grad_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const T* dy = a.in<T>(0);
  const std::size_t c = sz(g.channels);
  const std::size_t blocks = sz((g.rows + kRowsPerBlock - 1) / kRowsPerBlock);
  std::vector<T> partial(blocks * c, T{});  // +0: all bits zero in every float type
  a.exec.pool->parallel_for(blocks, [&](std::size_t b) {
    T* p = &partial[b * c];
    const std::size_t end = std::min(sz(g.rows), (b + 1) * sz(kRowsPerBlock));
    for (std::size_t r = b * sz(kRowsPerBlock); r < end; ++r)
      for (std::size_t k = 0; k < c; ++k) p[k] = add(p[k], dy[r * c + k]);
  });
  T* out = a.out<T>();
  std::fill(out, out + c, T{});  // +0
  for (std::size_t b = 0; b < blocks; ++b)
    for (std::size_t k = 0; k < c; ++k) out[k] = add(out[k], partial[b * c + k]);
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                       .claim = op::serial_claim(), .run = typed([](const KernelArgs& a, auto tag) { forward_serial<decltype(tag)>(a); })}});
D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = typed([](const KernelArgs& a, auto tag) { forward_ordered<decltype(tag)>(a); }), .bit_equal_to = "cpu.serial"}});
D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
                       .claim = op::deterministic("two atomic adds per output onto -0 commute"),
                       .run = typed([](const KernelArgs& a, auto tag) { forward_atomic<decltype(tag)>(a); }), .bit_equal_to = "cpu.serial"}});

D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                       .claim = op::serial_claim(), .run = typed([](const KernelArgs& a, auto tag) { grad_serial<decltype(tag)>(a); })}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
                       .claim = op::atomic_claim(), .run = typed([](const KernelArgs& a, auto tag) { grad_atomic<decltype(tag)>(a); })}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                       .claim = op::deterministic("fixed blocks of 256 rows summed in order, then the block sums in order"),
                       .run = typed([](const KernelArgs& a, auto tag) { grad_ordered<decltype(tag)>(a); })}});

}  // namespace d9m::bias_add
