// The cost of determinism on the CPU, at the cost benchmarks' configs (bench_catalog.h):
//   BM_CpuCostOfDeterminism/<case>   cpu.atomic and every deterministic CPU variant of the op
//                                    (cpu.ordered, cpu.gather, cpu.fixed_point where it has them)
//                                    interleaved in every iteration on the same thread pool; per
//                                    variant its time over atomic's as a counter, and best/atomic
// What the status table's solution column reports from a run, without the harness around it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/bench_catalog.h"
#include "harness/core/inputs.h"
#include "kernels/common/thread_pool.h"

namespace {

// A variant's run on prepared inputs and output: seconds per run, over `reps` runs.
double seconds_per_run(const d9m::VariantDef& v, d9m::KernelArgs& args, int reps) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) v.run(args);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

void BM_CpuCostOfDeterminism(benchmark::State& state) {
  const auto& cc = d9m::bench::bench_catalog().configs.at(static_cast<std::size_t>(state.range(0)));
  const auto* atomic = d9m::Registry::global().find_variant(cc.op->name, "cpu.atomic");
  if (!atomic) {
    state.SkipWithError((cc.op->name + " has no cpu.atomic").c_str());
    return;
  }
  const auto variants = d9m::bench::deterministic_variants(cc.op->name, d9m::Backend::cpu);
  const auto inputs = d9m::make_inputs(*cc.op, cc.problem, cc.seed);
  d9m::ThreadPool pool(std::max(1u, std::thread::hardware_concurrency()));  // as `d9m run` does by default
  const d9m::ExecContext exec{&pool, nullptr};
  d9m::HostTensor out(cc.problem.output);
  d9m::KernelArgs args{cc.problem, {}, out.data(), exec};
  for (const auto& t : inputs) args.inputs.push_back(t.data());
  // Each variant's prepare() once, as the executor does per case, and one warm-up run each (first
  // touches of the output, the pool's threads).
  std::vector<d9m::Prepared> prepared;
  for (const auto* v : variants) prepared.push_back(v->prepare ? v->prepare(cc.problem, exec) : d9m::Prepared{});
  auto run = [&](const d9m::VariantDef& v, void* st, int reps) {
    args.state = st;
    return seconds_per_run(v, args, reps);
  };
  run(*atomic, nullptr, 1);
  for (std::size_t i = 0; i < variants.size(); ++i) run(*variants[i], prepared[i].state.get(), 1);
  double t_atomic = 0;
  std::vector<double> t_det(variants.size(), 0.0);
  for (auto _ : state) {
    t_atomic += run(*atomic, nullptr, 3);
    for (std::size_t i = 0; i < variants.size(); ++i) t_det[i] += run(*variants[i], prepared[i].state.get(), 3);
  }
  state.counters["atomic_ms"] = 1e3 * t_atomic / static_cast<double>(state.iterations());
  d9m::bench::set_cost_counters(state, variants, t_det, t_atomic);
  state.SetLabel(d9m::bench::case_label(cc) + ", " + std::to_string(pool.threads()) + " threads");
}
BENCHMARK(BM_CpuCostOfDeterminism)->Apply(d9m::bench::case_args)->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace
