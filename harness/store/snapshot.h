// A read transaction over a store whose whole content is in its main file. Readers of a WAL
// store see the file and its write-ahead log (<store>-wal) together, so the file's SHA-256 covers
// what they see only when the log holds nothing; and while this read transaction is open on such
// a store, no checkpoint may write into the file (SQLite's checkpointer waits for readers of the
// file alone), so the bytes stay what was read. `d9m attest` and `d9m report --audit`, which quote
// the file's SHA-256, hold one while they read, verify and hash.
#pragma once
#include "harness/store/store.h"

namespace d9m {

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
