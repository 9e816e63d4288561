// What `d9m run` costs before and around its trials: the whole of a run of one trivial case of 2
// trials (process start, catalogue, fingerprint, store, worker, verdict, exit), an upper bound on
// start-to-first-trial, beside the floor of starting the binary at all (`d9m --version`). Spawned
// as a user runs it; the store exists (the first, uncounted run makes it), as in a nightly matrix.
// library_cache:0 empties the store's cache of library versions before each run (untimed), so a
// CUDA build loads cuBLAS and cuSPARSE to read them, as every run did before the cache.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

// The binary to time: this build's, or $D9M_BENCH_EXE (another build, for a side-by-side run).
std::string d9m_exe() {
  const char* e = std::getenv("D9M_BENCH_EXE");
  return e && *e ? e : D9M_EXE;
}

void spawn_and_wait(benchmark::State& state, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  int st = 0;
  if (rc != 0 || ::waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    state.SkipWithError(("failed: " + args[0] + " " + args[1]).c_str());
}

void BM_ProcessStart(benchmark::State& state) {
  for (auto _ : state) spawn_and_wait(state, {d9m_exe(), "--version"});
}
BENCHMARK(BM_ProcessStart)->Unit(benchmark::kMillisecond)->UseRealTime();

void forget_library_versions(benchmark::State& state, const std::string& db) {
  sqlite3* c = nullptr;
  const bool ok = sqlite3_open(db.c_str(), &c) == SQLITE_OK &&
                  sqlite3_exec(c, "DELETE FROM library_versions", nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(c);
  if (!ok) state.SkipWithError(("cannot empty the library versions of " + db).c_str());
}

// isolation:1 runs the case in d9m's worker process, as `d9m run` does by default; 0 is
// --no-isolation. gpu:1 runs bias_add's cuda.atomic instead of cpu.serial, so CUDA's start is in
// the time (target <= 150 ms); with --ctest a run whose case was SKIPPED (no GPU, or a build
// without CUDA) exits 77, and the benchmark reports an error instead of a time.
void BM_RunOneCase(benchmark::State& state) {
  const std::string db = (fs::temp_directory_path() / ("d9m_bench_start_" + std::to_string(::getpid()) + ".sqlite")).string();
  const bool gpu = state.range(2) != 0;
  std::vector<std::string> args = {d9m_exe(), "run", "--profile", "quick", "--op", "bias_add", "--variant", gpu ? "cuda.atomic" : "cpu.serial",
                                   "-n", "2", "--no-canaries", "--backend", gpu ? "cuda" : "cpu", "-q", "--ctest", "--db", db};
  if (state.range(0) == 0) args.push_back("--no-isolation");
  const bool cache = state.range(1) != 0;
  spawn_and_wait(state, args);  // makes the store
  for (auto _ : state) {
    if (!cache) {
      state.PauseTiming();
      forget_library_versions(state, db);
      state.ResumeTiming();
    }
    spawn_and_wait(state, args);
  }
  for (const char* s : {"", "-wal", "-shm", "-runlease"}) fs::remove(db + s);
}
BENCHMARK(BM_RunOneCase)
    ->ArgNames({"isolation", "library_cache", "gpu"})
    ->Args({1, 1, 0})
    ->Args({1, 0, 0})
    ->Args({0, 1, 0})
    ->Args({0, 0, 0})
    ->Args({1, 1, 1})
    ->Args({0, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
