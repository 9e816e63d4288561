#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/op_helpers.h"

namespace d9m::accumulate::cuda {

__global__ void segment_sum_kernel(const std::uint32_t* unique_targets, const int* run_lengths,
                                   const int* run_offsets, const int* runs, const float* values, float* out) {
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= *runs) return;
  const std::uint32_t t = unique_targets[r];
  float acc = out[t];
  const int first = run_offsets[r], end = first + run_lengths[r];
  for (int i = first; i < end; ++i) acc += values[i];
  out[t] = acc;
}

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
