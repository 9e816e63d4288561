#include "harness/exec/worker.h"
#include "harness/core/json_text.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"
#include "harness/core/files.h"
#include "harness/exec/child_wait.h"
#include "harness/exec/torch_executor.h"
#include "harness/exec/watchdog_deadline.h"

extern char** environ;

namespace d9m {

using nlohmann::json;

namespace {

template <class E> E enum_from_string(const std::string& s, std::initializer_list<E> values) {
  for (E v : values)
    if (to_string(v) == s) return v;
  throw std::invalid_argument("unknown value " + s);
}

// max_abs travels as its bits: JSON has no NaN or infinity, and a diff may well be one.
std::uint64_t bits_of(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
double double_of(std::uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

const char* kind_name(CaseExecution::Kind k) {
  switch (k) {
    case CaseExecution::Kind::ran: return "ran";
    case CaseExecution::Kind::unsupported: return "unsupported";
    case CaseExecution::Kind::skipped: return "skipped";
    case CaseExecution::Kind::error: return "error";
  }
  return "error";
}

json to_json(const CaseExecution& r) {
  json trials = json::array();
  for (const auto& t : r.trials) {
    json diff = nullptr;
    if (t.diff) diff = {t.diff->count, bits_of(t.diff->max_abs), t.diff->max_ulp, t.diff->first_index};
    json trial = {t.digest, t.elapsed_ns, diff};
    if (!t.choice.empty()) trial.push_back(t.choice);
    trials.push_back(std::move(trial));
  }
  json claim = nullptr;
  if (r.claim) claim = {{"determinism", to_string(r.claim->determinism)}, {"source", to_string(r.claim->source)}, {"reason", r.claim->reason}};
  json out = {{"kind", kind_name(r.kind)}, {"input_digest", r.input_digest}, {"detail", r.detail},
              {"claim", claim},           {"trials", trials},                {"device_lost", r.device_lost}};
  if (r.invariance) out["invariance"] = r.invariance->to_json_text();
  if (r.values) out["values"] = r.values->to_json_text();
  return out;
}

CaseExecution result_from_json(const json& j) {
  CaseExecution r;
  const std::string kind = j.at("kind").get<std::string>();
  bool known = false;
  for (auto k : {CaseExecution::Kind::ran, CaseExecution::Kind::unsupported, CaseExecution::Kind::skipped, CaseExecution::Kind::error})
    if (kind == kind_name(k)) r.kind = k, known = true;
  if (!known) throw std::invalid_argument("unknown result kind " + kind);
  r.input_digest = j.at("input_digest").get<std::string>();
  r.detail = j.at("detail").get<std::string>();
  if (!j.at("claim").is_null()) {
    const json& c = j.at("claim");
    r.claim = Claim{enum_from_string(c.at("determinism").get<std::string>(),
                                     {Determinism::deterministic, Determinism::nondeterministic, Determinism::unknown}),
                    enum_from_string(c.at("source").get<std::string>(),
                                     {ClaimSource::design, ClaimSource::vendor_doc, ClaimSource::vendor_api}),
                    c.at("reason").get<std::string>()};
  }
  for (const auto& t : j.at("trials")) {
    TrialResult tr{t.at(0).get<std::string>(), t.at(1).get<std::int64_t>(), std::nullopt};
    if (!t.at(2).is_null())
      tr.diff = DiffStats{t[2].at(0).get<std::int64_t>(), double_of(t[2].at(1).get<std::uint64_t>()),
                          t[2].at(2).get<std::int64_t>(), t[2].at(3).get<std::int64_t>()};
    if (t.size() > 3) tr.choice = t.at(3).get<std::string>();
    r.trials.push_back(std::move(tr));
  }
  if (j.contains("invariance")) r.invariance = InvarianceEvidence::from_json_text(j.at("invariance").get<std::string>());
  if (j.contains("values")) r.values = ValueCheck::from_json_text(j.at("values").get<std::string>());
  r.device_lost = j.at("device_lost").get<bool>();
  return r;
}

std::string describe_wait_status(int st) {
  if (WIFSIGNALED(st)) {
    const int sig = WTERMSIG(st);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  return "ended (wait status " + std::to_string(st) + ")";
}

}  // namespace

Worker::~Worker() {
  if (pid_ < 0) return;
  // A worker that never got its catalogue has nothing to finish (a run that failed on usage
  // right after starting it should not wait for it to parse a catalogue first).
  if (!catalog_sent_) {
    kill_and_reap();
    return;
  }
  if (to_worker_ >= 0) ::close(to_worker_);  // end of requests: the worker returns from its loop
  to_worker_ = -1;
  int st = 0;
  if (wait_child_for(pid_, st, std::chrono::seconds(5))) reaped();  // a clean exit, else SIGKILL
  if (pid_ > 0) kill_and_reap();
  if (from_worker_ >= 0) ::close(from_worker_);
}

void Worker::start() {
  // A write to a worker that died must fail with EPIPE, not kill the run.
  ::signal(SIGPIPE, SIG_IGN);
  int req[2], rep[2];
  if (::pipe2(req, O_CLOEXEC) != 0) fail_environment(std::string("cannot create a pipe for the worker: ") + std::strerror(errno));
  if (::pipe2(rep, O_CLOEXEC) != 0) {
    ::close(req[0]);
    ::close(req[1]);
    fail_environment(std::string("cannot create a pipe for the worker: ") + std::strerror(errno));
  }
  std::vector<std::string> args = {opt_.executable, "_worker", "--threads", std::to_string(opt_.threads)};
  if (!opt_.builtin_profile.empty()) args.insert(args.end(), {"--profile", opt_.builtin_profile});
  args.insert(args.end(), {"--parent", std::to_string(::getpid())});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, req[0], STDIN_FILENO);  // dup2 clears close-on-exec on the copy
  posix_spawn_file_actions_adddup2(&fa, rep[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, opt_.executable.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(req[0]);
  ::close(rep[1]);
  if (rc != 0) {
    ::close(req[1]);
    ::close(rep[0]);
    fail_environment("cannot start a worker process (" + opt_.executable + "): " + std::strerror(rc));
  }
  pid_ = pid;
  to_worker_ = req[1];
  from_worker_ = rep[0];
  buffer_.clear();
  catalog_sent_ = false;
}

void Worker::use_catalog(const Catalog& catalog, double timeout_s) {
  opt_.catalog = &catalog;
  opt_.timeout_s = timeout_s;
}

void Worker::close_requests() {
  if (to_worker_ >= 0) ::close(to_worker_);
  to_worker_ = -1;
  opt_.catalog = nullptr;  // the run's, which may be gone after this
}

void Worker::reaped() {
  remove_torch_folders_of(pid_);  // its torch backend's tensors, where it died before removing them
  pid_ = -1;
}

void Worker::kill_and_reap() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    reaped();
  }
  if (to_worker_ >= 0) ::close(to_worker_);
  if (from_worker_ >= 0) ::close(from_worker_);
  to_worker_ = from_worker_ = -1;
}

std::string Worker::reap_reason(bool* outside) {
  // Its output is closed: it is exiting or gone. Wait briefly, then make sure.
  int st = 0;
  std::string why = "closed its output but did not exit (killed)";
  if (outside) *outside = false;
  if (wait_child_for(pid_, st, std::chrono::seconds(2))) {
    why = describe_wait_status(st);
    if (outside) *outside = WIFSIGNALED(st) && (WTERMSIG(st) == SIGKILL || WTERMSIG(st) == SIGTERM);
    reaped();
  }
  kill_and_reap();
  return why;
}

std::optional<CaseExecution> Worker::run(const CaseRequest& req, bool canary_catalog, std::int64_t config_index,
                                      const TrialCallback& after_trial, const std::function<bool()>& stop) {
  CaseExecution failed;  // what is known if the worker does not finish the case
  failed.kind = CaseExecution::Kind::error;
  if (pid_ >= 0 && to_worker_ < 0) kill_and_reap();  // its requests were closed: it is on its way out
  bool started_here = false;
  if (pid_ < 0) {
    start();
    started_here = true;
  }
  if (!opt_.catalog) fail_internal("worker: a case before the run's catalogue was given (Worker::use_catalog)");
  const json request = {{"catalog", canary_catalog ? "controls" : "main"},
                        {"config", config_index},
                        {"variant", req.variant->name},
                        {"trials", req.trials},
                        {"save_outputs", req.save_outputs ? json(*req.save_outputs) : json(nullptr)}};
  // The catalogue (a worker's first message) and the request; what failed to reach the worker.
  const auto deliver = [&]() -> std::optional<std::string> {
    if (!catalog_sent_) {
      const json catalog =
          opt_.builtin_profile.empty()
              ? json{{"digest", opt_.catalog->digest}, {"catalog_text", opt_.catalog->text}, {"source", opt_.catalog->source}}
              : json{{"digest", opt_.catalog->digest}, {"builtin", opt_.builtin_profile}};
      if (!write_all(to_worker_, json_text(catalog) + "\n")) return "the catalogue";
      catalog_sent_ = true;
    }
    if (!write_all(to_worker_, request.dump() + "\n")) return "the case";
    return std::nullopt;
  };
  const bool served = catalog_sent_;  // it took a case before (and answered it: a failed one is reaped)
  auto undelivered = deliver();
  if (undelivered && !started_here) {
    // A worker that died while idle (between cases, or one started before the run's catalogue,
    // cli/run.cpp, through the run's whole start). The write failed, so this case never reached
    // it. Killed from outside (the OOM killer, kill -9), or before it took any case, it is
    // replaced once and the case runs in the new one. One that crashed by itself after answering
    // a case may have been broken by that case: this case is an ERROR saying so, as the crash
    // must not pass unrecorded. (A worker that dies after the request was written may have
    // started the case: that stays an ERROR too.)
    bool outside = false;
    const std::string why = reap_reason(&outside);
    if (served && !outside) {
      failed.detail = "the worker process " + why + " after it answered " + last_case_ + ", before it took this case " +
                      "(the crash may be that case's doing)";
      return failed;
    }
    std::fprintf(stderr, "d9m: the worker process %s while idle, before it took %s; starting another\n", why.c_str(),
                 undelivered->c_str());
    start();
    undelivered = deliver();
  }
  if (undelivered) {
    failed.detail = "the worker process " + reap_reason() + " before it took " + *undelivered;
    return failed;
  }
  // A loop turn takes ~100 ms (the poll below); one over a second means this process was stopped.
  WatchdogDeadline deadline(std::chrono::duration_cast<WatchdogDeadline::Clock::duration>(std::chrono::duration<double>(opt_.timeout_s)),
                            std::chrono::seconds(1));
  std::int64_t trials_done = 0;
  char chunk[65536];
  for (;;) {
    for (std::size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
      const std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      const json msg = json::parse(line, nullptr, false);
      // A message that is not what the protocol says (a worker gone wrong, memory corrupted by
      // the case) fails this case, never the run.
      auto malformed = [&](const std::string& why) {
        kill_and_reap();
        failed.detail = "the worker process sent a malformed message (" + why + "; killed)";
        return failed;
      };
      if (msg.is_discarded() || !msg.is_object()) return malformed("not a JSON object");
      if (msg.contains("inputs")) {
        if (!msg["inputs"].is_string()) return malformed("\"inputs\" is not a string");
        failed.input_digest = msg["inputs"].get<std::string>();
      } else if (msg.contains("trial")) {
        if (!msg["trial"].is_number_integer()) return malformed("\"trial\" is not an integer");
        trials_done = msg["trial"].get<std::int64_t>();
        deadline.renew();
        if (after_trial) after_trial(trials_done, req.trials);
      } else if (msg.contains("fatal")) {
        // The harness failing inside the worker (an unwritable outputs folder): the run stops
        // with that error, as it would have without isolation.
        if (!msg["fatal"].is_string()) return malformed("\"fatal\" is not a string");
        const std::string what = msg["fatal"].get<std::string>();
        const auto category = msg.contains("category") && msg["category"].is_string()
                                  ? error_category_from_string(msg["category"].get<std::string>())
                                  : ErrorCategory::internal;
        kill_and_reap();
        throw Error(category, what);
      } else if (msg.contains("result")) {
        CaseExecution r;
        try {
          r = result_from_json(msg["result"]);
        } catch (const std::exception& e) {
          return malformed(std::string("unreadable result: ") + e.what());
        }
        if (r.device_lost) reap_reason();  // it exits by itself; the next case gets a fresh context
        last_case_ = req.config->op->name + "/" + req.config->name + "/" + req.variant->name;
        return r;
      } else {
        return malformed("no known field");
      }
    }
    if (stop && stop()) {
      kill_and_reap();
      return std::nullopt;
    }
    if (deadline.left() < WatchdogDeadline::Clock::duration::zero()) {
      // Last look at the pipe: a heartbeat may be waiting in it.
      pollfd last{from_worker_, POLLIN, 0};
      if (::poll(&last, 1, 0) > 0) {
        const ssize_t got = ::read(from_worker_, chunk, sizeof chunk);
        if (got > 0) {
          buffer_.append(chunk, static_cast<std::size_t>(got));
          continue;
        }
      }
      kill_and_reap();
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", opt_.timeout_s);
      failed.detail = std::string("watchdog: no trial finished within ") + secs + " s (" + std::to_string(trials_done) +
                      " of " + std::to_string(req.trials) + " done); the worker process was killed";
      return failed;
    }
    pollfd p{from_worker_, POLLIN, 0};
    const int n = ::poll(&p, 1, 100);
    if (n < 0 && errno != EINTR) fail_environment(std::string("poll on the worker's pipe: ") + std::strerror(errno));
    if (n <= 0) continue;
    const ssize_t got = ::read(from_worker_, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      failed.detail = "the worker process " + reap_reason() + " while running the case (" + std::to_string(trials_done) +
                      " of " + std::to_string(req.trials) + " trials done)";
      return failed;
    }
    buffer_.append(chunk, static_cast<std::size_t>(got));
  }
}

int worker_main(unsigned threads, const std::string& builtin_profile, pid_t parent) {
  // Die with the parent: a run killed with SIGKILL must not leave a worker computing on.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 1;
  // Ctrl-C reaches the whole process group: the parent decides, and kills the worker.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  const int proto = ::dup(STDOUT_FILENO);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);  // anything else printed goes to stderr, not into the protocol
  auto send = [&](const json& j) {
    if (!write_all(proto, j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n")) std::_Exit(1);
  };
  // The parent may still be loading its catalogue (cli/run.cpp starts this process first): what
  // needs no message is done now. A built-in profile is parsed from the same embedded text the
  // parent parses; an error in it is the parent's to report first, and is sent only if asked for.
  std::optional<Catalog> builtin;
  std::optional<std::pair<std::string, ErrorCategory>> builtin_failed;
  if (!builtin_profile.empty()) try {
      builtin = builtin_catalog(builtin_profile, Registry::global());
    } catch (const Error& e) {
      builtin_failed.emplace(e.what(), e.category());
    }
  const Catalog& controls = canary_catalog(Registry::global());
  CaseHost host(threads);
  // The run's catalogue: the same configs at the same indices as the run's, which the digest checks.
  std::string line;
  Catalog catalog;
  try {
    if (!std::getline(std::cin, line)) return 0;  // the run ended before it sent one
    const json first = json::parse(line, nullptr, false);
    if (!first.is_object() || !first.contains("digest") || !first["digest"].is_string())
      fail_internal("worker: the first message is not the catalogue");
    const std::string run_digest = first["digest"].get<std::string>();
    if (first.contains("builtin")) {
      if (first["builtin"] != builtin_profile || builtin_profile.empty())
        fail_internal("worker: asked for the built-in profile " + first["builtin"].dump() + ", started for \"" + builtin_profile + "\"");
      if (builtin_failed) throw Error(builtin_failed->second, builtin_failed->first);
      catalog = std::move(*builtin);
    } else {
      if (!first.contains("catalog_text") || !first["catalog_text"].is_string() || !first.contains("source") || !first["source"].is_string())
        fail_internal("worker: the first message is not the catalogue");
      catalog = parse_catalog(first["catalog_text"].get<std::string>(), first["source"].get<std::string>(), Registry::global());
    }
    if (catalog.digest != run_digest)
      fail_internal(catalog.source + ": the worker has a catalogue of SHA-256 " + catalog.digest + ", the run's is " + run_digest);
  } catch (const Error& e) {
    send({{"fatal", e.what()}, {"category", to_string(e.category())}});
    return 3;
  }
  while (std::getline(std::cin, line)) {
    const json req = json::parse(line, nullptr, false);
    const Catalog& cat = req.is_object() && req.value("catalog", "") == "controls" ? controls : catalog;
    const std::int64_t index = req.is_object() ? req.value("config", std::int64_t{-1}) : -1;
    if (index < 0 || index >= static_cast<std::int64_t>(cat.configs.size())) {
      send({{"fatal", "worker: bad request: " + line}, {"category", to_string(ErrorCategory::internal)}});
      return 3;
    }
    const CatalogConfig& cc = cat.configs[static_cast<std::size_t>(index)];
    const VariantDef* v = Registry::global().find_variant(cc.op->name, req.value("variant", ""));
    if (!v) {
      send({{"fatal", "worker: no variant " + req.value("variant", "") + " of " + cc.op->name}, {"category", to_string(ErrorCategory::internal)}});
      return 3;
    }
    CaseRequest cr{&cc, v, req.value("trials", std::int64_t{2}), std::nullopt};
    if (req.contains("save_outputs") && req["save_outputs"].is_string()) cr.save_outputs = req["save_outputs"].get<std::string>();
    CaseExecution r;
    try {
      r = host.run(cr, [&](const std::string& digest) { send({{"inputs", digest}}); },
                   [&](std::int64_t done, std::int64_t) {
                     send({{"trial", done}});
                     return true;
                   });
    } catch (const Error& e) {
      send({{"fatal", e.what()}, {"category", to_string(e.category())}});
      return static_cast<int>(e.code());
    } catch (const std::exception& e) {
      r.kind = CaseExecution::Kind::error;
      r.detail = e.what();
    }
    send({{"result", to_json(r)}});
    if (r.device_lost) return 0;  // this process's CUDA context is gone: the next case gets a new worker
  }
  return 0;
}

}  // namespace d9m
