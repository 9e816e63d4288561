#include "harness/store/snapshot.h"

#include <sys/stat.h>

#include "harness/core/error.h"
#include "harness/store/sqlite.h"

namespace d9m {

SingleFileSnapshot::SingleFileSnapshot(const Store& store, const std::string& what) : db_(store.db()) {
  try {
    sql::exec(db_, "BEGIN");
    sql::Statement(db_, "SELECT count(*) FROM sqlite_master").run();  // the read transaction starts here
  } catch (const sql::Error& e) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    fail_environment(store.path() + ": cannot be read: " + e.what());
  }
  // Checked after the read began: a log that is empty now stays out of this snapshot.
  const char* wal = sqlite3_filename_wal(sqlite3_db_filename(db_, "main"));
  struct stat st {};
  if (wal && ::stat(wal, &st) == 0 && st.st_size > 0) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    fail_environment(store.path() + ": has a write-ahead log (" + wal + ", " + std::to_string(st.st_size) +
                     " bytes) that readers see besides the file, so the file's SHA-256 would not cover what is " + what +
                     ". Let the processes writing the store end (the last one folds the log in), or make a single-file copy "
                     "with `d9m merge -o COPY.sqlite " + store.path() + "` and use that");
  }
}

ReadSnapshot::ReadSnapshot(const Store& store) {
  if (!sqlite3_get_autocommit(store.db())) return;
  try {
    sql::exec(store.db(), "BEGIN");
    db_ = store.db();
    sql::Statement(db_, "SELECT count(*) FROM sqlite_master").run();  // the snapshot is taken here
  } catch (const sql::Error& e) {
    if (db_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    fail_environment(store.path() + ": cannot be read: " + e.what());
  }
}

ReadSnapshot::~ReadSnapshot() {
  if (db_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

SingleFileSnapshot::~SingleFileSnapshot() { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

}  // namespace d9m
