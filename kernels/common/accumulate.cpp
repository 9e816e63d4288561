#include "kernels/common/accumulate.h"

#include "kernels/common/op_helpers.h"

namespace d9m::accumulate {

std::vector<VariantDef> cpu_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run) {
  return {{.op = op, .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference, .claim = op::serial_claim(),
           .run = [run](const KernelArgs& a) { run(a, Order::serial); }},
          {.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .role = Role::atomic, .claim = op::atomic_claim(),
           .run = [run](const KernelArgs& a) { run(a, Order::atomic); }},
          {.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered, .claim = op::replay_claim(),
           .run = [run](const KernelArgs& a) { run(a, Order::ordered); }, .bit_equal_to = "cpu.serial"}};
}

}  // namespace d9m::accumulate
