// libFuzzer target: baselines (d9m baseline check). Any bytes must either be refused with a
// d9m::Error (usage, naming the place) or parse into a baseline, which is then checked against a
// store's evidence without a crash: the check passes, finds drift, or is refused as checking
// nothing. Anything else (another exception, a crash, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/core/error.h"
#include "harness/report/compare.h"

namespace {

// A store's evidence, in memory: one stack, three cases (one a control). The seed corpus
// (suites/fuzz/corpus/baseline/) pins these ids, so mutations reach the check itself.
const d9m::ReportData& evidence() {
  static const d9m::ReportData d = [] {
    d9m::ReportData r;
    r.store_path = "fuzz.sqlite";
    r.stacks.push_back({std::string(64, 'a'), "S1", {}, 1, {"fuzz"}});
    const struct {
      char id, digest;
      const char* config;
      const char* variant;
      d9m::Status status;
    } rows[] = {{'b', 'd', "small", "cpu.serial", d9m::Status::deterministic},
                {'c', 'd', "small", "cpu.ordered", d9m::Status::nondeterministic},
                {'e', 'f', "_canary", "cpu.serial", d9m::Status::deterministic}};
    for (const auto& row : rows) {
      d9m::CaseResult c;
      c.stack = r.stacks[0].id;
      c.case_id = std::string(64, row.id);
      c.op = "bias_add_grad";
      c.config = row.config;
      c.variant = row.variant;
      c.digest = std::string(32, row.digest);
      c.status = row.status;
      c.claim_determinism = "deterministic";
      c.trials = 2;
      c.distinct = row.status == d9m::Status::deterministic ? 1 : 2;
      r.results.push_back(c);
    }
    return r;
  }();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    d9m::check_baseline(evidence(), d9m::parse_baseline(text, "fuzz.json"), "fuzz.json");
  } catch (const d9m::Error& e) {
    // Every refusal of a baseline is bad input (exit 2), never an internal error.
    if (e.category() != d9m::ErrorCategory::usage) __builtin_trap();
  }
  return 0;
}
