#include "kernels/common/accumulate.h"

#include "kernels/common/op_helpers.h"

namespace d9m::accumulate {

bool register_cpu_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run) {
  auto& r = Registry::global();
  r.add({.op = op, .name = "cpu.serial", .backend = Backend::cpu, .claim = op::serial_claim(),
         .run = [run](const KernelArgs& a) { run(a, Order::serial); }});
  r.add({.op = op, .name = "cpu.atomic", .backend = Backend::cpu, .claim = op::atomic_claim(),
         .run = [run](const KernelArgs& a) { run(a, Order::atomic); }});
  r.add({.op = op, .name = "cpu.ordered", .backend = Backend::cpu, .claim = op::replay_claim(),
         .run = [run](const KernelArgs& a) { run(a, Order::ordered); }, .bit_equal_to = "cpu.serial"});
  return true;
}

}  // namespace d9m::accumulate
