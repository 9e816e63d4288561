#include "harness/store/sqlite.h"

#include <cerrno>
#include <cstring>

namespace d9m::sql {

namespace {
// The errno of a failed call: SQLite's record of it where it keeps one, else errno as the call
// left it. Measured with SQLite 3.40: a COMMIT whose WAL write failed with EFBIG (ulimit -f)
// left sqlite3_system_errno at 0 and errno at EFBIG. Callers clear errno before the call, so a
// value from an earlier, unrelated failure cannot leak in; and errno is read only for the codes
// a failed system call gives, since SQLite probes files (a missing journal: ENOENT) as it works.
int failed_errno(sqlite3* db, int rc, int errno_after_call) {
  const int recorded = db ? sqlite3_system_errno(db) : 0;
  const int primary = (db ? sqlite3_extended_errcode(db) : rc) & 0xff;
  const bool os_failure = primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_FULL;
  return recorded ? recorded : os_failure ? errno_after_call : 0;
}
// The operating system's reason for an I/O failure ("No space left on device", "File too
// large"): SQLite's own message for those is only "disk I/O error".
std::string os_reason(int err) { return err ? std::string(" (") + std::strerror(err) + ")" : ""; }
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what, int errno_after_call = 0) {
  const int err = failed_errno(db, rc, errno_after_call);
  throw Error(sqlite3_extended_errcode(db) ? sqlite3_extended_errcode(db) : rc,
              what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) + os_reason(err), err);
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
Statement& Statement::bind_static_blob(int i, const void* data, int bytes) {
  if (int rc = sqlite3_bind_blob(stmt_, i, data, bytes, SQLITE_STATIC); rc != SQLITE_OK) fail(db_, rc, "binding " + sql_);
  return *this;
}
Statement& Statement::bind_static_text(int i, const std::string& v) {
  if (int rc = sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC); rc != SQLITE_OK)
    fail(db_, rc, "binding " + sql_);
  return *this;
}
Statement& Statement::bind_null(int i) {
  if (int rc = sqlite3_bind_null(stmt_, i); rc != SQLITE_OK) fail(db_, rc, "binding " + sql_);
  return *this;
}

bool Statement::step() {
  errno = 0;
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const int err = errno;
  sqlite3_reset(stmt_);
  fail(db_, rc, "executing \"" + sql_ + "\"", err);
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
  errno = 0;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg);
  if (rc != SQLITE_OK) {
    const int err = failed_errno(db, rc, errno);
    std::string m = msg ? msg : sqlite3_errstr(rc);
    sqlite3_free(msg);
    throw Error(sqlite3_extended_errcode(db), "executing \"" + sql.substr(0, 80) + "\": " + m + os_reason(err), err);
  }
}

Transaction::Transaction(sqlite3* db) : db_(db) { exec(db, "BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);  // never throws
}

namespace {
// Each byte's value as a lower-case hex digit, or 16 (a table: this runs twice per trial row).
struct HexDigits {
  unsigned char value[256];
  constexpr HexDigits() : value() {
    for (int c = 0; c < 256; ++c) value[c] = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 16;
  }
};
constexpr HexDigits kHexDigits;
}  // namespace

bool hex_bytes(const char* hex, std::size_t length, unsigned char* out, std::size_t n) {
  if (length != 2 * n) return false;
  unsigned bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned hi = kHexDigits.value[static_cast<unsigned char>(hex[2 * i])];
    const unsigned lo = kHexDigits.value[static_cast<unsigned char>(hex[2 * i + 1])];
    bad |= (hi | lo) & 16;
    out[i] = static_cast<unsigned char>(hi << 4 | (lo & 15));
  }
  return bad == 0;
}

namespace {
void d9m_bytes(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const sqlite3_int64 n = sqlite3_value_int64(argv[1]);
  if (sqlite3_value_type(argv[0]) == SQLITE_TEXT && n > 0 && n <= 64) {
    const char* text = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
    unsigned char bytes[64];
    if (text && hex_bytes(text, static_cast<std::size_t>(sqlite3_value_bytes(argv[0])), bytes, static_cast<std::size_t>(n)))
      return sqlite3_result_blob(ctx, bytes, static_cast<int>(n), SQLITE_TRANSIENT);
  }
  sqlite3_result_value(ctx, argv[0]);
}
}  // namespace

void register_functions(sqlite3* db) {
  const int rc = sqlite3_create_function_v2(db, "d9m_bytes", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
                                            d9m_bytes, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, "registering d9m_bytes");
}

void Transaction::commit() {
  exec(db_, "COMMIT");
  done_ = true;
}

}  // namespace d9m::sql

namespace d9m {

std::string describe_sqlite_failure(const sql::Error& e) {
  // Out of space reaches us as SQLITE_FULL or as an I/O error, and the errno says which space
  // (measured with SQLite 3.40: a full tmpfs gave SQLITE_FULL, or SQLITE_IOERR on BEGIN IMMEDIATE,
  // both with ENOSPC; `ulimit -f` gave SQLITE_IOERR_WRITE with EFBIG). SQLite words them "disk
  // I/O error" or "database or disk is full"; say what the user must fix. (sql::Error carries an
  // errno only with the codes a failed system call gives.)
  const int primary = e.code & 0xff;
  switch (e.system_errno) {
    case ENOSPC: return "cannot be written: the disk is full (" + std::string(std::strerror(ENOSPC)) + ")";
    case EDQUOT: return "cannot be written: the disk quota is exhausted (" + std::string(std::strerror(EDQUOT)) + ")";
    case EFBIG:
      return "cannot be written: the file reached the largest size allowed to this process (" + std::string(std::strerror(EFBIG)) +
             "; see ulimit -f)";
    default: break;
  }
  switch (primary) {
    case SQLITE_NOTADB: return "is not a SQLite database (nor a d9m store)";
    case SQLITE_CORRUPT: return "is a corrupt SQLite database";
    case SQLITE_CANTOPEN: return "cannot be opened";
    case SQLITE_READONLY: return "is read-only";
    case SQLITE_FULL: return "cannot be written: the disk is full (or the database reached its page limit)";
    case SQLITE_IOERR: return std::string("cannot be read or written (I/O error: ") + e.what() + ")";
    case SQLITE_PERM: return "cannot be accessed (permission denied)";
    default: return std::string("cannot be used (") + e.what() + ")";
  }
}

}  // namespace d9m
