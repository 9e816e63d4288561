// What one case's trials show, in the words every layer shares: the status the evidence gives
// and how a trial's output differs from the first trial's. The executors produce these, the
// store keeps them and the reports read them.
#pragma once
#include <cstdint>
#include <string>

namespace d9m {

enum class Status { deterministic, nondeterministic, error, unsupported, skipped };
std::string to_string(Status s);      // "DETERMINISTIC", ...
Status status_from_string(const std::string& s);

struct DiffStats {
  std::int64_t count = 0;        // elements whose bits differ from the first trial
  double max_abs = 0;            // max |a - b|
  std::int64_t max_ulp = 0;      // max distance in units in the last place
  std::int64_t first_index = 0;  // first differing element
};

}  // namespace d9m
