#include "kernels/common/accumulate.h"

#include "kernels/common/op_helpers.h"

namespace d9m::accumulate {

std::uint64_t ordered_buffer_bytes(const Problem& p) {
  const std::uint64_t buffered = p.contributions == 0 ? kOrderedWaveContributions
                                                      : std::min(p.contributions, kOrderedWaveContributions);
  // A contribution is a 32-bit target and a value: 8 bytes, 16 for double (f64, and the float
  // accumulator of apply_widened at 16-bit dtypes is 4 bytes). Collected (up to twice that while
  // the chunks' vectors grow) and bucketed: three copies at most.
  const std::uint64_t per = p.dtype == DType::f64 ? 16 : 8;
  return 3 * buffered * per;
}

std::vector<VariantDef> cpu_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run) {
  return {{.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference, .claim = op::serial_claim(),
           .run = [run](const KernelArgs& a) { run(a, Order::serial); }},
          {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic, .claim = op::atomic_claim(),
           .run = [run](const KernelArgs& a) { run(a, Order::atomic); }},
          {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered, .claim = op::replay_claim(),
           .run = [run](const KernelArgs& a) { run(a, Order::ordered); }, .bit_equal_to = "cpu.serial",
           .memory = [](const Problem& p) -> std::optional<WorkingMemory> {
             return WorkingMemory{ordered_buffer_bytes(p), "the contributions of one wave of sources, collected and bucketed"};
           }}};
}

std::vector<VariantDef> cpu_fixed_point_variant(const std::string& op, std::function<void(const KernelArgs&, Order)> run) {
  return {{.op = op, .name = "cpu.fixed_point", .backend = Backend::cpu, .role = Role::ordered, .claim = op::fixed_point_claim(),
           .run = [run](const KernelArgs& a) { run(a, Order::fixed_point); },
           .memory = [](const Problem& p) -> std::optional<WorkingMemory> {
             return WorkingMemory{fixed_point_buffer_bytes(p), "a 128-bit accumulator and a double per output element"};
           }}};
}

}  // namespace d9m::accumulate
