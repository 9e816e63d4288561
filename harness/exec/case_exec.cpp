#include "harness/exec/case_exec.h"

#include "harness/core/error.h"
#include "harness/core/inputs.h"
#include "harness/exec/saved_outputs.h"

namespace d9m {

CaseHost::CaseHost(unsigned threads) {
  executors_[Backend::cpu] = make_cpu_executor(threads);
  executors_[Backend::cuda] = make_cuda_executor();
}

CaseHost::~CaseHost() = default;

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
  const Prepared& prep = it->second;
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
  try {
    CaseOutcome out = ex.run(v, cc.problem, prep.inputs, req.trials, req.save_outputs.has_value(), after_trial);
    r.kind = CaseExecution::Kind::ran;
    r.claim = out.claim;
    r.trials = std::move(out.trials);
    if (req.save_outputs && out.first_output && static_cast<std::int64_t>(r.trials.size()) == req.trials)
      save_output(*req.save_outputs, cc, v, out.first_output->data());
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
