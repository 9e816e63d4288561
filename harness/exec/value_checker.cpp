#include "harness/exec/value_checker.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <tuple>

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

// The widest float dtype the op takes: f64, else f32.
DType widest_dtype(const OpDef& op) {
  return std::find(op.dtypes.begin(), op.dtypes.end(), DType::f64) != op.dtypes.end() ? DType::f64 : DType::f32;
}

// The problem in that dtype: every tensor that had the config's dtype has it.
Problem widened(const OpDef& op, const Problem& p) {
  Problem wide = p;
  with_precision(wide, widest_dtype(op), p.math);
  return wide;
}

// `from`'s values in a tensor of `desc`: exact into a dtype at least as wide, rounded once to
// nearest (ties to even) into a 16-bit one.
HostTensor converted(const HostTensor& from, const TensorDesc& desc) {
  HostTensor to(desc);
  const std::int64_t n = desc.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = value_at(from, i);
    switch (desc.dtype) {
      case DType::f64: to.as<double>()[i] = v; break;
      case DType::f32: to.as<float>()[i] = static_cast<float>(v); break;
      case DType::f16: to.as<Half>()[i] = half_from_double(v); break;
      case DType::bf16: to.as<BFloat16>()[i] = bfloat16_from_double(v); break;
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

std::vector<const VariantDef*> reference_candidates(const OpDef& op, const VariantDef& serial, const Problem& problem,
                                                    const VariantDef& checked) {
  // Least declared working memory first, and at equal memory the threaded variants before the
  // serial one (which buffers nothing): a gather that buffers nothing first, one with index lists
  // (max-pool, scatter, crop_and_resize) after the serial variant, and those that bucket every
  // contribution last, whose time grows with their buffers. At ResNet-50's res5a_branch2b filter
  // gradient (2 cores) the bucketed cpu.ordered took about 20 s and 0.5 GB for a reference that
  // cpu.gather and cpu.serial compute in 0.3-0.7 s.
  struct Candidate {
    std::uint64_t bytes;
    bool serial;
    const VariantDef* v;
  };
  std::vector<Candidate> all;
  for (const VariantDef* x : Registry::global().variants_of(op.name))
    if (x->backend == Backend::cpu && x->role == Role::ordered && x->bit_equal_to == serial.name && x != &checked) {
      const std::optional<WorkingMemory> m = x->memory ? x->memory(problem) : std::nullopt;
      all.push_back({m ? m->bytes : 0, false, x});
    }
  if (&serial != &checked) all.push_back({0, true, &serial});
  std::stable_sort(all.begin(), all.end(),
                   [](const Candidate& a, const Candidate& b) { return std::tie(a.bytes, a.serial) < std::tie(b.bytes, b.serial); });
  std::vector<const VariantDef*> out;
  for (const Candidate& c : all) out.push_back(c.v);
  return out;
}

bool library_may_choose(const OpDef& op, const VariantDef& v) {
  // PyTorch's backward reads the forward's index (bindings/python/d9m_torch): the first maximum.
  return (v.role == Role::vendor || v.role == Role::autotune) && op.implementation_choice;
}

const ValueChecker::Reference* ValueChecker::reference_for(const OpDef& op, const Problem& problem, const VariantDef& checked,
                                                          std::vector<Reference>& kept,
                                                          const std::function<const std::vector<HostTensor>&()>& inputs,
                                                          const std::function<HostTensor(HostTensor)>& keep_as,
                                                          const std::function<void()>& beat, std::string& why_not) {
  const VariantDef* serial = serial_variant_of(op);
  if (!serial) {
    why_not = "the op has no serial reference";
    return nullptr;
  }
  // The serial reference runs on one thread by definition; an ordered CPU variant that claims its
  // bits gives them on every thread (the unit tests hold it to that claim, and the report checks
  // it wherever both ran), so it may compute the reference faster at model shapes: never for
  // itself, and in the order of reference_candidates, the next where one cannot take the config.
  for (const VariantDef* by : reference_candidates(op, *serial, problem, checked)) {
    const std::string who = "the reference (" + by->name + ")";
    const auto known = std::find_if(kept.begin(), kept.end(), [&](const Reference& r) { return r.by == by->name; });
    if (known != kept.end()) {
      if (known->output) return &*known;
      why_not += (why_not.empty() ? "" : "; ") + known->why_not;
      continue;
    }
    std::string failed;
    if (auto why = by->unsupported ? by->unsupported(problem) : std::nullopt) {
      failed = who + " does not take this config: " + *why;
    } else if (auto too_big = memory_refusal(*cpu_, *by, problem)) {
      failed = who + " " + *too_big;
    } else {
      try {
        const Heartbeat beating(beat);
        HostTensor out = cpu_->run_once(*by, problem, inputs());
        kept.push_back({keep_as ? keep_as(std::move(out)) : std::move(out), by->name, ""});
        return &kept.back();
      } catch (const Error&) {
        throw;
      } catch (const std::bad_alloc&) {
        failed = who + " could not be allocated";
      } catch (const std::exception& e) {
        failed = who + " could not run: " + e.what();
      }
    }
    kept.push_back({std::nullopt, by->name, failed});
    why_not += (why_not.empty() ? "" : "; ") + failed;
  }
  return nullptr;
}

ValueCheck ValueChecker::check(const CatalogConfig& cc, const VariantDef& v, const std::vector<HostTensor>& inputs,
                              References& refs, const HostTensor& output, bool on_device, const std::function<void()>& beat) {
  ValueCheck c = check_values(cc, v, inputs, refs, output, on_device, beat);
  // A variant that claims another's bits, where that very variant computed the reference on these
  // inputs: the claim is checked here too, bit for bit, so that it holds or fails even where the
  // partner's own case is not in the results (a GPU run, a run of some variants: found by review,
  // a variant one bit off cpu.serial passed where cpu.serial's case had not run).
  if (!v.bit_equal_to.empty()) {
    const Reference* partner = refs.serial_case.output && refs.serial_case.by == v.bit_equal_to ? &refs.serial_case : nullptr;
    for (const auto& r : refs.serial)
      if (!partner && r.output && r.by == v.bit_equal_to) partner = &r;
    if (partner)
      c.claimed_bits = output.desc().dtype == partner->output->desc().dtype &&
                       output.desc().bytes() == partner->output->desc().bytes() &&
                       std::memcmp(output.data(), partner->output->data(), output.desc().bytes()) == 0;
  }
  return c;
}

ValueCheck ValueChecker::check_values(const CatalogConfig& cc, const VariantDef& v, const std::vector<HostTensor>& inputs,
                                      References& refs, const HostTensor& output, bool on_device, const std::function<void()>& beat) {
  ValueCheck c;
  if (library_may_choose(*cc.op, v)) {
    if (auto choice = cc.op->implementation_choice(cc.problem)) {
      c.reason = "the op leaves library code a choice here: " + *choice;
      return c;
    }
  }
  std::string why_not;
  const Reference* serial_ref = refs.serial_case.output
                                    ? &refs.serial_case
                                    : reference_for(*cc.op, cc.problem, v, refs.serial, [&]() -> const std::vector<HostTensor>& { return inputs; },
                                                    nullptr, beat, why_not);
  if (!serial_ref) {
    c.reason = why_not;
    return c;
  }
  const HostTensor* ref = &*serial_ref->output;
  double max_ref = 0;
  c = compare_values(output, *ref, serial_ref->by, [&](double m) {
    max_ref = m;
    return accepted_difference(*cc.op, cc.problem, v, m, on_device);
  });
  // A rule that an all-zero output would pass says nothing of the values, and "agrees" would say
  // that a check was made. At 16 bits, where the f64 rule below is the alternative, the op's rule
  // must also refuse an output of half the reference's size (a kernel that drops half its
  // contributions): the roundoff-scaled tolerance of a long 16-bit sum passes one (0.66-0.84 of
  // the largest value in 29 of the default profile's checks). In f32 the bar stays at zero until
  // the TF32 allowance is set from GPU evidence: scaled from f32 as it is (x 2^13), it would leave
  // every library f32 convolution on a device unchecked.
  const bool sixteen = is_16bit(output.desc().dtype);
  const double bar = sixteen ? 0.5 : 1.0;
  const auto no_check = [bar](const ValueCheck& x, double m) { return m > 0 && x.allowed >= bar * m; };
  const bool rule_is_no_check = no_check(c, max_ref);
  bool reference_drifted = false;
  std::vector<std::string> why;
  if (rule_is_no_check)
    why.push_back("the allowance for this config (" + number_text(c.allowed) + ") is at least " + (sixteen ? "half " : "") +
                  "the reference's largest value (" + number_text(max_ref) + "): " +
                  (sixteen ? "an output of half the size" : "an all-zero output") + " would pass it");
  if (sixteen) {
    // The rule against the op in f64: where it holds, the stronger evidence. A 16-bit sum as the
    // serial definition runs it stalls once the sum outgrows its addends, so over long sums the
    // serial reference itself may be farther from the f64 result than its rule allows: then the
    // rule cannot tell a right output from a wrong one either way (a library summing in f32 would
    // be called wrong), and the case is unchecked unless the f64 rule holds.
    const std::string dtype(dtype_short_name(output.desc().dtype));
    std::string why_not_wide;
    const Problem wide_problem = widened(*cc.op, cc.problem);
    // The widened copies are made only where a reference is computed; an allocation that fails
    // costs the check, never the case's trials (the candidates refuse what would not fit first).
    std::optional<std::vector<HostTensor>> widened_inputs;
    const Reference* wide_ref = reference_for(
        *cc.op, wide_problem, v, refs.wide,
        [&]() -> const std::vector<HostTensor>& {
          if (!widened_inputs) {
            std::vector<HostTensor> all;
            for (std::size_t i = 0; i < inputs.size(); ++i) all.push_back(converted(inputs[i], wide_problem.inputs[i]));
            widened_inputs = std::move(all);
          }
          return *widened_inputs;
        },
        [&](HostTensor out) { return converted(out, cc.problem.output); }, beat, why_not_wide);
    if (wide_ref) {
      const HostTensor* wide = &*wide_ref->output;
      const std::string name = wide_ref->by + " in " + std::string(dtype_short_name(widest_dtype(*cc.op))) + ", rounded to " + dtype;
      double max_wide = 0;
      const ValueCheck w = compare_values(output, *wide, name, [&](double m) {
        max_wide = m;
        return accepted_wide_difference(*cc.op, cc.problem, v, m);
      });
      // The serial definition's own distance from the f64 result, beyond both rules: it drifted.
      const double drift = compare_values(*ref, *wide, name, [](double) { return 0.0; }).max_abs;
      reference_drifted = drift > std::max(c.allowed, w.allowed);
      if (w.outcome == ValueCheck::Outcome::agrees && !no_check(w, max_wide)) {
        // The tighter of the two rules that hold speaks (an op whose rule is exact stays exact).
        const bool own_rule_tighter = c.outcome == ValueCheck::Outcome::agrees && !rule_is_no_check && c.allowed <= w.allowed;
        return own_rule_tighter ? c : w;
      }
      // Where the serial definition holds to the f64 rule, an output that misses the f64 result by
      // half its largest value (the bar of a rule that is a check) is wrong: no 16-bit rounding
      // the serial order does not show explains that.
      if (w.outcome == ValueCheck::Outcome::differs && drift <= w.allowed && w.max_abs >= 0.5 * max_wide) return w;
      if (reference_drifted)
        why.push_back("the serial reference (" + c.reference + ", computing in " + dtype + ") is itself " + number_text(drift) + " from " +
                      name + ", beyond its allowance (" + number_text(c.allowed) + ")");
      why.push_back(w.outcome == ValueCheck::Outcome::agrees
                        ? "the rule against " + name + " (" + number_text(w.allowed) + ") is no check either (largest value " +
                              number_text(max_wide) + ")"
                        : "against " + name + " it differs by up to " + number_text(w.max_abs) + " at " + std::to_string(w.beyond) +
                              " of " + std::to_string(w.elements) + " elements, beyond " + std::to_string(kWideRoundoffUnits) +
                              " units of " + dtype + " roundoff (" + number_text(w.allowed) + ")");
    } else {
      why.push_back("no wider reference: " + why_not_wide);
    }
  }
  // Beyond the op's rule: wrong values, unless the reference has drifted beyond it itself (a
  // miss beyond a rule too loose to be a check is still a miss).
  if (c.outcome == ValueCheck::Outcome::differs && !reference_drifted) return c;
  if (!rule_is_no_check && !reference_drifted) return c;
  ValueCheck unchecked;
  unchecked.reference = c.reference;
  for (std::size_t i = 0; i < why.size(); ++i) unchecked.reason += (i ? "; " : "") + why[i];
  return unchecked;
}

}  // namespace d9m
