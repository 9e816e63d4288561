// The harness's own costs: storing trial rows, and the per-trial overhead of the CPU trial loop
// (poisoning the output, timing, digesting, comparing) around a cheap op, side by side with
// calling the op directly. GPU figures are in gpu_bench.cpp.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "harness/catalog.h"
#include "harness/executor.h"
#include "harness/inputs.h"
#include "harness/store.h"
#include "kernels/common/thread_pool.h"

namespace {

namespace fs = std::filesystem;

// Trial rows as the runner writes them: one transaction per case of state.range(0) trials, with
// 32-hex digests and, for one trial in ten, diff stats.
void BM_StoreInsertTrials(benchmark::State& state) {
  const std::string path = (fs::temp_directory_path() / ("d9m_bench_store_" + std::to_string(::getpid()) + ".sqlite")).string();
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(path + s);
  d9m::Store store = d9m::Store::open(path, d9m::Store::Mode::read_write);
  d9m::RunInfo info{d9m::random_run_id(), d9m::utc_now(), "bench", "[]", "[]", "catalog", state.range(0), 1};
  const std::string run = store.begin_run(d9m::fingerprint_from_json({{"bench", 1}}), info);
  std::vector<d9m::TrialRecord> trials;
  for (std::int64_t t = 0; t < state.range(0); ++t)
    trials.push_back({t, t % 10 ? "0123456789abcdef0123456789abcdef" : "fedcba9876543210fedcba9876543210", 1000 + t,
                      t % 10 ? std::nullopt : std::optional<d9m::DiffStats>(d9m::DiffStats{3, 0.5, 7, 11})});
  std::int64_t cases = 0;
  for (auto _ : state) {
    d9m::CaseRecord rec{"", "op", "cpu.atomic", "cpu", "cfg" + std::to_string(cases++), "cid", "{}", 1, "in", "float32", "[1]"};
    rec.id = d9m::Store::case_id(rec);
    d9m::CaseRunRecord cr{d9m::Status::nondeterministic, "", "nondeterministic", "design", "r", "", state.range(0), 2, 1000, 1000};
    store.put_case(run, rec, cr, trials);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(path + s);
}
BENCHMARK(BM_StoreInsertTrials)->Arg(200)->Arg(2000)->Arg(20000)->Unit(benchmark::kMillisecond);

// A cheap op (bias_add_grad of one 4x4x4 row block) run directly: the baseline of the pair below.
struct CheapCase {
  d9m::CatalogConfig cc = d9m::parse_catalog(
      R"({"schema":"d9m.catalog/1","configs":[{"op":"bias_add_grad","name":"tiny","params":{"n":1,"h":4,"w":4,"c":4}}]})", "bench",
      d9m::Registry::global()).configs.at(0);
  std::vector<d9m::HostTensor> inputs = d9m::make_inputs(*cc.op, cc.problem, 1);
  const d9m::VariantDef* variant = d9m::Registry::global().find_variant("bias_add_grad", "cpu.serial");
};

void BM_TrialOverhead_DirectOp(benchmark::State& state) {
  CheapCase c;
  d9m::ThreadPool pool(1);
  const d9m::ExecContext exec{&pool, nullptr};
  d9m::HostTensor out(c.cc.problem.output);
  d9m::KernelArgs args{c.cc.problem, {c.inputs[0].data()}, out.data(), exec};
  for (auto _ : state) {
    c.variant->run(args);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TrialOverhead_DirectOp);

// The same op through the CPU executor's trial loop, 1000 trials per call.
void BM_TrialOverhead_Harness(benchmark::State& state) {
  CheapCase c;
  auto ex = d9m::make_cpu_executor(1);
  constexpr std::int64_t kTrials = 1000;
  for (auto _ : state) benchmark::DoNotOptimize(ex->run(*c.variant, c.cc.problem, c.inputs, kTrials, false, nullptr));
  state.SetItemsProcessed(state.iterations() * kTrials);
}
BENCHMARK(BM_TrialOverhead_Harness)->Unit(benchmark::kMicrosecond);

}  // namespace
