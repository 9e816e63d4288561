// A thin RAII layer over SQLite: statements with typed binds, transactions that roll back unless
// committed, and errors that carry the call, the SQL and SQLite's message.
#pragma once
#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace d9m::sql {

struct Error : std::runtime_error {
  Error(int extended_code, const std::string& what, int os_errno = 0)
      : std::runtime_error(what), code(extended_code), system_errno(os_errno) {}
  int code;          // extended result code
  int system_errno;  // the failed system call's errno (sqlite3_system_errno), 0 when none
};

class Db;

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, std::int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, double v);
  Statement& bind(int i, const std::string& v);
  Statement& bind_null(int i);
  // Bytes SQLite does not copy: they must stay as they are until the statement is reset.
  Statement& bind_static_blob(int i, const void* data, int bytes);
  Statement& bind_static_text(int i, const std::string& v);
  template <class T> Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  bool step();  // true while a row is available
  void run();   // step to completion and reset for reuse
  void reset();

  std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string text(int col) const;
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// Registers d9m's SQL functions on a connection (what migrating and merging need to write
// schema 7's byte columns; the schema's own views and triggers use none, so any SQLite tool can
// read and edit a store): d9m_bytes(value, n) is the n bytes a string of 2n lower-case hex digits
// spells, and the value itself for anything else (kept, not lost).
void register_functions(sqlite3* db);

// The n bytes that exactly 2n lower-case hex digits spell, into out; false (out unspecified) for
// anything else. The one definition of which digests and links schema 7 stores as bytes.
bool hex_bytes(const char* hex, std::size_t length, unsigned char* out, std::size_t n);

// Executes SQL without results; throws sql::Error naming the statement.
void exec(sqlite3* db, const std::string& sql);

// A path as SQLite must be given it to open that file: SQLite reads a name beginning "file:" as a
// URI wherever URIs are enabled (Debian's build enables them everywhere, and stores open with
// SQLITE_OPEN_URI for merge's read-only ATTACH), so `--db file:x.sqlite` opened x.sqlite, found
// by audit. "./" before such a relative name keeps it a name.
inline std::string file_name(const std::string& path) { return path.rfind("file:", 0) == 0 ? "./" + path : path; }

// BEGIN IMMEDIATE (takes the write lock up front, so the busy timeout applies at the start and
// never midway); rolls back in the destructor unless commit() was called.
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  ~Transaction();
  void commit();

 private:
  sqlite3* db_;
  bool done_ = false;
};

}  // namespace d9m::sql

namespace d9m {

// What a failed SQLite call means for a store, in the words a user acts on ("cannot be written:
// the disk is full (No space left on device)"), for messages that begin with the store's path.
std::string describe_sqlite_failure(const sql::Error& e);

}  // namespace d9m
