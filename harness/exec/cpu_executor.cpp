#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "harness/core/digest.h"
#include "harness/core/element_diff.h"
#include "harness/exec/executor.h"
#include "kernels/common/thread_pool.h"

namespace d9m {

namespace {

// The stats keep ULP distances as int64: a float64 distance beyond 2^63 (values across zero at the
// ends of the range) saturates.
std::int64_t ulp_as_int64(std::uint64_t ulp) {
  return ulp > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? std::numeric_limits<std::int64_t>::max()
                                                                                    : static_cast<std::int64_t>(ulp);
}

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(unsigned threads) : pool_(threads) {}

  std::optional<std::string> unavailable() const override { return std::nullopt; }

  CaseOutcome run(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs,
                  std::int64_t trials, bool keep_first_output, const TrialCallback& after_trial) override {
    const ExecContext exec{&pool_, nullptr};
    KernelArgs args{p, {}, nullptr, exec};
    for (const auto& t : inputs) args.inputs.push_back(t.data());
    Prepared prepared;
    if (v.prepare) prepared = v.prepare(p, exec);  // may throw Unsupported
    args.state = prepared.state.get();
    const std::size_t bytes = p.output.bytes();
    CaseOutcome outcome = run_host_trials(p, trials, keep_first_output, after_trial, &pool_, [&](std::int64_t trial, void* out, std::string& choice) {
      // Poison the output so a variant that forgets to initialise it cannot pass as deterministic
      // by inheriting the previous trial's bytes.
      std::memset(out, output_poison(trial), bytes);
      args.output = out;
      args.choice = &choice;
      const auto start = std::chrono::steady_clock::now();
      v.run(args);
      const auto stop = std::chrono::steady_clock::now();
      return static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(stop - start).count());
    });
    outcome.claim = prepared.claim;
    return outcome;
  }

  HostTensor run_once(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs,
                      OnceChoice* choice = nullptr) override {
    const ExecContext exec{&pool_, nullptr};
    KernelArgs args{p, {}, nullptr, exec};
    for (const auto& t : inputs) args.inputs.push_back(t.data());
    if (choice) {
      args.choice = &choice->made;
      if (!choice->replay.empty()) args.replay = &choice->replay;
    }
    Prepared prepared;
    if (v.prepare) prepared = v.prepare(p, exec);
    args.state = prepared.state.get();
    HostTensor out(p.output);
    std::memset(out.data(), output_poison(0), p.output.bytes());
    args.output = out.data();
    v.run(args);
    return out;
  }

  std::string memory_name() const override { return "host memory"; }
  bool on_device() const override { return false; }
  std::optional<std::uint64_t> memory_free() const override { return host_memory_free(); }
  std::uint64_t memory_held(const Problem& p) const override { return 2 * static_cast<std::uint64_t>(p.output.bytes()); }

 private:
  ThreadPool pool_;
};

}  // namespace

std::optional<std::uint64_t> host_memory_free() {
  // The kernel's estimate of what can be allocated without swapping (MemAvailable), bounded by
  // the cgroup's limit where this process runs in one (a container's memory.max).
  std::optional<std::uint64_t> free;
  if (std::ifstream meminfo("/proc/meminfo"); meminfo) {
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit)
      if (key == "MemAvailable:") {
        free = kib * 1024;
        break;
      }
  }
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  std::uint64_t current = 0;
  if (max_file >> max_text && max_text != "max" && current_file >> current) {
    std::uint64_t limit = 0;
    try {
      limit = std::stoull(max_text);
    } catch (const std::exception&) {
      return free;
    }
    const std::uint64_t room = limit > current ? limit - current : 0;
    free = free ? std::min(*free, room) : room;
  }
  return free;
}

DiffStats diff_outputs(DType dtype, const void* first, const void* other, std::int64_t elements) {
  DiffStats d;
  d.first_index = -1;
  for (std::int64_t i = 0; i < elements; ++i) {
    ElementDiff e;
    if (!diff_element(dtype, first, other, i, e)) continue;
    if (d.count++ == 0) d.first_index = i;
    d.max_abs = std::max(d.max_abs, e.abs_diff);
    d.max_ulp = std::max(d.max_ulp, ulp_as_int64(e.ulp));
  }
  return d;
}

CaseOutcome run_host_trials(const Problem& p, std::int64_t trials, bool keep_first_output, const TrialCallback& after_trial,
                            ThreadPool* pool, const HostTrial& one_trial) {
  CaseOutcome outcome;
  HostTensor first(p.output), current(p.output);
  for (std::int64_t t = 0; t < trials; ++t) {
    HostTensor& out = t == 0 ? first : current;
    TrialResult r;
    r.elapsed_ns = one_trial(t, out.data(), r.choice);
    r.digest = digest_v1(out.data(), p.output.bytes(), pool).hex();
    if (t > 0 && r.digest != outcome.trials.front().digest)
      r.diff = diff_outputs(p.output.dtype, first.data(), current.data(), p.output.numel());
    outcome.trials.push_back(std::move(r));
    if (after_trial && !after_trial(t + 1, trials)) break;
  }
  if (keep_first_output) outcome.first_output.emplace(std::move(first));
  return outcome;
}

std::unique_ptr<Executor> make_cpu_executor(unsigned threads) { return std::make_unique<CpuExecutor>(threads); }

}  // namespace d9m
