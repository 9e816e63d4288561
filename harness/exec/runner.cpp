#include "harness/exec/runner.h"
#include "harness/core/json_text.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/exec/executor.h"
#include "harness/core/fingerprint.h"
#include "harness/core/inputs.h"
#include "harness/exec/case_exec.h"
#include "harness/exec/pipeline_exec.h"
#include "harness/core/files.h"
#include "harness/exec/torch_executor.h"
#include "harness/exec/worker.h"
#include "harness/store/verify.h"

namespace d9m {

namespace {

std::atomic<bool> g_stop{false};


bool any_glob(const std::vector<std::string>& globs, const std::string& s) {
  if (globs.empty()) return true;
  for (const auto& g : globs)
    if (glob_match(g, s)) return true;
  return false;
}

std::string join_names(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Progress on a terminal: one line rewritten in place, at most ten times a second.
class Progress {
 public:
  Progress(bool on, std::int64_t cases) : on_(on), cases_(cases), start_(Clock::now()) {}

  void show(std::int64_t index, const std::string& label, std::int64_t trial, std::int64_t trials) {
    if (!on_) return;
    const auto now = Clock::now();
    if (trial != 0 && trial != trials && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double done = static_cast<double>(index) + (trials ? static_cast<double>(trial) / static_cast<double>(trials) : 0);
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::string eta = "--";
    if (done > 0.05) {
      const auto left = static_cast<long>(elapsed / done * (static_cast<double>(cases_) - done));
      eta = std::to_string(left / 60) + "m" + (left % 60 < 10 ? "0" : "") + std::to_string(left % 60) + "s";
    }
    std::fprintf(stderr, "\r\033[K[%lld/%lld] %s  trial %lld/%lld  ETA %s", static_cast<long long>(index + 1),
                 static_cast<long long>(cases_), label.c_str(), static_cast<long long>(trial),
                 static_cast<long long>(trials), eta.c_str());
    std::fflush(stderr);
  }
  void done() {
    if (on_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  std::int64_t cases_;
  Clock::time_point start_, last_{};
};

}  // namespace

void request_stop() { g_stop.store(true); }

bool backend_selected(const std::string& selection, Backend b) {
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = selection.find(',', from);
    const std::string item = selection.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (item == to_string(b) || (item == "all" && b != Backend::torch)) return true;
    if (comma == std::string::npos) return false;
    from = comma + 1;
  }
}

std::string backend_list_error(const std::string& selection) {
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = selection.find(',', from);
    const std::string item = selection.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (item != "all" && item != "cpu" && item != "cuda" && item != "torch")
      return "--backend takes cpu, cuda, torch or all, or a comma-separated list of them; got '" + item + "'";
    if (comma == std::string::npos) return "";
    from = comma + 1;
  }
}

std::string plan_digest(const std::vector<PlannedCase>& cases, std::int64_t trials, unsigned threads,
                        const std::vector<PlannedPipeline>& pipelines) {
  nlohmann::json j = {{"trials", trials}, {"threads", threads}, {"cases", nlohmann::json::array()}};
  for (const auto& pc : cases)
    j["cases"].push_back({pc.config->op->name, pc.config->name, pc.config->config_id, pc.variant->name});
  // Only plans with pipelines name them, so the digests of plans without stay what they were.
  for (const auto& pp : pipelines) {
    nlohmann::json variants = nlohmann::json::array();
    for (const VariantDef* v : pp.setting->variants) variants.push_back(v->name);
    j["pipelines"].push_back({pp.pipeline->name, pp.pipeline->config_id, pp.setting->name, variants});
  }
  return sha256_hex(json_text(j));
}

std::vector<PlannedPipeline> plan_pipelines(const Catalog& cat, const Selection& sel) {
  std::vector<std::string> names;
  for (const auto& pl : cat.pipelines) names.push_back(pl.name);
  for (const auto& g : sel.pipeline_globs)
    if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return glob_match(g, n); }))
      fail_usage("--pipeline '" + g + "' matches no pipeline in the catalogue (known: " +
                 (names.empty() ? std::string("none") : join_names(names)) + ")");
  const bool narrowed_to_configs = !sel.op_globs.empty() || !sel.variant_globs.empty() || !sel.config_globs.empty();
  std::vector<PlannedPipeline> out;
  if (sel.pipeline_globs.empty() && narrowed_to_configs) return out;
  for (const auto& pl : cat.pipelines) {
    if (!any_glob(sel.pipeline_globs, pl.name)) continue;
    // A setting's backend is its case's: cuda when any op runs on the GPU.
    for (const auto& s : pl.settings)
      if (backend_selected(sel.backend, pipeline_backend(s))) out.push_back({&pl, &s});
  }
  return out;
}

std::vector<PlannedCase> plan_cases(const Catalog& cat, const Registry& reg, const Selection& sel) {
  std::vector<std::string> ops, variants, configs;
  for (const auto& cc : cat.configs) {
    ops.push_back(cc.op->name);
    configs.push_back(cc.name);
    for (const auto* v : reg.variants_of(cc.op->name)) variants.push_back(v->name);
  }
  auto check = [](const std::vector<std::string>& globs, const std::vector<std::string>& names, const char* what) {
    for (const auto& g : globs) {
      if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return glob_match(g, n); }))
        fail_usage(std::string("--") + what + " '" + g + "' matches no " + what + " in the catalogue (known: " +
                   join_names(names) + ")");
    }
  };
  check(sel.op_globs, ops, "op");
  check(sel.variant_globs, variants, "variant");
  check(sel.config_globs, configs, "config");
  if (const std::string why = backend_list_error(sel.backend); !why.empty()) fail_usage(why);

  std::vector<PlannedCase> out;
  const bool pipelines_only = !sel.pipeline_globs.empty() && sel.op_globs.empty() && sel.variant_globs.empty() && sel.config_globs.empty();
  for (const auto& cc : cat.configs) {
    if (pipelines_only) break;
    if (!any_glob(sel.op_globs, cc.op->name) || !any_glob(sel.config_globs, cc.name)) continue;
    const std::size_t first = out.size();
    for (const auto* v : reg.variants_of(cc.op->name))
      if (backend_selected(sel.backend, v->backend) && any_glob(sel.variant_globs, v->name) && cc.selects(*v))
        out.push_back({&cc, v});
    // The serial reference first: its output is then at hand for the value check of the config's
    // every other variant, and none of them computes it again (at model shapes a bucketed ordered
    // variant took 20 s to, for a check).
    std::stable_partition(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                          [](const PlannedCase& c) { return c.variant->role == Role::reference; });
  }
  if (out.empty() && plan_pipelines(cat, sel).empty())
    fail_usage("the selection matches no case (backend " + sel.backend + "; this build has variants for: " +
               join_names([&] {
                 std::vector<std::string> b;
                 for (const auto& v : reg.variants()) b.push_back(to_string(v.backend));
                 return b;
               }()) + ")");
  return out;
}

std::vector<PlannedCase> canary_cases(const std::vector<PlannedCase>& cases, const Registry& reg,
                                      const std::vector<PlannedPipeline>& pipelines) {
  std::vector<PlannedCase> out;
  const CatalogConfig& cc = canary_catalog(reg).configs.front();
  // Per backend the first variant of the canary op in these role orders: the deterministic
  // control is the serial reference where the backend has one (else d9m's ordered variant), the
  // nondeterministic control races by construction.
  auto first_with = [&](Backend b, std::initializer_list<Role> roles) -> const VariantDef* {
    for (Role role : roles)
      for (const VariantDef* v : reg.variants_of(cc.op->name))
        if (v->backend == b && v->role == role) return v;
    return nullptr;
  };
  for (Backend b : {Backend::cpu, Backend::cuda}) {
    const bool used = std::any_of(cases.begin(), cases.end(), [&](const PlannedCase& p) { return p.variant->backend == b; }) ||
                      std::any_of(pipelines.begin(), pipelines.end(), [&](const PlannedPipeline& p) {
                        return std::any_of(p.setting->variants.begin(), p.setting->variants.end(),
                                           [&](const VariantDef* v) { return v->backend == b; });
                      });
    if (!used) continue;
    for (const VariantDef* v : {first_with(b, {Role::reference, Role::ordered}), first_with(b, {Role::atomic})})
      if (v) out.push_back({&cc, v});
  }
  return out;
}

namespace {

// By config name, not config_id: two configs of one catalogue may share parameters (and so their
// id) under different names, and each is its own case. The plan digest, which resuming requires
// equal, fixes every name's parameters.
std::string case_key(const std::string& op, const std::string& config, const std::string& variant) {
  return op + "\n" + config + "\n" + variant;
}

RunInfo run_info(const Catalog& cat, const std::vector<PlannedCase>& cases, const std::vector<PlannedPipeline>& pipelines,
                 const RunOptions& opt, const GpuProbe& gpus) {
  RunInfo info;
  info.id = random_run_id();
  info.started_at = utc_now();
  info.host = host_name();
  info.gpu_uuids = json_text(nlohmann::json(gpus.uuids));
  info.arguments = opt.arguments_json;
  info.catalog_digest = cat.digest;
  info.trials_per_case = opt.trials;
  info.threads = opt.threads;
  info.plan_digest = plan_digest(cases, opt.trials, opt.threads, pipelines);
  return info;
}

CaseRecord case_record(const CatalogConfig& cc, const VariantDef& v, const std::string& input_digest) {
  CaseRecord rec;
  rec.op = cc.op->name;
  rec.variant = v.name;
  rec.backend = to_string(v.backend);
  rec.config = cc.name;
  rec.config_id = cc.config_id;
  rec.params = json_text(cc.params_json);
  rec.seed = cc.seed;
  rec.input_digest = input_digest;
  rec.output_dtype = std::string(dtype_name(cc.problem.output.dtype));
  rec.output_shape = shape_string(cc.problem.output.shape);
  rec.dtype = std::string(dtype_short_name(cc.dtype));
  rec.math = cc.math;
  rec.id = Store::case_id(rec);
  return rec;
}

// What one case's execution becomes in the store: its status, claim and role, and a row per
// trial. A case that ran fewer trials than asked is an ERROR with no trials.
CaseRunRecord case_run_record(const Claim& claim, Role role, const std::string& bit_equal_to, const CaseExecution& res,
                              std::int64_t trials_wanted, std::vector<TrialRecord>& trials) {
  CaseRunRecord cr;
  cr.claim_determinism = to_string(claim.determinism);
  cr.claim_source = to_string(claim.source);
  cr.claim_reason = claim.reason;
  cr.claim_bit_equal_to = bit_equal_to;
  cr.role = to_string(role);
  cr.detail = res.detail;
  switch (res.kind) {
    case CaseExecution::Kind::skipped: cr.status = Status::skipped; return cr;
    case CaseExecution::Kind::unsupported: cr.status = Status::unsupported; return cr;
    case CaseExecution::Kind::error: cr.status = Status::error; return cr;
    case CaseExecution::Kind::ran: break;
  }
  if (res.claim) {
    cr.claim_determinism = to_string(res.claim->determinism);
    cr.claim_source = to_string(res.claim->source);
    cr.claim_reason = res.claim->reason;
  }
  if (res.trials.size() != static_cast<std::size_t>(trials_wanted)) {
    cr.status = Status::error;
    cr.detail = "the case returned " + std::to_string(res.trials.size()) + " of " + std::to_string(trials_wanted) + " trials";
    return cr;
  }
  std::vector<std::string> digests;
  std::vector<std::int64_t> times;
  for (std::size_t t = 0; t < res.trials.size(); ++t) {
    const auto& r = res.trials[t];
    trials.push_back({static_cast<std::int64_t>(t), r.digest, r.elapsed_ns, r.diff, r.choice});
    digests.push_back(r.digest);
    times.push_back(r.elapsed_ns);
  }
  std::sort(digests.begin(), digests.end());
  cr.distinct = std::unique(digests.begin(), digests.end()) - digests.begin();
  cr.trials = static_cast<std::int64_t>(trials.size());
  std::sort(times.begin(), times.end());
  cr.min_ns = times.front();
  cr.median_ns = times.size() % 2 ? times[times.size() / 2] : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
  cr.status = cr.distinct == 1 ? Status::deterministic : Status::nondeterministic;
  if (res.invariance) cr.invariance = res.invariance->to_json_text();
  if (res.values) cr.value_check = res.values->to_json_text();
  return cr;
}

// Runs cases in a worker process (isolation) when the options name the executable to start;
// otherwise here, in this process.
class CaseRunner {
 public:
  CaseRunner(const Catalog& cat, const RunOptions& opt) : cat_(cat), controls_(canary_catalog(Registry::global())) {
    if (opt.worker) {
      worker_ = opt.worker;
      worker_->use_catalog(cat, opt.case_timeout_s);
    } else {
      host_ = std::make_unique<CaseHost>(opt.threads, opt.case_timeout_s);  // the torch worker's watchdog
    }
  }
  // No more cases: the worker exits while the run reads its evidence back for the verdict;
  // whoever holds it last (cli/run.cpp) reaps it.
  ~CaseRunner() {
    if (worker_) worker_->close_requests();
  }
  CaseRunner(const CaseRunner&) = delete;
  CaseRunner& operator=(const CaseRunner&) = delete;

  // nullopt when the run was asked to stop during the case (a case cut short is not evidence).
  std::optional<CaseExecution> run(const CaseRequest& req, const TrialCallback& after_trial) {
    std::optional<CaseExecution> res;
    const CatalogConfig& cc = *req.config;
    if (worker_) {
      const bool control = &cc == &controls_.configs.front();
      const auto config_index = control ? 0 : static_cast<std::int64_t>(&cc - cat_.configs.data());
      res = worker_->run(req, control, config_index, after_trial, [] { return g_stop.load(); });
    } else {
      res = host_->run(req, nullptr, after_trial);
    }
    if (!res || g_stop.load()) return std::nullopt;
    if (res->input_digest.empty()) {
      // The worker died before it had made the inputs: the case still needs its identity.
      auto [it, fresh] = digests_made_here_.try_emplace(&cc);
      if (fresh) it->second = input_digest(make_inputs(*cc.op, cc.problem, cc.seed));
      res->input_digest = it->second;
    }
    return res;
  }

 private:
  const Catalog& cat_;
  const Catalog& controls_;
  std::shared_ptr<Worker> worker_;
  std::unique_ptr<CaseHost> host_;
  std::map<const CatalogConfig*, std::string> digests_made_here_;
};

// A run that stops on an environment error (store full, outputs folder gone) is marked
// interrupted, so it never stays "running" in the store.
struct MarkInterruptedOnError {
  Store& store;
  const std::string& run_id;
  bool armed = true;
  ~MarkInterruptedOnError() {
    if (!armed) return;
    try {
      store.finish_run(run_id, "interrupted");
    } catch (...) {  // the store may be the thing that failed; the original error is reported
    }
  }
};

}  // namespace

namespace {

// Whether a case of the config of cases[index] after it is still to run.
bool config_has_pending(const std::vector<PlannedCase>& cases, std::size_t index, const std::set<std::string>& done) {
  const CatalogConfig* cc = cases[index].config;
  for (std::size_t i = index + 1; i < cases.size() && cases[i].config == cc; ++i)
    if (!done.count(case_key(cc->op->name, cc->name, cases[i].variant->name))) return true;
  return false;
}

}  // namespace

RunSummary run_audit(const Catalog& cat, const std::vector<PlannedCase>& selected, Store& store, const RunOptions& opt,
                     const std::vector<PlannedPipeline>& pipelines) {
  std::vector<PlannedCase> cases = opt.canaries ? canary_cases(selected, Registry::global(), pipelines) : std::vector<PlannedCase>{};
  cases.insert(cases.end(), selected.begin(), selected.end());
  if (opt.trials < 2) fail_usage("-n must be at least 2: determinism needs a second trial to compare with");
  if (opt.save_outputs) make_dirs(*opt.save_outputs);

  const GpuProbe gpus = probe_gpus();
  const LibraryVersionCache library_versions = store.library_version_cache();
  Fingerprint fp = collect_fingerprint(gpus, &library_versions);
  // PyTorch is part of the stack its cases ran on: its version, its device, its CUDA and cuDNN.
  const bool torch_used = std::any_of(cases.begin(), cases.end(), [](const PlannedCase& c) { return c.variant->backend == Backend::torch; }) ||
                          std::any_of(pipelines.begin(), pipelines.end(),
                                      [](const PlannedPipeline& p) { return pipeline_backend(*p.setting) == Backend::torch; });
  if (torch_used) {
    // No watchdog here: a probe cut short would leave PyTorch out of the fingerprint, filing its
    // cases' evidence under another stack.
    TorchExecutor probe(opt.threads);
    nlohmann::json torch = probe.stack();
    if (torch.is_object()) {
      torch.erase("ops");
      fp.json["torch"] = torch;
      fp = fingerprint_from_json(fp.json);
    }
  }
  const RunInfo info = run_info(cat, cases, pipelines, opt, gpus);
  RunSummary summary;
  summary.fingerprint_id = fp.id;
  // Cases an interrupted run already stored are evidence as they are; resuming runs the rest.
  std::set<std::string> done, ran;  // stored cases, and those of them that ran all their trials
  // A resume adds to rows already stored, and must not add to edited ones (found by audit: the
  // last case removed from an interrupted run was run again, and the run then ended as if whole).
  if (opt.resume) require_sound(store, "resumed in", "; resuming would add to evidence that is no longer as it was written");
  std::optional<ResumedRun> resumed = opt.resume ? store.resume_run(fp, info, &summary.resume_busy) : std::nullopt;
  if (resumed) {
    summary.run_id = resumed->id;
    summary.resumes = resumed->resumes;
    for (const auto& sc : resumed->done) {
      done.insert(case_key(sc.op, sc.config, sc.variant));
      if (sc.cr.status == Status::deterministic || sc.cr.status == Status::nondeterministic) ran.insert(case_key(sc.op, sc.config, sc.variant));
      ++summary.cases;
      ++summary.resumed_cases;
      ++summary.by_status[static_cast<int>(sc.cr.status)];
    }
  } else {
    summary.run_id = store.begin_run(fp, info);
  }

  CaseRunner runner(cat, opt);
  Progress progress(opt.progress, static_cast<std::int64_t>(cases.size() + pipelines.size()));
  MarkInterruptedOnError guard{store, summary.run_id};
  for (std::size_t index = 0; index < cases.size() && !g_stop.load(); ++index) {
    const CatalogConfig& cc = *cases[index].config;
    const VariantDef& v = *cases[index].variant;
    if (done.count(case_key(cc.op->name, cc.name, v.name))) {
      // A resumed run whose stop fell inside a config: its reference case is stored, the rest
      // are not. Where it had run, it runs again, unstored (2 trials), so that the rest are
      // checked against its output as in a run that never stopped, not against one computed for
      // them; it also saves the config's inputs where --save-outputs asks (the first request of
      // a config does).
      const std::string key = case_key(cc.op->name, cc.name, v.name);
      if (v.role == Role::reference && ran.count(key) && config_has_pending(cases, index, done)) {
        const std::string label = cc.op->name + "/" + cc.name + "/" + v.name + " (stored; again as the reference)";
        const auto at = static_cast<std::int64_t>(index);
        progress.show(at, label, 0, 2);
        if (!runner.run({&cc, &v, 2, opt.save_outputs}, [&](std::int64_t trials_done, std::int64_t total) {
              progress.show(at, label, trials_done, total);
              return !g_stop.load();
            }))
          break;
      }
      continue;
    }
    const std::string label = cc.op->name + "/" + cc.name + "/" + v.name;
    const auto at = static_cast<std::int64_t>(index);
    progress.show(at, label, 0, opt.trials);
    const std::optional<CaseExecution> res =
        runner.run({&cc, &v, opt.trials, opt.save_outputs}, [&](std::int64_t trials_done, std::int64_t total) {
          progress.show(at, label, trials_done, total);
          return !g_stop.load();
        });
    if (!res) break;
    std::vector<TrialRecord> trials;
    const CaseRunRecord cr = case_run_record(v.claim, v.role, v.bit_equal_to, *res, opt.trials, trials);
    store.put_case(summary.run_id, case_record(cc, v, res->input_digest), cr, trials);
    ++summary.cases;
    ++summary.by_status[static_cast<int>(cr.status)];
  }
  // The pipelines, after the cases, in this process.
  std::unique_ptr<PipelineHost> pipeline_host;
  for (std::size_t index = 0; index < pipelines.size() && !g_stop.load(); ++index) {
    const CatalogPipeline& pl = *pipelines[index].pipeline;
    const PipelineSetting& s = *pipelines[index].setting;
    const std::string op = "pipeline:" + pl.name, config = std::to_string(pl.steps) + "_steps";
    if (done.count(case_key(op, config, s.name))) continue;
    if (!pipeline_host) pipeline_host = std::make_unique<PipelineHost>(opt.threads, opt.case_timeout_s);
    const auto at = static_cast<std::int64_t>(cases.size() + index);
    const std::string label = op + "/" + s.name;
    progress.show(at, label, 0, opt.trials);
    PipelineExecution res = pipeline_host->run(pl, s, opt.trials, [&](std::int64_t trials_done, std::int64_t total) {
      progress.show(at, label, trials_done, total);
      return !g_stop.load();
    });
    if (g_stop.load()) break;
    std::vector<TrialRecord> trials;
    const CaseRunRecord cr = case_run_record(pipeline_claim(pl, s), pipeline_role(s), "", res.result, opt.trials, trials);
    // A trace belongs to trials that are evidence; a case that fell short keeps neither.
    if (trials.empty()) res.trace.clear();
    store.put_case(summary.run_id, pipeline_case_record(pl, s, res.result.input_digest), cr, trials, res.trace);
    ++summary.cases;
    ++summary.by_status[static_cast<int>(cr.status)];
  }
  progress.done();
  guard.armed = false;
  summary.interrupted = g_stop.load();
  store.finish_run(summary.run_id, summary.interrupted ? "interrupted" : "complete");
  return summary;
}

}  // namespace d9m
