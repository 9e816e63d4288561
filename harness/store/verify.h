// Integrity and consistency of a store: SQLite's own checks, content-addressed keys that match
// their content, per-run case rows that agree with their trials, every run's hash chain (its
// rows, its metadata, its closing facts), and the store's manifest (whole runs).
#pragma once
#include <string>
#include <vector>

#include "harness/store/manifest.h"
#include "harness/store/store.h"

namespace d9m {

struct VerifyReport {
  std::vector<std::string> problems;  // empty: the store is sound
  std::vector<std::string> notes;     // facts worth knowing that are not faults (running runs)
  std::vector<std::string> chain_roots;  // "run-id root" for every run whose chain verified
  Evidence evidence;                     // what reports and attestations bind to
  std::int64_t runs = 0, cases = 0, trials = 0;
};

VerifyReport verify_store(const Store& store);

}  // namespace d9m
