#include "harness/store/sqlite.h"

#include <cstring>

namespace d9m::sql {

namespace {
// The operating system's reason for an I/O failure ("No space left on device", "File too
// large"): SQLite's own message for those is only "disk I/O error".
std::string os_reason(sqlite3* db) {
  const int e = db ? sqlite3_system_errno(db) : 0;
  return e ? std::string(" (") + std::strerror(e) + ")" : "";
}
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what) {
  throw Error(sqlite3_extended_errcode(db) ? sqlite3_extended_errcode(db) : rc,
              what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) + os_reason(db));
}
}  // namespace

Statement::Statement(sqlite3* db, const std::string& sql) : db_(db), sql_(sql) {
  const int rc = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, "preparing \"" + sql + "\"");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int i, std::int64_t v) {
  if (int rc = sqlite3_bind_int64(stmt_, i, v); rc != SQLITE_OK) fail(db_, rc, "binding " + sql_);
  return *this;
}
Statement& Statement::bind(int i, double v) {
  if (int rc = sqlite3_bind_double(stmt_, i, v); rc != SQLITE_OK) fail(db_, rc, "binding " + sql_);
  return *this;
}
Statement& Statement::bind(int i, const std::string& v) {
  if (int rc = sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); rc != SQLITE_OK)
    fail(db_, rc, "binding " + sql_);
  return *this;
}
Statement& Statement::bind_null(int i) {
  if (int rc = sqlite3_bind_null(stmt_, i); rc != SQLITE_OK) fail(db_, rc, "binding " + sql_);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(stmt_);
  fail(db_, rc, "executing \"" + sql_ + "\"");
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}

void exec(sqlite3* db, const std::string& sql) {
  char* msg = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg);
  if (rc != SQLITE_OK) {
    std::string m = msg ? msg : sqlite3_errstr(rc);
    sqlite3_free(msg);
    throw Error(sqlite3_extended_errcode(db), "executing \"" + sql.substr(0, 80) + "\": " + m + os_reason(db));
  }
}

Transaction::Transaction(sqlite3* db) : db_(db) { exec(db, "BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);  // never throws
}

void Transaction::commit() {
  exec(db_, "COMMIT");
  done_ = true;
}

}  // namespace d9m::sql
