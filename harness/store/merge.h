// d9m merge: the union of stores. Keys are content-addressed (runs have random ids), so merging
// is idempotent and order-independent; a row whose key exists with other content is a genuine
// conflict and stops the merge with nothing written.
//
// A run that has not ended (running, or interrupted and resumable) may be met in several states:
// its immutable columns must agree (else a conflict); its closing columns (state, finished_at,
// chain_root, resumes) come from its most advanced version, ordered by (resumes, case rows,
// state running < interrupted < complete, finished_at, chain_root); its case and trial rows are
// a union. Merging such a run again, before or after it ended, changes nothing or advances it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace d9m {

struct MergeSummary {
  std::int64_t added = 0, present = 0;  // rows over all tables and inputs
  std::int64_t advanced = 0;            // runs whose closing columns came from a more advanced version
  std::int64_t adopted = 0;             // runs of inputs without a manifest, recorded in the output's
  bool unchanged = false;               // OUT existed and the inputs added nothing: it is left as it was
};

// Merges `inputs` (and `out` itself when it exists) into `out`, atomically: every input (and
// out) must pass `d9m verify` (Error store_fault otherwise), the result is built in a private
// file and must verify too, and only then replaces out (the file a symlink out names, as
// `d9m run --db` writes it). Until then out is not touched: not migrated, no run marked.
MergeSummary merge_stores(const std::string& out, const std::vector<std::string>& inputs);

}  // namespace d9m
