// CPU variants of the bias_add family.
#include <cstring>
#include <vector>

#include "kernels/bias_add/bias_add.h"
#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"

namespace d9m::bias_add {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

// ---- bias_add ----------------------------------------------------------------------------

void forward_serial(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const float* value = a.in<float>(0);
  const float* bias = a.in<float>(1);
  float* out = a.out<float>();
  for (std::int64_t r = 0; r < g.rows; ++r)
    for (std::int64_t c = 0; c < g.channels; ++c) out[r * g.channels + c] = value[r * g.channels + c] + bias[c];
}

void forward_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const float* value = a.in<float>(0);
  const float* bias = a.in<float>(1);
  float* out = a.out<float>();
  parallel_blocks(*a.exec.pool, sz(g.rows), 64, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r)
      for (std::size_t c = 0; c < sz(g.channels); ++c)
        out[r * sz(g.channels) + c] = value[r * sz(g.channels) + c] + bias[c];
  });
}

// Splats value and bias as separate atomic adds, so the two adds into one output come from
// different tasks in either order. With exactly two addends onto -0 (the additive identity of
// IEEE addition) the order cannot show: (-0 + a) + b == (-0 + b) + a == a + b. An atomic is not
// proof of nondeterminism, and this variant is there to show it.
void forward_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const float* value = a.in<float>(0);
  const float* bias = a.in<float>(1);
  float* out = a.out<float>();
  const std::size_t n = sz(g.rows * g.channels);
  std::fill(out, out + n, -0.0f);
  accumulate::atomic(*a.exec.pool, 2 * n, out, BiasSplat{n, g.channels, value, bias});
}

// ---- bias_add_grad -----------------------------------------------------------------------

GradRows grad_rows(const KernelArgs& a) { return {a.problem.geom<Geometry>().channels, a.in<float>(0)}; }

void grad_serial(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::serial(sz(g.rows), a.out<float>(), grad_rows(a));
}

void grad_atomic(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::atomic(*a.exec.pool, sz(g.rows), a.out<float>(), grad_rows(a));
}

void grad_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  const float* dy = a.in<float>(0);
  const std::size_t c = sz(g.channels);
  const std::size_t blocks = sz((g.rows + kRowsPerBlock - 1) / kRowsPerBlock);
  std::vector<float> partial(blocks * c, 0.0f);
  a.exec.pool->parallel_for(blocks, [&](std::size_t b) {
    float* p = &partial[b * c];
    const std::size_t end = std::min(sz(g.rows), (b + 1) * sz(kRowsPerBlock));
    for (std::size_t r = b * sz(kRowsPerBlock); r < end; ++r)
      for (std::size_t k = 0; k < c; ++k) p[k] += dy[r * c + k];
  });
  float* out = a.out<float>();
  std::memset(out, 0, c * sizeof(float));
  for (std::size_t b = 0; b < blocks; ++b)
    for (std::size_t k = 0; k < c; ++k) out[k] += partial[b * c + k];
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                       .claim = op::serial_claim(), .run = forward_serial}});
D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = forward_ordered, .bit_equal_to = "cpu.serial"}});
D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
                       .claim = op::deterministic("two atomic adds per output onto -0 commute"),
                       .run = forward_atomic, .bit_equal_to = "cpu.serial"}});

D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                       .claim = op::serial_claim(), .run = grad_serial}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic,
                       .claim = op::atomic_claim(), .run = grad_atomic}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                       .claim = op::deterministic("fixed blocks of 256 rows summed in order, then the block sums in order"),
                       .run = grad_ordered}});

}  // namespace d9m::bias_add
