#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/op_helpers.h"

namespace d9m::accumulate::cuda {

std::vector<VariantDef> cuda_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run) {
  return {{.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic("float atomicAdd from GPU threads in hardware scheduling order"),
           .run = [run](const KernelArgs& a) { run(a, Order::atomic); }},
          {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("stable radix sort by output, then one thread adds each output's "
                                      "contributions in reference order (bit-equal to cpu.ordered)"),
           .run = [run](const KernelArgs& a) { run(a, Order::ordered); },
           .bit_equal_to = "cpu.ordered"}};
}

}  // namespace d9m::accumulate::cuda
