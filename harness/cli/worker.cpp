// d9m _worker: the worker process of `d9m run` (exec/worker.h). Not for people, hence hidden.
#include <algorithm>
#include <memory>
#include <thread>

#include "harness/cli/verbs.h"
#include "harness/exec/worker.h"

namespace d9m::cli {
namespace {

struct WorkerArgs {
  std::string builtin_profile;  // the run's catalogue is this built-in profile (exec/worker.h)
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  int parent = 0;
};

}  // namespace

void add_worker(CLI::App& app, std::vector<Verb>& verbs) {
  auto o = std::make_shared<WorkerArgs>();
  auto* c = app.add_subcommand("_worker", "")->group("");
  c->add_option("--profile", o->builtin_profile);
  c->add_option("--threads", o->threads);
  c->add_option("--parent", o->parent)->required();
  verbs.push_back({c, [o] { return worker_main(o->threads, o->builtin_profile, static_cast<pid_t>(o->parent)); }});
}

}  // namespace d9m::cli
