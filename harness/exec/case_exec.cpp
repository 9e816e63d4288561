#include "harness/exec/case_exec.h"

#include <cstdio>
#include <functional>
#include <stdexcept>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/inputs.h"
#include "harness/exec/saved_outputs.h"

namespace d9m {

std::string memory_text(std::uint64_t bytes) {
  char text[32];
  if (bytes >= (std::uint64_t{1} << 30)) std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (std::uint64_t{1} << 20)) std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else std::snprintf(text, sizeof text, "%llu KiB", static_cast<unsigned long long>((bytes + 1023) / 1024));
  return text;
}

std::optional<std::string> memory_refusal(const Executor& ex, const VariantDef& v, const Problem& p) {
  const std::optional<WorkingMemory> working = v.memory ? v.memory(p) : std::nullopt;
  const std::uint64_t held = ex.memory_held(p), work = working ? working->bytes : 0;
  const std::optional<std::uint64_t> free = ex.memory_free();
  if (!free || held + work <= *free) return std::nullopt;
  std::string why = "needs about " + memory_text(held + work) + " of " + ex.memory_name() + " (" + memory_text(held) +
                    " for the harness's copies of the data";
  if (working) why += ", " + memory_text(work) + " of working memory: " + working->what;
  return why + "); " + memory_text(*free) + " is free";
}

void check_digest_of_first_output(const HostTensor& output, const std::string& reported) {
  const std::string host = digest_v1(output.data(), output.desc().bytes()).hex();
  if (host == reported) return;
  throw std::runtime_error("trial 0's digest as the executor computed it (" + reported +
                           ") is not d9m-digest-v1 of the same output copied to the host (" + host +
                           "): the device digest is wrong on this stack, and no status can rest on it");
}

CaseHost::CaseHost(unsigned threads, double timeout_s) {
  executors_[Backend::cpu] = make_cpu_executor(threads);
  executors_[Backend::cuda] = make_cuda_executor();
  executors_[Backend::torch] = make_torch_executor(threads, timeout_s);
  values_ = ValueChecker(*executors_.at(Backend::cpu));
}

CaseHost::~CaseHost() = default;

namespace {

// Each sub-batch run once on the variant's backend and compared bit for bit with the full batch's
// first trial. A sub-batch that cannot run (UNSUPPORTED at that size, or an error) is recorded
// with its reason, not evidence; the case's own status stands on its trials.
InvarianceEvidence batch_invariance(Executor& ex, const VariantDef& v, const BatchPlan& plan,
                                    const std::vector<HostTensor>& inputs, const HostTensor& full_output) {
  InvarianceEvidence e;
  e.param = plan.axes.param;
  e.full = plan.full;
  e.claim = v.invariance;
  for (const SubBatch& sub : plan.subs) {
    SubBatchResult s;
    s.size = sub.size;
    s.offset = sub.offset;
    s.elements = sub.problem.output.numel();
    if (ex.device_lost()) {
      s.error = "not run: the device was lost";
    } else if (auto why = v.unsupported ? v.unsupported(sub.problem) : std::nullopt) {
      s.error = "UNSUPPORTED: " + *why;
    } else {
      try {
        const HostTensor out = ex.run_once(v, sub.problem, sub_batch_inputs(plan, sub, inputs));
        const HostTensor rows = cut_rows(full_output, plan.axes.output, sub.offset, sub.size);
        s.differing = diff_outputs(sub.problem.output.dtype, rows.data(), out.data(), s.elements).count;
      } catch (const Error&) {
        throw;
      } catch (const Unsupported& u) {
        s.error = std::string("UNSUPPORTED: ") + u.what();
      } catch (const std::exception& x) {
        s.error = std::string("ERROR: ") + x.what();
      }
    }
    e.subs.push_back(std::move(s));
  }
  return e;
}


}  // namespace

CaseExecution CaseHost::run(const CaseRequest& req, const InputsCallback& on_inputs, const TrialCallback& after_trial) {
  const CatalogConfig& cc = *req.config;
  const VariantDef& v = *req.variant;
  // Runs go config by config (every variant of one config, then the next), so only the current
  // config's inputs are kept: memory stays at one config's worth however long the catalogue.
  if (!prepared_.count(&cc)) prepared_.clear();
  auto [it, fresh] = prepared_.try_emplace(&cc);
  if (fresh) {
    it->second.inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    it->second.input_digest = input_digest(it->second.inputs);
    if (req.save_outputs) save_inputs(*req.save_outputs, cc, it->second.inputs, it->second.input_digest);
  }
  Prepared& prep = it->second;
  if (on_inputs) on_inputs(prep.input_digest);

  CaseExecution r;
  r.input_digest = prep.input_digest;
  Executor& ex = *executors_.at(v.backend);
  if (auto why = ex.unavailable()) {
    r.kind = CaseExecution::Kind::skipped;
    r.detail = *why;
    return r;
  }
  if (auto unsupported = v.unsupported ? v.unsupported(cc.problem) : std::nullopt) {
    r.kind = CaseExecution::Kind::unsupported;
    r.detail = *unsupported;
    return r;
  }
  // Refused before anything is allocated where it cannot fit: this machine is too small for the
  // case, which is not the variant failing.
  if (auto too_big = memory_refusal(ex, v, cc.problem)) {
    r.kind = CaseExecution::Kind::unsupported;
    r.detail = *too_big;
    return r;
  }
  // An output saved by an earlier run of this case goes now, and is written again only if every
  // trial runs. (A case not attempted here, SKIPPED or refused above, leaves it as it was.)
  if (req.save_outputs) remove_saved_output(*req.save_outputs, cc, v);
  try {
    // The first output is kept for the value check (and --save-outputs, and batch invariance).
    CaseOutcome out = ex.run(v, cc.problem, prep.inputs, req.trials, true, after_trial);
    r.kind = CaseExecution::Kind::ran;
    r.claim = out.claim;
    r.trials = std::move(out.trials);
    const bool complete = out.first_output && static_cast<std::int64_t>(r.trials.size()) == req.trials;
    if (out.first_output && !r.trials.empty() && ex.digests_off_host())
      check_digest_of_first_output(*out.first_output, r.trials.front().digest);
    if (req.save_outputs && complete) save_output(*req.save_outputs, cc, v, out.first_output->data());
    if (cc.batch && complete) r.invariance = batch_invariance(ex, v, *cc.batch, prep.inputs, *out.first_output);
    if (complete && v.role == Role::reference) {
      prep.references.serial_case = {std::move(*out.first_output), v.name, ""};  // the values every other variant is checked against
    } else if (complete) {
      // The last trial's report again, every second while a reference is computed, as a
      // heartbeat: the watchdog waits for the next trial, and a serial run at model shapes may
      // take longer than it waits (the reference is d9m's own CPU code, which ends).
      const std::function<void()> beat = after_trial ? std::function<void()>([&] { after_trial(req.trials, req.trials); }) : nullptr;
      r.values = values_.check(cc, v, prep.inputs, prep.references, *out.first_output, ex.on_device(), beat);
    }
  } catch (const Error&) {
    throw;
  } catch (const Unsupported& e) {
    r.kind = CaseExecution::Kind::unsupported;
    r.detail = e.what();
  } catch (const std::exception& e) {
    r.kind = CaseExecution::Kind::error;
    r.detail = e.what();
  }
  if (r.kind != CaseExecution::Kind::ran) r.trials.clear();
  r.device_lost = ex.device_lost();
  return r;
}

}  // namespace d9m
