#include "harness/exec/pipeline_exec.h"

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/inputs.h"
#include "harness/core/json_text.h"

namespace d9m {

CaseRecord pipeline_case_record(const CatalogPipeline& pl, const PipelineSetting& s, const std::string& input_digest) {
  CaseRecord rec;
  rec.op = "pipeline:" + pl.name;
  rec.variant = s.name;
  rec.backend = to_string(pipeline_backend(s));
  rec.config = std::to_string(pl.steps) + "_steps";
  rec.config_id = pl.config_id;
  nlohmann::json params = pl.definition;
  for (std::size_t k = 0; k < pl.ops.size(); ++k) params["ops"][k]["variant"] = s.variants[k]->name;
  rec.params = json_text(params);
  rec.seed = pl.seed;
  rec.input_digest = input_digest;
  std::int64_t elements = 0;
  for (const auto& st : pl.state)
    if (st.updated) elements += st.desc.numel();
  rec.output_dtype = std::string(dtype_name(pl.dtype));
  rec.output_shape = shape_string({elements});
  rec.dtype = std::string(dtype_short_name(pl.dtype));
  rec.id = Store::case_id(rec);
  return rec;
}

Backend pipeline_backend(const PipelineSetting& s) {
  for (const VariantDef* v : s.variants)
    if (v->backend == Backend::cuda) return Backend::cuda;
  for (const VariantDef* v : s.variants)
    if (v->backend == Backend::torch) return Backend::torch;
  return Backend::cpu;
}

Role pipeline_role(const PipelineSetting& s) {
  for (Role r : {Role::atomic, Role::autotune, Role::vendor})
    for (const VariantDef* v : s.variants)
      if (v->role == r) return r;
  return Role::ordered;
}

Claim pipeline_claim(const CatalogPipeline& pl, const PipelineSetting& s) {
  std::string racing, unknown;
  for (std::size_t k = 0; k < pl.ops.size(); ++k) {
    const Determinism d = s.variants[k]->claim.determinism;
    std::string& list = d == Determinism::nondeterministic ? racing : unknown;
    if (d != Determinism::deterministic) list += (list.empty() ? "" : ", ") + pl.ops[k].name + " (" + s.variants[k]->name + ")";
  }
  if (!racing.empty()) return {Determinism::nondeterministic, ClaimSource::design, "ops claimed nondeterministic: " + racing};
  if (!unknown.empty()) return {Determinism::unknown, ClaimSource::design, "ops with no determinism claim: " + unknown};
  return {Determinism::deterministic, ClaimSource::design,
          "every one of its " + std::to_string(pl.ops.size()) + " ops runs a variant claimed deterministic"};
}

PipelineHost::PipelineHost(unsigned threads, double timeout_s) : threads_(threads), timeout_s_(timeout_s) {}
PipelineHost::~PipelineHost() = default;

Executor& PipelineHost::executor(Backend b) {
  auto& ex = executors_[b];
  if (!ex) ex = b == Backend::cpu ? make_cpu_executor(threads_) : b == Backend::cuda ? make_cuda_executor() : make_torch_executor(threads_, timeout_s_);
  return *ex;
}

namespace {

// A tensor as the data flow holds it: its bytes and their digest.
struct Value {
  HostTensor tensor;
  std::string digest;
};

HostTensor copy_as(const TensorDesc& desc, const HostTensor& from) {
  HostTensor t(desc);
  std::memcpy(t.data(), from.data(), desc.bytes());
  return t;
}

std::string digest_of(const HostTensor& t) { return digest_v1(t.data(), t.desc().bytes()).hex(); }

// Diff stats of `b` against `a` (one dtype), merged into `into` as if the tensors stood end to end
// from element `offset` on.
void add_diff(DiffStats& into, const HostTensor& a, const HostTensor& b, std::int64_t offset) {
  const DiffStats d = diff_outputs(a.desc().dtype, a.data(), b.data(), a.desc().numel());
  if (d.count == 0) return;
  if (into.count == 0) into.first_index = offset + d.first_index;
  into.count += d.count;
  into.max_abs = std::max(into.max_abs, d.max_abs);
  into.max_ulp = std::max(into.max_ulp, d.max_ulp);
}

// A trial's digest: its whole trajectory, every op output of every step in order (the output
// digests' text, digested as one buffer). A difference can heal (a last-bit change absorbed by a
// larger addend a step later) and leave the final parameters equal; the trial still differs.
std::string trajectory_digest(const std::vector<TraceRecord>& trace, std::size_t from) {
  std::string all;
  for (std::size_t i = from; i < trace.size(); ++i) all += trace[i].digest + "\n";
  return digest_v1(all.data(), all.size()).hex();
}

}  // namespace

PipelineHost::OpCheck PipelineHost::check_op(const PipelineStep& op, const VariantDef& v, const std::vector<HostTensor>& inputs,
                                              const HostTensor& output) {
  OpCheck c{op.name, std::nullopt};
  if (v.role == Role::reference) return c;  // it defines the values
  // A library may give tied maxima's gradient to another of them than the reference does (the
  // case check exempts it only where the config's fill ties them); a pipeline's own data ties
  // wherever a ReLU made a window of zeros.
  if (library_may_choose(*op.config.op, v)) {
    c.check = ValueCheck{};
    c.check->reason = "the op leaves library code a choice where maxima tie, and a pipeline's data can tie (zeros after a ReLU)";
    return c;
  }
  if (!values_) values_ = ValueChecker(executor(Backend::cpu));
  ValueChecker::References refs;
  c.check = values_->check(op.config, v, inputs, refs, output, executor(v.backend).on_device(), nullptr);
  // A pipeline case claims no other variant's bits (its ops' claims are checked as cases), so its
  // check names none: the verdict reads claimed bits of cases only.
  c.check->claimed_bits.reset();
  return c;
}

static std::optional<ValueCheck> pipeline_values(const std::vector<PipelineHost::OpCheck>& ops) {
  std::optional<ValueCheck> worst;
  std::vector<std::string> unchecked;
  std::size_t checked = 0;
  for (const auto& [name, check] : ops) {
    if (!check) continue;
    ValueCheck c = *check;
    c.reference += ", op " + name;
    if (c.outcome == ValueCheck::Outcome::unchecked) {
      unchecked.push_back(name + ": " + c.reason);
      continue;
    }
    ++checked;
    // The op that comes nearest its allowance (or goes farthest beyond it) speaks for the pipeline.
    const auto ratio = [](const ValueCheck& x) { return x.allowed > 0 ? x.max_abs / x.allowed : x.max_abs; };
    if (!worst || (c.outcome == ValueCheck::Outcome::differs && worst->outcome != c.outcome) ||
        (c.outcome == worst->outcome && ratio(c) > ratio(*worst)))
      worst = c;
  }
  if (worst && worst->outcome == ValueCheck::Outcome::differs) return worst;
  if (unchecked.empty()) return worst;
  ValueCheck u;
  u.reason = "of " + std::to_string(checked + unchecked.size()) + " ops, " + std::to_string(checked) + " checked, all agreeing; not checked: ";
  for (std::size_t i = 0; i < unchecked.size(); ++i) u.reason += (i ? "; " : "") + unchecked[i];
  return u;
}

PipelineExecution PipelineHost::run(const CatalogPipeline& pl, const PipelineSetting& s, std::int64_t trials,
                                    const TrialCallback& after_trial) {
  PipelineExecution out;
  CaseExecution& r = out.result;

  // The initial state: each tensor made by the fill of the op that first reads it.
  std::vector<Value> initial;
  {
    std::map<std::size_t, std::vector<HostTensor>> filled;  // by step
    std::vector<HostTensor> for_digest;
    for (const auto& st : pl.state) {
      const PipelineStep& step = pl.ops[st.filled_by];
      auto [it, fresh] = filled.try_emplace(st.filled_by);
      if (fresh) it->second = make_inputs(*step.config.op, step.config.problem, step.config.seed);
      TensorDesc desc = st.desc;
      desc.name = st.name;
      HostTensor t = copy_as(desc, it->second[st.input]);
      const std::string d = digest_of(t);
      for_digest.push_back(copy_as(desc, t));
      initial.push_back({std::move(t), d});
    }
    r.input_digest = input_digest(for_digest);
  }

  // Every op must be able to run here before the first trial starts.
  std::uint64_t kept = 0;  // trial 0's outputs, kept for the diff stats of later trials
  for (std::size_t k = 0; k < pl.ops.size(); ++k) {
    const VariantDef& v = *s.variants[k];
    const Problem& p = pl.ops[k].config.problem;
    const std::string who = "op " + pl.ops[k].name + " (" + pl.ops[k].config.op->name + " " + v.name + "): ";
    Executor& ex = executor(v.backend);
    if (auto why = ex.unavailable()) {
      r.kind = CaseExecution::Kind::skipped;
      r.detail = who + *why;
      return out;
    }
    if (auto why = v.unsupported ? v.unsupported(p) : std::nullopt) {
      r.kind = CaseExecution::Kind::unsupported;
      r.detail = who + *why;
      return out;
    }
    if (auto why = memory_refusal(ex, v, p)) {
      r.kind = CaseExecution::Kind::unsupported;
      r.detail = who + *why;
      return out;
    }
    kept += p.output.bytes();
  }
  kept *= static_cast<std::uint64_t>(pl.steps);
  // The trace rows wait in memory for the case's one transaction: about 512 bytes each (four
  // digests, names, the input digests' JSON).
  const std::uint64_t rows = static_cast<std::uint64_t>(trials) * static_cast<std::uint64_t>(pl.steps) * pl.ops.size();
  const std::uint64_t trace_bytes = rows * 512;
  if (const auto free = host_memory_free(); free && kept + trace_bytes > *free / 2) {
    r.kind = CaseExecution::Kind::unsupported;
    r.detail = "keeping trial 0's outputs of every step and op (for the later trials' diff stats, " + memory_text(kept) + ") and " +
               std::to_string(rows) + " trace rows until they are stored (" + memory_text(trace_bytes) + ") needs about " +
               memory_text(kept + trace_bytes) + " of host memory; " + memory_text(*free) +
               " is free, and half of it may be used (fewer steps or trials fit)";
    return out;
  }

  const std::size_t ops = pl.ops.size();
  // What keys an autotuning op's choice within a trial: its variant on its shape (made once here,
  // not at every call).
  std::vector<std::string> shapes;
  for (std::size_t k = 0; k < ops; ++k)
    shapes.push_back(s.variants[k]->name + "\n" + pl.ops[k].config.op->name + "\n" + pl.ops[k].config.params_json.dump() + "\n" +
                     std::string(dtype_name(pl.ops[k].config.dtype)) + "\n" + pl.ops[k].config.math);
  std::vector<HostTensor> first_outputs;  // trial 0's, by step * ops + position
  std::vector<std::string> first_digests;
  std::vector<Value> first_state;
  std::vector<OpCheck> op_checks;  // the first step's, in the first trial
  try {
    for (std::int64_t trial = 0; trial < trials; ++trial) {
      const std::size_t trial_rows = out.trace.size();
      std::vector<Value> state;
      for (const auto& v : initial) state.push_back({copy_as(v.tensor.desc(), v.tensor), v.digest});
      std::int64_t elapsed = 0;
      // An autotuning op searches at its first call in the trial and keeps the winner for every
      // later call of its variant on the same shape, as a framework does within one process (a
      // trial is a fresh training run); the trial's choice names each search's winner.
      std::map<std::string, std::string> chosen;
      std::string trial_choice;
      for (std::int64_t step = 0; step < pl.steps; ++step) {
        std::map<std::string, Value> scratch;  // what this step's ops wrote (state excepted)
        for (std::size_t k = 0; k < ops; ++k) {
          const PipelineStep& op = pl.ops[k];
          const VariantDef& v = *s.variants[k];
          std::vector<HostTensor> inputs;
          nlohmann::json input_digests = nlohmann::json::array();
          for (std::size_t i = 0; i < op.inputs.size(); ++i) {
            const auto sc = scratch.find(op.inputs[i]);
            const Value* val = nullptr;
            if (sc != scratch.end()) {
              val = &sc->second;
            } else {
              for (std::size_t j = 0; j < pl.state.size(); ++j)
                if (pl.state[j].name == op.inputs[i]) val = &state[j];
            }
            if (!val) fail_internal("pipeline " + pl.name + ": op " + op.name + " reads " + op.inputs[i] + ", which nothing bound");
            inputs.push_back(copy_as(op.config.problem.inputs[i], val->tensor));
            input_digests.push_back(val->digest);
          }
          const std::string& shape = shapes[k];
          OnceChoice choice;
          if (const auto c = chosen.find(shape); c != chosen.end()) choice.replay = c->second;
          const auto start = std::chrono::steady_clock::now();
          HostTensor result = executor(v.backend).run_once(v, op.config.problem, inputs, &choice);
          elapsed += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
          if (!choice.replay.empty() && choice.made != choice.replay)
            throw std::logic_error("op " + op.name + " (" + op.config.op->name + " " + v.name + ") was told to run its choice " +
                                   choice.replay + " again and named " + (choice.made.empty() ? "none" : choice.made));
          if (choice.replay.empty() && !choice.made.empty()) {
            chosen.emplace(shape, choice.made);
            trial_choice += (trial_choice.empty() ? "" : ", ") + op.name + ": " + choice.made;
          }
          if (trial == 0 && step == 0) op_checks.push_back(check_op(op, v, inputs, result));
          TraceRecord row{trial, step, static_cast<std::int64_t>(k), op.name, op.config.op->name, v.name, json_text(input_digests),
                          digest_of(result), std::nullopt};
          const std::size_t at = static_cast<std::size_t>(step) * ops + k;
          if (trial == 0) {
            first_outputs.push_back(copy_as(result.desc(), result));
            first_digests.push_back(row.digest);
          } else if (row.digest != first_digests[at]) {
            DiffStats d;
            add_diff(d, first_outputs[at], result, 0);
            row.diff = d;
          }
          Value written{std::move(result), row.digest};
          out.trace.push_back(std::move(row));
          bool is_state = false;
          for (std::size_t j = 0; j < pl.state.size(); ++j)
            if (pl.state[j].name == op.output) {
              state[j] = {copy_as(state[j].tensor.desc(), written.tensor), written.digest};
              is_state = true;
            }
          if (!is_state) scratch.insert_or_assign(op.output, std::move(written));
        }
      }
      TrialResult t;
      t.elapsed_ns = elapsed;
      t.choice = std::move(trial_choice);
      t.digest = trajectory_digest(out.trace, trial_rows);
      if (trial == 0) {
        first_state = std::move(state);
      } else if (t.digest != r.trials.front().digest) {
        // How far apart the final states are (0 elements where the difference healed).
        DiffStats d;
        d.first_index = -1;
        std::int64_t offset = 0;
        for (std::size_t j = 0; j < pl.state.size(); ++j)
          if (pl.state[j].updated) {
            add_diff(d, first_state[j].tensor, state[j].tensor, offset);
            offset += state[j].tensor.desc().numel();
          }
        t.diff = d;
      }
      r.trials.push_back(std::move(t));
      if (after_trial && !after_trial(trial + 1, trials)) break;
    }
    r.kind = CaseExecution::Kind::ran;
    r.values = pipeline_values(op_checks);
  } catch (const Error&) {
    throw;
  } catch (const Unsupported& e) {
    r = CaseExecution{CaseExecution::Kind::unsupported, r.input_digest, e.what(), std::nullopt, {}, std::nullopt, false};
    out.trace.clear();
  } catch (const std::exception& e) {
    r = CaseExecution{CaseExecution::Kind::error, r.input_digest, e.what(), std::nullopt, {}, std::nullopt, false};
    out.trace.clear();
  }
  return out;
}

}  // namespace d9m
