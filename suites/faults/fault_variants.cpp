// Fault-injecting variants of bias_add_grad, compiled only into d9m_with_faults (the test build
// of the CLI), never into d9m: they exist to prove that isolation contains what a broken kernel
// can do to the process that runs it. Each runs the real cpu.serial op on its first trial and
// fails on its second, so the failure strikes a case that has already started.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/registry.h"

namespace d9m::faults {

namespace {

// The trial number within this process (a fresh worker starts at 0).
bool second_trial(std::atomic<int>& calls) { return calls.fetch_add(1) == 1; }

void serial(const KernelArgs& a) { Registry::global().find_variant("bias_add_grad", "cpu.serial")->run(a); }

Claim fault_claim(const char* what) {
  return Claim{Determinism::deterministic, ClaimSource::design, std::string("fault injection: ") + what + " on trial 2"};
}

std::atomic<int> segfault_calls{0}, abort_calls{0}, hang_calls{0}, exit_calls{0}, throw_calls{0};

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.segfault", .backend = Backend::cpu, .role = Role::control,
                       .claim = fault_claim("a write to an unmapped address"),
                       .run = [](const KernelArgs& a) {
                         serial(a);
                         volatile std::uintptr_t unmapped = 64;  // volatile: no compiler can prove it invalid
                         if (second_trial(segfault_calls)) *reinterpret_cast<volatile int*>(unmapped) = 1;
                       }}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.abort", .backend = Backend::cpu, .role = Role::control,
                       .claim = fault_claim("abort()"),
                       .run = [](const KernelArgs& a) {
                         serial(a);
                         if (second_trial(abort_calls)) std::abort();
                       }}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.hang", .backend = Backend::cpu, .role = Role::control,
                       .claim = fault_claim("a hang"),
                       .run = [](const KernelArgs& a) {
                         serial(a);
                         if (second_trial(hang_calls))
                           for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
                       }}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.exit", .backend = Backend::cpu, .role = Role::control,
                       .claim = fault_claim("the process exiting with status 0"),
                       .run = [](const KernelArgs& a) {
                         serial(a);
                         if (second_trial(exit_calls)) std::_Exit(0);
                       }}});
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.throw", .backend = Backend::cpu, .role = Role::control,
                       .claim = fault_claim("an exception"),
                       .run = [](const KernelArgs& a) {
                         serial(a);
                         if (second_trial(throw_calls)) throw std::runtime_error("injected failure");
                       }}});

// Not a crash: a deterministic variant that claims cpu.serial's bits and flips the lowest bit of
// its first output element, so every trial gives the same wrong digest. The verdict must fail on
// the cross-implementation claim, the same way in `run`, `report`, `ctest` and `attest`.
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.wrong_bits", .backend = Backend::cpu, .role = Role::control,
                        .claim = {Determinism::deterministic, ClaimSource::design, "fault injection: cpu.serial's bits but one"},
                        .run = [](const KernelArgs& a) {
                          serial(a);
                          auto* out = a.out<std::uint32_t>();
                          out[0] ^= 1u;
                        },
                        .bit_equal_to = "cpu.serial"}});

// Nor this: a deterministic variant whose values are wrong, the same way in every trial (its first
// output element is off by 1 + |the element|, far beyond any tolerance). It gives one digest and
// claims no other variant's bits, so only the value check against the serial reference can tell;
// the verdict must fail on it, and the report must not offer it as a fix.
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.wrong_values", .backend = Backend::cpu, .role = Role::control,
                        .claim = {Determinism::deterministic, ClaimSource::design, "fault injection: one element wrong"},
                        .run = [](const KernelArgs& a) {
                          serial(a);
                          float* out = a.out<float>();
                          out[0] += 1.0f + (out[0] < 0 ? -out[0] : out[0]);
                        }}});

// Nor this: a variant that adds its sums into its output without clearing it first. Only the fill
// of the output before each trial can show it: NaN in the first trial makes its values differ from
// the reference, and another fill in the second its bits differ from the first's (the earlier
// constant fill, about -2.9e-16 each, gave one digest within the value check's tolerance: found
// by review).
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.unzeroed", .backend = Backend::cpu, .role = Role::control,
                        .claim = {Determinism::deterministic, ClaimSource::design, "fault injection: output not cleared"},
                        .run = [](const KernelArgs& a) {
                          std::vector<float> sums(static_cast<std::size_t>(a.problem.output.numel()));
                          KernelArgs into_sums = a;
                          into_sums.output = sums.data();
                          serial(into_sums);
                          for (std::size_t i = 0; i < sums.size(); ++i) a.out<float>()[i] += sums[i];
                        }}});

// Not a crash either: a variant claimed deterministic whose output differs once, in the one call
// of this process numbered D9M_TEST_FLIP_CALL (from 1), by the lowest bit of its first element. In
// a pipeline that call is a known (trial, step), which `d9m trace diff` must name as the source.
std::atomic<long> flip_calls{0};
Claim flip_claim() { return Claim{Determinism::deterministic, ClaimSource::design, "fault injection: one bit flipped in one call"}; }
void flip_at_call(const KernelArgs& a) {
  serial(a);
  const char* at = std::getenv("D9M_TEST_FLIP_CALL");
  if (at && flip_calls.fetch_add(1) + 1 == std::atol(at)) a.out<std::uint32_t>()[0] ^= 1u;
}
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.flip_at_call", .backend = Backend::cpu, .role = Role::control,
                        .claim = flip_claim(), .run = flip_at_call}});

// Repeatable in every process, but not between processes: a variant claimed deterministic whose
// first element's bits are xored with D9M_TEST_XOR (a number; none: unchanged) in every call. Two
// runs on one stack with other values diverge process to process, as a kernel whose result
// depends on an address or a launch setting would: what `d9m diff` and `baseline check` must see.
void env_bits(const KernelArgs& a) {
  serial(a);
  if (const char* x = std::getenv("D9M_TEST_XOR")) a.out<std::uint32_t>()[0] ^= static_cast<std::uint32_t>(std::atol(x));
}
D9M_REGISTER_VARIANTS({{.op = "bias_add_grad", .name = "test.env_bits", .backend = Backend::cpu, .role = Role::control,
                        .claim = Claim{Determinism::deterministic, ClaimSource::design,
                                       "fault injection: bits that follow D9M_TEST_XOR, repeatable within a process"},
                        .run = env_bits}});

}  // namespace d9m::faults
