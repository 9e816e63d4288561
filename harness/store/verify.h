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

// For the commands that read a store as evidence (merge, attest, report --audit, diff, baseline):
// the store's verify report when it is sound, else Error(store fault), "PATH: does not verify, so
// it is not WHAT: FIRST FAULT (and N more). `d9m verify --db PATH` lists every fault" and `tail`.
VerifyReport require_sound(const Store& store, const std::string& what, const std::string& tail = "");

}  // namespace d9m
