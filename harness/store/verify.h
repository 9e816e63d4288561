// Integrity and consistency of a store: SQLite's own checks, content-addressed keys that match
// their content, and per-run case rows that agree with their trials.
#pragma once
#include <string>
#include <vector>

#include "harness/store/store.h"

namespace d9m {

struct VerifyReport {
  std::vector<std::string> problems;  // empty: the store is sound
  std::vector<std::string> notes;     // facts worth knowing that are not faults (running runs)
  std::vector<std::string> chain_roots;  // "run-id root" for every run whose chain verified
  std::int64_t runs = 0, cases = 0, trials = 0;
};

VerifyReport verify_store(const Store& store);

}  // namespace d9m
