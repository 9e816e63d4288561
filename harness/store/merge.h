// d9m merge: the union of stores. Keys are content-addressed (runs have random ids), so merging
// is idempotent and order-independent; a row whose key exists with other content is a genuine
// conflict and stops the merge with nothing written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace d9m {

struct MergeSummary {
  std::int64_t added = 0, present = 0;  // rows over all tables and inputs
};

// Merges `inputs` (and `out` itself when it exists) into `out`, atomically: the result is built
// in a private file and renamed into place only when every input merged without conflict.
MergeSummary merge_stores(const std::string& out, const std::vector<std::string>& inputs);

}  // namespace d9m
