// The GPU fault: a kernel that writes to an unmapped device address on trial 2, which leaves the
// CUDA context in a sticky error (cudaErrorIllegalAddress). Isolation must turn that into ERROR
// for this case and give the next GPU case a fresh worker, hence a fresh context. Test build only.
#include <atomic>
#include <cstdint>

#include "kernels/registry.h"

namespace d9m::faults {

namespace {

__global__ void write_unmapped() { *reinterpret_cast<volatile int*>(std::uintptr_t{64}) = 1; }

std::atomic<int> sticky_calls{0};

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.cuda_sticky", .backend = Backend::cuda, .role = Role::control,
                       .claim = Claim{Determinism::deterministic, ClaimSource::design,
                                      "fault injection: an illegal device address on trial 2"},
                       .run = [](const KernelArgs& a) {
                         Registry::global().find_variant("bias_add_grad", "cuda.ordered")->run(a);
                         if (sticky_calls.fetch_add(1) == 1)
                           write_unmapped<<<1, 1, 0, static_cast<cudaStream_t>(a.exec.stream)>>>();
                       }}});

}  // namespace d9m::faults
