#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "harness/core/digest.h"
#include "harness/exec/executor.h"
#include "kernels/common/thread_pool.h"

namespace d9m {

namespace {

// Maps float bits to integers that are ordered like the floats, so that the distance between
// two mapped values is the number of representable floats between them (the ULP distance).
std::int64_t ordered_bits(float f) {
  std::int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i < 0 ? static_cast<std::int64_t>(std::numeric_limits<std::int32_t>::min()) - i : i;
}

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(unsigned threads) : pool_(threads) {}

  std::optional<std::string> unavailable() const override { return std::nullopt; }

  CaseOutcome run(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs,
                  std::int64_t trials, bool keep_first_output, const TrialCallback& after_trial) override {
    CaseOutcome outcome;
    const ExecContext exec{&pool_, nullptr};
    KernelArgs args{p, {}, nullptr, exec};
    for (const auto& t : inputs) args.inputs.push_back(t.data());
    Prepared prepared;
    if (v.prepare) prepared = v.prepare(p, exec);  // may throw Unsupported
    args.state = prepared.state.get();
    outcome.claim = prepared.claim;
    HostTensor first(p.output), current(p.output);
    const std::size_t bytes = p.output.bytes();
    for (std::int64_t t = 0; t < trials; ++t) {
      HostTensor& out = t == 0 ? first : current;
      // Poison the output so a variant that forgets to initialise it cannot pass as deterministic
      // by inheriting the previous trial's bytes.
      std::memset(out.data(), 0xA5, bytes);
      args.output = out.data();
      const auto start = std::chrono::steady_clock::now();
      v.run(args);
      const auto stop = std::chrono::steady_clock::now();
      TrialResult r;
      r.elapsed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(stop - start).count();
      r.digest = digest_v1(out.data(), bytes, &pool_).hex();
      if (t > 0 && r.digest != outcome.trials.front().digest)
        r.diff = diff_outputs(p.output.dtype, first.data(), current.data(), p.output.numel());
      outcome.trials.push_back(std::move(r));
      if (after_trial && !after_trial(t + 1, trials)) break;
    }
    if (keep_first_output) outcome.first_output.emplace(std::move(first));
    return outcome;
  }

 private:
  ThreadPool pool_;
};

}  // namespace

DiffStats diff_outputs(DType dtype, const void* first, const void* other, std::int64_t elements) {
  DiffStats d;
  d.first_index = -1;
  for (std::int64_t i = 0; i < elements; ++i) {
    double abs_diff = 0;
    std::int64_t ulp = 0;
    if (dtype == DType::f32) {
      const float a = static_cast<const float*>(first)[i], b = static_cast<const float*>(other)[i];
      if (std::memcmp(&a, &b, sizeof a) == 0) continue;
      abs_diff = std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::infinity()
                                                : std::fabs(static_cast<double>(a) - static_cast<double>(b));
      ulp = std::llabs(ordered_bits(a) - ordered_bits(b));
    } else {
      const std::int32_t a = static_cast<const std::int32_t*>(first)[i], b = static_cast<const std::int32_t*>(other)[i];
      if (a == b) continue;
      abs_diff = std::fabs(static_cast<double>(a) - static_cast<double>(b));
      ulp = static_cast<std::int64_t>(abs_diff);
    }
    if (d.count++ == 0) d.first_index = i;
    d.max_abs = std::max(d.max_abs, abs_diff);
    d.max_ulp = std::max(d.max_ulp, ulp);
  }
  return d;
}

std::unique_ptr<Executor> make_cpu_executor(unsigned threads) { return std::make_unique<CpuExecutor>(threads); }

}  // namespace d9m
