#include "harness/exec/value_checker.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "harness/core/error.h"
#include "harness/exec/case_exec.h"
#include "kernels/common/half.h"

namespace d9m {

namespace {

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

const HostTensor* ValueChecker::reference_for(const OpDef& op, const Problem& problem, const std::vector<HostTensor>& inputs,
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
  Executor& cpu = *cpu_;
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

const HostTensor* ValueChecker::wide_reference_for(const CatalogConfig& cc, const VariantDef& checked,
                                                   const std::vector<HostTensor>& inputs, References& refs,
                                                   const std::function<void()>& beat, std::string& why_not) {
  const VariantDef* serial = serial_variant_of(*cc.op);
  if (refs.wide.output && serial && (refs.wide.by == serial->name || refs.wide.by != checked.name)) return &*refs.wide.output;
  const Problem wide = widened(*cc.op, cc.problem);
  std::vector<HostTensor> widened_inputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) widened_inputs.push_back(converted(inputs[i], wide.inputs[i]));
  Reference computed;
  const HostTensor* out = reference_for(*cc.op, wide, widened_inputs, checked, computed, beat, why_not);
  if (!out) return nullptr;
  refs.wide.output = converted(*out, cc.problem.output);
  refs.wide.by = computed.by;
  return &*refs.wide.output;
}

ValueCheck ValueChecker::check(const CatalogConfig& cc, const VariantDef& v, const std::vector<HostTensor>& inputs,
                              References& refs, const HostTensor& output, bool on_device, const std::function<void()>& beat) {
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
  const HostTensor* ref = reference_for(*cc.op, cc.problem, inputs, v, refs.serial, beat, why_not);
  if (!ref) {
    c.reason = why_not;
    return c;
  }
  double max_ref = 0;
  c = compare_values(output, *ref, refs.serial.by, [&](double m) {
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
    if (const HostTensor* wide = wide_reference_for(cc, v, inputs, refs, beat, why_not_wide)) {
      const std::string name = refs.wide.by + " in " + std::string(dtype_short_name(widened(*cc.op, cc.problem).dtype)) +
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

}  // namespace d9m
