#include "harness/store/merge.h"

#include <sys/stat.h>

#include <cstdio>
#include <set>

#include "harness/core/error.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"

namespace d9m {

namespace {

// Parents before children, for the foreign keys.
const char* const kTables[] = {"fingerprints", "runs", "cases", "case_runs", "trials"};

struct Columns {
  std::vector<std::string> all, key;
  std::vector<std::string> from_src;  // per column of `all`: how to read it from src (s.<name>, or its default)
};

// The destination's columns, and how to read each from the attached source. A source of an
// older schema lacks the columns later schemas added; those read as their declared defaults,
// exactly what migrating the source would have given them.
Columns columns_of(sqlite3* db, const std::string& table) {
  Columns c;
  std::set<std::string> src;
  {
    sql::Statement s(db, "SELECT name FROM pragma_table_info(?, 'src')");
    s.bind(1, table);
    while (s.step()) src.insert(s.text(0));
  }
  sql::Statement s(db, "SELECT name, pk, dflt_value FROM pragma_table_info(?, 'main') ORDER BY cid");
  s.bind(1, table);
  while (s.step()) {
    const std::string name = s.text(0);
    c.all.push_back(name);
    if (s.integer(1) > 0) c.key.push_back(name);
    if (src.count(name)) c.from_src.push_back("s." + name);
    else if (!s.is_null(2)) c.from_src.push_back(s.text(2));
    else fail_usage("the source store has no column " + table + "." + name + " and it has no default");
  }
  return c;
}

std::string join(const std::vector<std::string>& v, const std::string& prefix, const std::string& sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + prefix + x;
  return out;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// A path as a SQLite URI: the characters URIs give meaning to are percent-encoded.
std::string file_uri(const std::string& path) {
  std::string out = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "?mode=ro";
}

void merge_one(sqlite3* db, const std::string& input, MergeSummary& sum) {
  sql::Statement(db, "ATTACH DATABASE ? AS src").bind(1, file_uri(input)).run();
  try {
    sql::Transaction tx(db);
    for (const char* table : kTables) {
      const Columns c = columns_of(db, table);
      std::string on;
      for (const auto& k : c.key) on += std::string(on.empty() ? "" : " AND ") + "m." + k + " = s." + k;
      sql::Statement conflict(db, "SELECT " + join(c.key, "s.", ", ") + " FROM src." + table + " s JOIN main." + table +
                                      " m ON " + on + " WHERE (" + join(c.from_src, "", ", ") + ") IS NOT (" +
                                      join(c.all, "m.", ", ") + ") LIMIT 1");
      if (conflict.step()) {
        std::string key;
        for (int i = 0; i < static_cast<int>(c.key.size()); ++i) key += (i ? ", " : "") + c.key[static_cast<std::size_t>(i)] + "=" + conflict.text(i);
        fail_usage(input + ": conflicts with what is already merged: table " + table + ", row (" + key +
                   ") exists with other content. Stores of the same run must not disagree; nothing was written");
      }
      sql::Statement count(db, "SELECT count(*) FROM src." + std::string(table));
      count.step();
      const std::int64_t rows = count.integer(0);
      sql::exec(db, "INSERT OR IGNORE INTO main." + std::string(table) + " (" + join(c.all, "", ", ") + ") SELECT " +
                        join(c.from_src, "", ", ") + " FROM src." + table + " s");
      const std::int64_t added = sqlite3_changes(db);
      sum.added += added;
      sum.present += rows - added;
    }
    tx.commit();
  } catch (...) {
    sqlite3_exec(db, "DETACH DATABASE src", nullptr, nullptr, nullptr);
    throw;
  }
  sql::exec(db, "DETACH DATABASE src");
}

}  // namespace

MergeSummary merge_stores(const std::string& out, const std::vector<std::string>& inputs) {
  if (inputs.empty()) fail_usage("merge needs at least one input store");
  for (const auto& in : inputs) Store::open(in, Store::Mode::read_only);  // refuses anything that is not a d9m store
  const bool out_existed = exists(out);
  if (out_existed) {
    // Fold the WAL into the file, so the copy below sees everything and no stale WAL survives
    // the rename.
    Store s = Store::open(out, Store::Mode::read_write);
    // The merged store replaces OUT by a rename: a run still writing into OUT would go on writing
    // into the replaced file and its rows would be lost.
    sql::Statement running(s.db(), "SELECT id FROM runs WHERE state = 'running'");
    while (running.step())
      if (s.run_alive(running.text(0)))
        fail_environment(out + ": run " + running.text(0) + " is still writing into it; merge into it once it has ended");
    sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  const std::string tmp = out + ".merging-" + random_run_id().substr(0, 12);
  auto cleanup = [&] {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((tmp + suffix).c_str());
  };
  MergeSummary sum;
  try {
    Store dst = Store::open(tmp, Store::Mode::read_write);
    if (out_existed) merge_one(dst.db(), out, sum);
    MergeSummary from_out = sum;
    for (const auto& in : inputs) merge_one(dst.db(), in, sum);
    sum.present -= from_out.present;
    sum.added -= from_out.added;
    sql::exec(dst.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  } catch (const sql::Error& e) {
    cleanup();
    fail_environment(out + ": merge failed: " + e.what());
  } catch (...) {
    cleanup();
    throw;
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) {
    cleanup();
    fail_environment(out + ": cannot move the merged store into place");
  }
  for (const char* suffix : {"-wal", "-shm"}) std::remove((out + suffix).c_str());
  cleanup();
  return sum;
}

}  // namespace d9m
