// The harness's own costs: storing trial rows, and the per-trial overhead of the CPU trial loop
// (poisoning the output, timing, digesting, comparing) around a cheap op, side by side with
// calling the op directly. GPU figures are in gpu_bench.cpp.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <sqlite3.h>

#include "harness/core/catalog.h"
#include "harness/core/digest.h"
#include "harness/exec/executor.h"
#include "harness/core/inputs.h"
#include "harness/store/store.h"
#include "kernels/common/thread_pool.h"

namespace {

namespace fs = std::filesystem;

// Trial rows as the runner writes them: one transaction per case of state.range(0) trials, with
// 32-hex digests and, for one trial in ten, diff stats.
// Cases of state.range(0) trials into one store; one trial row in 10 has a diff, or every row
// but the first (`every_trial_differs`: a nondeterministic case, where nearly every trial differs
// from the first).
void store_insert_trials(benchmark::State& state, bool every_trial_differs) {
  const std::string path = (fs::temp_directory_path() / ("d9m_bench_store_" + std::to_string(::getpid()) + ".sqlite")).string();
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(path + s);
  d9m::Store store = d9m::Store::open(path, d9m::Store::Mode::read_write);
  d9m::RunInfo info{d9m::random_run_id(), d9m::utc_now(), "bench", "[]", "[]", "catalog", state.range(0), 1};
  const std::string run = store.begin_run(d9m::fingerprint_from_json({{"bench", 1}}), info);
  std::vector<d9m::TrialRecord> trials;
  for (std::int64_t t = 0; t < state.range(0); ++t)
    trials.push_back({t, t % 10 ? "0123456789abcdef0123456789abcdef" : "fedcba9876543210fedcba9876543210", 1000 + t,
                      (every_trial_differs ? t > 0 : t % 10 == 0)
                          ? std::optional<d9m::DiffStats>(d9m::DiffStats{3 + t % 50, 0.5 / static_cast<double>(1 + t), 7, 11})
                          : std::nullopt});
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
void BM_StoreInsertTrials(benchmark::State& state) { store_insert_trials(state, false); }
void BM_StoreInsertTrialsEveryTrialDiffers(benchmark::State& state) { store_insert_trials(state, true); }
// Real time: the chain is hashed on a second thread, whose CPU time the main thread's does not show.
BENCHMARK(BM_StoreInsertTrials)->Arg(200)->Arg(2000)->Arg(20000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StoreInsertTrialsEveryTrialDiffers)->Arg(2000)->Unit(benchmark::kMillisecond)->UseRealTime();

// The floor under BM_StoreInsertTrials: the same trial rows (precomputed chain links, no JSON,
// no hashing) inserted by SQLite alone, one transaction of 2000 rows, in three layouts:
//   0: schema 2-6's trials table (keyed by 32-hex run id, 64-hex case id and trial, hex digest and
//      link, WITHOUT ROWID), one row per statement, as the harness wrote it;
//   1: integer keys (a case-run number and the trial, WITHOUT ROWID) with BLOB digest and link;
//   2: schema 7's trial_rows (one integer rowid, num * 2^32 + trial, BLOB digest and link), 64 rows
//      per INSERT statement, as the harness writes it now.
// What the harness adds on top is the difference to BM_StoreInsertTrials/2000.
void BM_SqliteInsertFloor(benchmark::State& state) {
  const int layout = static_cast<int>(state.range(0));
  const std::string path = (fs::temp_directory_path() / ("d9m_bench_floor_" + std::to_string(::getpid()) + ".sqlite")).string();
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(path + s);
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
  const char* const ddl[] = {
      "CREATE TABLE trials (run_id TEXT NOT NULL, case_id TEXT NOT NULL, trial INTEGER NOT NULL, digest TEXT NOT NULL,"
      " elapsed_ns INTEGER NOT NULL, diff_count INTEGER, diff_max_abs REAL, diff_max_ulp INTEGER, diff_first_index INTEGER,"
      " chain TEXT NOT NULL, PRIMARY KEY (run_id, case_id, trial)) WITHOUT ROWID",
      "CREATE TABLE trials (case_run INTEGER NOT NULL, trial INTEGER NOT NULL, digest BLOB NOT NULL, elapsed_ns INTEGER NOT NULL,"
      " diff_count INTEGER, diff_max_abs REAL, diff_max_ulp INTEGER, diff_first_index INTEGER, chain BLOB NOT NULL,"
      " PRIMARY KEY (case_run, trial)) WITHOUT ROWID",
      "CREATE TABLE trials (id INTEGER PRIMARY KEY, digest BLOB NOT NULL, elapsed_ns INTEGER NOT NULL, diff_count INTEGER,"
      " diff_max_abs REAL, diff_max_ulp INTEGER, diff_first_index INTEGER, chain BLOB NOT NULL, choice TEXT NOT NULL DEFAULT '')"};
  sqlite3_exec(db, ddl[layout], nullptr, nullptr, nullptr);
  constexpr int kRowsPerStatement = 64;
  std::string insert = layout == 0   ? "INSERT INTO trials(run_id, case_id, trial, digest, elapsed_ns, chain) VALUES (?,?,?,?,?,?)"
                       : layout == 1 ? "INSERT INTO trials(case_run, trial, digest, elapsed_ns, chain) VALUES (?,?,?,?,?)"
                                     : "INSERT INTO trials(id, digest, elapsed_ns, chain) VALUES (?,?,?,?)";
  if (layout == 2)
    for (int r = 1; r < kRowsPerStatement; ++r) insert += ",(?,?,?,?)";
  sqlite3_stmt* ins = nullptr;
  sqlite3_prepare_v2(db, insert.c_str(), -1, &ins, nullptr);
  const std::string run = d9m::random_run_id();
  const std::string digest_hex = "0123456789abcdef0123456789abcdef";
  const std::string link_hex = d9m::sha256_hex(std::string("link"));
  const std::string digest_bin(16, '\x5a'), link_bin(32, '\xa5');
  constexpr std::int64_t kTrials = 2000;  // 31 statements of 64 rows, then 16 of one row, as the harness writes them
  sqlite3_stmt* one = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO trials(id, digest, elapsed_ns, chain) VALUES (?,?,?,?)", -1, &one, nullptr);
  std::int64_t cases = 0;
  for (auto _ : state) {
    const std::string case_id = d9m::sha256_hex(std::to_string(cases));
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    for (std::int64_t t = 0; t < kTrials;) {
      sqlite3_stmt* st = ins;
      int rows = 1;
      if (layout == 2) {
        rows = kTrials - t >= kRowsPerStatement ? kRowsPerStatement : 1;
        st = rows == 1 ? one : ins;
      }
      for (int r = 0; r < rows; ++r, ++t) {
        if (layout == 0) {
          sqlite3_bind_text(st, 1, run.data(), static_cast<int>(run.size()), SQLITE_STATIC);
          sqlite3_bind_text(st, 2, case_id.data(), static_cast<int>(case_id.size()), SQLITE_STATIC);
          sqlite3_bind_int64(st, 3, t);
          sqlite3_bind_text(st, 4, digest_hex.data(), static_cast<int>(digest_hex.size()), SQLITE_STATIC);
          sqlite3_bind_int64(st, 5, 1000 + t);
          sqlite3_bind_text(st, 6, link_hex.data(), static_cast<int>(link_hex.size()), SQLITE_STATIC);
        } else if (layout == 1) {
          sqlite3_bind_int64(st, 1, cases);
          sqlite3_bind_int64(st, 2, t);
          sqlite3_bind_blob(st, 3, digest_bin.data(), 16, SQLITE_STATIC);
          sqlite3_bind_int64(st, 4, 1000 + t);
          sqlite3_bind_blob(st, 5, link_bin.data(), 32, SQLITE_STATIC);
        } else {
          const int p = 4 * r;
          sqlite3_bind_int64(st, p + 1, (cases + 1) * (std::int64_t{1} << 32) + t);
          sqlite3_bind_blob(st, p + 2, digest_bin.data(), 16, SQLITE_STATIC);
          sqlite3_bind_int64(st, p + 3, 1000 + t);
          sqlite3_bind_blob(st, p + 4, link_bin.data(), 32, SQLITE_STATIC);
        }
      }
      if (sqlite3_step(st) != SQLITE_DONE) state.SkipWithError(sqlite3_errmsg(db));
      sqlite3_reset(st);
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    ++cases;
  }
  sqlite3_finalize(ins);
  sqlite3_finalize(one);
  sqlite3_close(db);
  state.SetItemsProcessed(state.iterations() * kTrials);
  const char* const labels[] = {"schema 2-6 layout", "integer keys, BLOB digests", "schema 7: rowid key, BLOBs, 64 rows per INSERT"};
  state.SetLabel(labels[layout]);
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(path + s);
}
BENCHMARK(BM_SqliteInsertFloor)->ArgName("layout")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// The cost of one hash-chain link per trial row (canonical row + SHA-256), alone. Arg 0: a row
// without a diff (a trial equal to the first); 1: with one, as nearly every row of a
// nondeterministic case has.
void BM_ChainLinkPerTrial(benchmark::State& state) {
  const std::string run = d9m::random_run_id(), case_id = d9m::sha256_hex(std::string("case"));
  std::string link = d9m::Store::chain_start(run);
  std::int64_t t = 0;
  const bool diff = state.range(0) != 0;
  for (auto _ : state) {
    const std::optional<d9m::DiffStats> d = diff ? std::optional<d9m::DiffStats>(d9m::DiffStats{t % 977, 0.000123 * static_cast<double>(t % 89), 3 + t % 11, t % 4096})
                                                 : std::nullopt;
    link = d9m::Store::chain_link(link, d9m::Store::canonical_trial(run, case_id, {t, "0123456789abcdef0123456789abcdef", 1000 + t, d}));
    ++t;
  }
  benchmark::DoNotOptimize(link);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChainLinkPerTrial)->Arg(0)->Arg(1);

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
