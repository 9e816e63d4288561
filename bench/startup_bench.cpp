// What `d9m run` costs before and around its trials: the whole of a run of one trivial case of 2
// trials (process start, catalogue, fingerprint, store, worker, verdict, exit), an upper bound on
// start-to-first-trial, beside the floor of starting the binary at all (`d9m --version`). Spawned
// as a user runs it; the store exists (the first, uncounted run makes it), as in a nightly matrix.
#include <benchmark/benchmark.h>
#include <fcntl.h>
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

// isolation:1 runs the case in d9m's worker process, as `d9m run` does by default; 0 is
// --no-isolation.
void BM_RunOneCase(benchmark::State& state) {
  const std::string db = (fs::temp_directory_path() / ("d9m_bench_start_" + std::to_string(::getpid()) + ".sqlite")).string();
  std::vector<std::string> args = {d9m_exe(), "run", "--profile", "quick", "--op", "bias_add", "--variant", "cpu.serial",
                                   "-n", "2", "--no-canaries", "--backend", "cpu", "-q", "--db", db};
  if (state.range(0) == 0) args.push_back("--no-isolation");
  spawn_and_wait(state, args);  // makes the store
  for (auto _ : state) spawn_and_wait(state, args);
  for (const char* s : {"", "-wal", "-shm", "-runlease"}) fs::remove(db + s);
}
BENCHMARK(BM_RunOneCase)->ArgName("isolation")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
