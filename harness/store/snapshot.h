// A read transaction over a store whose whole content is in its main file. Readers of a WAL
// store see the file and its write-ahead log (<store>-wal) together, so the file's SHA-256 covers
// what they see only when the log holds nothing; and while this read transaction is open on such
// a store, no checkpoint may write into the file (SQLite's checkpointer waits for readers of the
// file alone), so the bytes stay what was read. `d9m attest` and `d9m report --audit`, which quote
// the file's SHA-256, hold one while they read, verify and hash.
#pragma once
#include "harness/store/store.h"

namespace d9m {

// A read transaction for readers that read a store in many statements (verify, the report's
// loader): every statement sees the store as one commit left it, so a run writing beside them
// cannot show as a fault (found by review: verify beside a writer reported a run "recorded
// (begun) but not in the store (deleted)", having read the manifest and the runs at two moments).
// Inside a transaction already (SingleFileSnapshot's), it does nothing.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(const Store& store);
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  sqlite3* db_ = nullptr;  // null: an outer transaction holds the snapshot
};

class SingleFileSnapshot {
 public:
  // Error(environment), naming the log and what to do, when the store's write-ahead log is not
  // empty. `what` says what needs the single file ("attested", "audited").
  SingleFileSnapshot(const Store& store, const std::string& what);
  ~SingleFileSnapshot();
  SingleFileSnapshot(const SingleFileSnapshot&) = delete;
  SingleFileSnapshot& operator=(const SingleFileSnapshot&) = delete;

 private:
  sqlite3* db_;
};

}  // namespace d9m
