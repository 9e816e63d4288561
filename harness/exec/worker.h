// Isolation (issue 5): cases run in a worker process, so that a case that crashes, aborts,
// hangs or leaves the GPU in a sticky error costs that case (ERROR, with the reason) and not the
// run. The worker is this same d9m binary, started with the hidden subcommand `_worker` through
// posix_spawn (fork-free: safe in a process that has touched CUDA, and the worker gets a fresh
// CUDA context). One worker serves case after case until one fails; the next case gets a new one.
//
// `d9m run` starts its first worker before it loads the catalogue (cli/run.cpp), so that the
// worker's own start (the dynamic loader, OpenSSL, the controls, and a built-in catalogue, which
// the worker parses itself from the same embedded text) overlaps the parent's catalogue, store and
// fingerprint instead of following them (docs/PERFORMANCE.md has the figures).
//
// Protocol, one JSON document per line:
//   parent -> worker  {"digest": sha256, "catalog_text": text, "source": name}  once, first: the
//                                                        catalogue the run parsed, as bytes (a
//                                                        file may change, or be a pipe read once)
//                     {"digest": sha256, "builtin": profile}  instead, when the run's catalogue
//                                                        is that built-in profile (`_worker
//                                                        --profile`). Either way the worker
//                                                        checks the catalogue it has against the
//                                                        run's digest before it takes a case.
//                     {"catalog": "main"|"controls", "config": index, "variant": name, "trials": N,
//                      "save_outputs": dir|null}
//   worker -> parent  {"inputs": input_digest}            once the inputs exist
//                     {"trial": k}                        after each trial (the watchdog's heartbeat)
//                     {"result": {...}}                   the CaseExecution
//                     {"fatal": message, "category": c}   the harness failed (core/error.h): the run stops
// Anything else, or a field of the wrong type, fails the case (ERROR), never the run.
// The worker's standard output is the protocol only: stray writes to stdout go to stderr.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "harness/exec/case_exec.h"

namespace d9m {

struct WorkerOptions {
  std::string executable;       // the d9m binary (its /proc/self/exe)
  const Catalog* catalog;       // the run's catalogue, sent to each worker as the bytes it was parsed from;
                                // may be null until Worker::use_catalog, which must come before run
  unsigned threads = 1;
  double timeout_s = 300;       // the watchdog: longest wait for the next trial (the first includes set-up)
  std::string builtin_profile;  // non-empty: the catalogue is this built-in profile, which each worker
                                // parses itself from the moment it starts instead of being sent the text
};

class Worker {
 public:
  explicit Worker(WorkerOptions opt) : opt_(std::move(opt)) {}
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Starts the worker process now, before the catalogue is known (a worker is otherwise started
  // by the first run). Failing to start is an environment error, as in run.
  void start();
  // The run's catalogue and watchdog, when they were not known at construction.
  void use_catalog(const Catalog& catalog, double timeout_s);
  // No more cases: the worker's requests end, and it exits while this process goes on (the
  // destructor reaps it). A later run starts a new one.
  void close_requests();

  // Runs one case in the worker, starting one if none is alive. A worker that dies, or is killed
  // by the watchdog, gives a result of kind error with the reason, and this worker is replaced
  // on the next call. One found dead before the case reached it is replaced at once, and the case
  // runs in the new one, where it died before its catalogue or was killed from outside (SIGKILL);
  // one that failed by itself after answering a case makes this case an ERROR naming
  // that case (its crash may be that case's doing). `stop()` is polled several times a second; when it returns true the
  // worker is killed and the call returns nullopt (a case cut short is not evidence).
  std::optional<CaseExecution> run(const CaseRequest& req, bool canary_catalog, std::int64_t config_index,
                                const TrialCallback& after_trial, const std::function<bool()>& stop);

 private:
  void kill_and_reap();
  void reaped();  // pid_ was waited for: what it left behind is removed, and it is forgotten
  // Why the worker ended, after it did; `outside` (where given) says whether it was killed from
  // outside (SIGKILL: the OOM killer, kill -9; or SIGTERM, which a worker otherwise ignores)
  // rather than failing by itself.
  std::string reap_reason(bool* outside = nullptr);
  WorkerOptions opt_;
  pid_t pid_ = -1;
  int to_worker_ = -1, from_worker_ = -1;
  std::string buffer_;
  bool catalog_sent_ = false;  // the worker alive now has had its first message
  std::string last_case_;      // op/config/variant of the last case a worker answered
};

// The worker process's main loop: parses `builtin_profile` (if not empty) while it waits for the
// first message, reads the catalogue (that one, or the text sent) and checks it has the run's
// digest, then serves requests on stdin until it closes. Returns the exit code.
int worker_main(unsigned threads, const std::string& builtin_profile, pid_t parent);

}  // namespace d9m
