#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/op_helpers.h"

namespace d9m::accumulate::cuda {

std::uint64_t ordered_buffer_bytes(const Problem& p) {
  const std::uint64_t m = p.contributions == 0 ? kWaveContributions : std::min(p.contributions, kWaveContributions);
  // A pair is a 32-bit target and a value (8 bytes for f64, at most 4 otherwise): the pairs, the
  // sorted pairs, the radix sort's own space (about one more copy), and 12 bytes per item for the
  // run-length encoding (unique targets, lengths, starts).
  const std::uint64_t pair = 4 + (p.dtype == DType::f64 ? 8 : 4);
  return m * (3 * pair + 12);
}

std::vector<VariantDef> cuda_variants(const std::string& op, std::function<void(const KernelArgs&, Order)> run) {
  return {{.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic("float atomicAdd from GPU threads in hardware scheduling order"),
           .run = [run](const KernelArgs& a) { run(a, Order::atomic); }},
          {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("stable radix sort by output, then one thread adds each output's "
                                      "contributions in reference order (bit-equal to cpu.ordered)"),
           .run = [run](const KernelArgs& a) { run(a, Order::ordered); },
           .bit_equal_to = "cpu.ordered",
           .memory = [](const Problem& p) -> std::optional<WorkingMemory> {
             return WorkingMemory{ordered_buffer_bytes(p), "one wave of (output, value) pairs, sorted and run-length encoded"};
           }}};
}

}  // namespace d9m::accumulate::cuda
