#include "harness/exec/case_exec.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>

#include "harness/core/error.h"
#include "harness/core/inputs.h"
#include "harness/exec/saved_outputs.h"
#include "kernels/common/half.h"

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

CaseHost::CaseHost(unsigned threads, double timeout_s) {
  executors_[Backend::cpu] = make_cpu_executor(threads);
  executors_[Backend::cuda] = make_cuda_executor();
  executors_[Backend::torch] = make_torch_executor(threads, timeout_s);
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

// Calls `beat` every second on a thread of its own until destroyed (nothing when it is empty).
class Heartbeat {
 public:
  explicit Heartbeat(const std::function<void()>& beat) {
    if (!beat) return;
    thread_ = std::thread([this, beat] {
      std::unique_lock<std::mutex> lock(m_);
      while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) beat();
    });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

namespace {

const VariantDef* serial_variant_of(const OpDef& op) {
  for (const VariantDef* x : Registry::global().variants_of(op.name))
    if (x->role == Role::reference) return x;
  return nullptr;
}

bool is_16bit(DType t) { return t == DType::f16 || t == DType::bf16; }

// The problem in the widest float dtype the op takes (f64, else f32): every tensor that had the
// config's dtype has it.
Problem widened(const OpDef& op, const Problem& p) {
  Problem wide = p;
  const bool f64 = std::find(op.dtypes.begin(), op.dtypes.end(), DType::f64) != op.dtypes.end();
  with_precision(wide, f64 ? DType::f64 : DType::f32, p.math);
  return wide;
}

// `from`'s values in a tensor of `desc` (a dtype at least as wide: exact), or rounded once to
// its 16-bit dtype (through f32: a double rounding, which can miss the nearest 16-bit value by one
// unit in a rare tie, inside the rule that reads it).
HostTensor converted(const HostTensor& from, const TensorDesc& desc) {
  HostTensor to(desc);
  const std::int64_t n = desc.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = value_at(from, i);
    switch (desc.dtype) {
      case DType::f64: to.as<double>()[i] = v; break;
      case DType::f32: to.as<float>()[i] = static_cast<float>(v); break;
      case DType::f16: to.as<Half>()[i] = half_from_float(static_cast<float>(v)); break;
      case DType::bf16: to.as<BFloat16>()[i] = bfloat16_from_float(static_cast<float>(v)); break;
      case DType::i32: to.as<std::int32_t>()[i] = from.as<std::int32_t>()[i]; break;
    }
  }
  return to;
}

std::string number_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

}  // namespace

const HostTensor* CaseHost::reference_for(const OpDef& op, const Problem& problem, const std::vector<HostTensor>& inputs,
                                          const VariantDef& checked, Reference& slot, const std::function<void()>& beat,
                                          std::string& why_not) {
  const VariantDef* serial = serial_variant_of(op);
  if (!serial) {
    why_not = "the op has no serial reference";
    return nullptr;
  }
  // A reference computed by another variant than the one checked is used as it is.
  if (slot.output && (slot.by == serial->name || slot.by != checked.name)) return &*slot.output;
  // The serial reference runs on one thread by definition; an ordered CPU variant that claims its
  // bits gives them on every thread (the unit tests hold it to that claim, and the report checks
  // it wherever both ran), so it computes the reference faster at model shapes: tried first, never
  // for itself, and the serial variant after it where it cannot take the config.
  std::vector<const VariantDef*> candidates;
  for (const VariantDef* x : Registry::global().variants_of(op.name))
    if (x->backend == Backend::cpu && x->role == Role::ordered && x->bit_equal_to == serial->name && x != &checked) {
      candidates.push_back(x);
      break;
    }
  candidates.push_back(serial);
  Executor& cpu = *executors_.at(Backend::cpu);
  slot.output.reset();
  for (const VariantDef* by : candidates) {
    const std::string who = "the reference (" + by->name + ")";
    if (auto why = by->unsupported ? by->unsupported(problem) : std::nullopt) {
      why_not += (why_not.empty() ? "" : "; ") + who + " does not take this config: " + *why;
      continue;
    }
    if (auto too_big = memory_refusal(cpu, *by, problem)) {
      why_not += (why_not.empty() ? "" : "; ") + who + " " + *too_big;
      continue;
    }
    try {
      const Heartbeat beating(beat);
      slot.output = cpu.run_once(*by, problem, inputs);
      slot.by = by->name;
      return &*slot.output;
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      why_not += (why_not.empty() ? "" : "; ") + who + " could not run: " + e.what();
    }
  }
  return nullptr;
}

const HostTensor* CaseHost::wide_reference_for(const CatalogConfig& cc, const VariantDef& checked, Prepared& prep,
                                               const std::function<void()>& beat, std::string& why_not) {
  const VariantDef* serial = serial_variant_of(*cc.op);
  if (prep.wide.output && serial && (prep.wide.by == serial->name || prep.wide.by != checked.name)) return &*prep.wide.output;
  const Problem wide = widened(*cc.op, cc.problem);
  std::vector<HostTensor> inputs;
  for (std::size_t i = 0; i < prep.inputs.size(); ++i) inputs.push_back(converted(prep.inputs[i], wide.inputs[i]));
  Reference computed;
  const HostTensor* out = reference_for(*cc.op, wide, inputs, checked, computed, beat, why_not);
  if (!out) return nullptr;
  prep.wide.output = converted(*out, cc.problem.output);
  prep.wide.by = computed.by;
  return &*prep.wide.output;
}

ValueCheck CaseHost::check_values(const CatalogConfig& cc, const VariantDef& v, Prepared& prep, const HostTensor& output,
                                   bool on_device, const std::function<void()>& beat) {
  ValueCheck c;
  // Vendor libraries only: PyTorch's backward reads the forward's index (bindings/python/d9m_torch),
  // and picks the first maximum as the reference does, so its values are held to the reference.
  if ((v.role == Role::vendor || v.role == Role::autotune) && cc.op->implementation_choice) {
    if (auto choice = cc.op->implementation_choice(cc.problem)) {
      c.reason = "the op leaves library code a choice here: " + *choice;
      return c;
    }
  }
  std::string why_not;
  const HostTensor* ref = reference_for(*cc.op, cc.problem, prep.inputs, v, prep.reference, beat, why_not);
  if (!ref) {
    c.reason = why_not;
    return c;
  }
  double max_ref = 0;
  c = compare_values(output, *ref, prep.reference.by, [&](double m) {
    max_ref = m;
    return accepted_difference(*cc.op, cc.problem, v, m, on_device);
  });
  if (c.outcome == ValueCheck::Outcome::differs) return c;
  // A rule that an all-zero output would pass tells nothing of the values: it is no check, and
  // "agrees" would say that one was made.
  const bool empty_rule = max_ref > 0 && c.allowed >= max_ref;
  std::string why;
  if (empty_rule)
    why = "the allowance for this config (" + number_text(c.allowed) + ") reaches the reference's largest value (" +
          number_text(max_ref) + "): an all-zero output would pass it";
  if (is_16bit(output.desc().dtype)) {
    // The tighter rule against the wide reference: where it holds, it is the stronger evidence.
    std::string why_not_wide;
    if (const HostTensor* wide = wide_reference_for(cc, v, prep, beat, why_not_wide)) {
      const std::string name = prep.wide.by + " in " + std::string(dtype_short_name(widened(*cc.op, cc.problem).dtype)) +
                               ", rounded to " + std::string(dtype_short_name(output.desc().dtype));
      const ValueCheck w = compare_values(output, *wide, name, [&](double m) { return accepted_wide_difference(*cc.op, cc.problem, v, m); });
      if (w.outcome == ValueCheck::Outcome::agrees) return w;
      why += "; against " + name + " it differs by up to " + number_text(w.max_abs) + " at " + std::to_string(w.beyond) + " of " +
             std::to_string(w.elements) + " elements, beyond " + std::to_string(kWideRoundoffUnits) + " units of " +
             std::string(dtype_short_name(output.desc().dtype)) + " roundoff (" + number_text(w.allowed) + ")";
    } else {
      why += "; no wider reference: " + why_not_wide;
    }
  }
  if (!empty_rule) return c;
  ValueCheck unchecked;
  unchecked.reference = c.reference;
  unchecked.reason = why;
  return unchecked;
}

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
  try {
    // The first output is kept for the value check (and --save-outputs, and batch invariance).
    CaseOutcome out = ex.run(v, cc.problem, prep.inputs, req.trials, true, after_trial);
    r.kind = CaseExecution::Kind::ran;
    r.claim = out.claim;
    r.trials = std::move(out.trials);
    const bool complete = out.first_output && static_cast<std::int64_t>(r.trials.size()) == req.trials;
    if (req.save_outputs && complete) save_output(*req.save_outputs, cc, v, out.first_output->data());
    if (cc.batch && complete) r.invariance = batch_invariance(ex, v, *cc.batch, prep.inputs, *out.first_output);
    if (complete && v.role == Role::reference) {
      prep.reference.output = std::move(*out.first_output);  // the values every other variant is checked against
      prep.reference.by = v.name;
    } else if (complete) {
      // The last trial's report again, every second while a reference is computed, as a
      // heartbeat: the watchdog waits for the next trial, and a serial run at model shapes may
      // take longer than it waits (the reference is d9m's own CPU code, which ends).
      const std::function<void()> beat = after_trial ? std::function<void()>([&] { after_trial(req.trials, req.trials); }) : nullptr;
      r.values = check_values(cc, v, prep, *out.first_output, ex.on_device(), beat);
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
