#include "harness/store/merge.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "harness/core/error.h"
#include "harness/core/files.h"
#include "harness/store/manifest.h"
#include "harness/store/run_lease.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

namespace d9m {

namespace {

// Parents before children, for the foreign keys; the manifest last, so that a run merged from a
// store without one can be recorded once its rows are in.
const char* const kTables[] = {"fingerprints", "runs", "cases", "case_runs", "trials", "trace", "manifest"};

// The columns of a run that change after it begins; its other columns are fixed for good.
const std::set<std::string> kRunClosingColumns = {"state", "finished_at", "chain_root", "resumes"};

struct Columns {
  std::vector<std::string> all, key;
  std::vector<std::string> from_src;  // per column of `all`: how to read it from src (s.<name>, or its default)
};

// (trials is a table up to schema 6 and a view of trial_rows from schema 7: the same columns.)
bool src_has_table(sqlite3* db, const std::string& table) {
  sql::Statement s(db, "SELECT 1 FROM src.sqlite_master WHERE (type = 'table' OR (type = 'view' AND name = 'trials')) AND name = ?");
  s.bind(1, table);
  return s.step();
}

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

// A row of src whose key exists in main with other content in `compared` columns.
void refuse_conflicts(sqlite3* db, const std::string& input, const std::string& table, const Columns& c,
                      const std::set<std::string>& ignored) {
  std::vector<std::string> src_cols, main_cols;
  for (std::size_t i = 0; i < c.all.size(); ++i)
    if (!ignored.count(c.all[i])) {
      src_cols.push_back(c.from_src[i]);
      main_cols.push_back("m." + c.all[i]);
    }
  std::string on;
  for (const auto& k : c.key) on += std::string(on.empty() ? "" : " AND ") + "m." + k + " = s." + k;
  sql::Statement conflict(db, "SELECT " + join(c.key, "s.", ", ") + " FROM src." + table + " s JOIN main." + table + " m ON " + on +
                                  " WHERE (" + join(src_cols, "", ", ") + ") IS NOT (" + join(main_cols, "", ", ") + ") LIMIT 1");
  if (!conflict.step()) return;
  std::string key;
  for (std::size_t i = 0; i < c.key.size(); ++i) key += (i ? ", " : "") + c.key[i] + "=" + conflict.text(static_cast<int>(i));
  fail_usage(input + ": conflicts with what is already merged: table " + table + ", row (" + key +
             ") exists with other content. Stores of the same run must not disagree; nothing was written");
}

// A run's version as merge orders them: (resumes, case rows, state rank, finished_at, root).
std::string run_rank(const std::string& alias, const std::string& schema, const std::string& resumes) {
  return "(" + resumes + ", (SELECT count(*) FROM " + schema + ".case_runs c WHERE c.run_id = " + alias +
         ".id), CASE " + alias + ".state WHEN 'running' THEN 0 WHEN 'interrupted' THEN 1 ELSE 2 END, coalesce(" + alias +
         ".finished_at, ''), coalesce(" + alias + ".chain_root, ''))";
}

// The closing columns of runs src holds in a more advanced version than main. Runs only move
// forward (running, then interrupted or complete; resumed: again, one resumption further), so
// the most advanced version of a run is the one whose rows include every other version's.
std::int64_t advance_runs(sqlite3* db, const Columns& c) {
  std::string resumes = "0";
  for (std::size_t i = 0; i < c.all.size(); ++i)
    if (c.all[i] == "resumes") resumes = c.from_src[i];
  sql::exec(db, "UPDATE main.runs AS m SET state = s.state, finished_at = s.finished_at, chain_root = s.chain_root, resumes = " +
                    resumes + " FROM src.runs AS s WHERE m.id = s.id AND " + run_rank("s", "src", resumes) + " > " +
                    run_rank("m", "main", "m.resumes"));
  return sqlite3_changes(db);
}

// A digest or link of main.trial_rows as the trials view shows it (hex, or the text kept).
std::string as_shown(const std::string& column) {
  return "CASE typeof(" + column + ") WHEN 'blob' THEN lower(hex(" + column + ")) ELSE " + column + " END";
}

// Trial rows: read through src's trials (table or view, the same columns), keyed in main by the
// number its case row got there. Rows main has must agree, as in every other table.
void merge_trials(sqlite3* db, const std::string& input, MergeSummary& sum) {
  bool choice = false;
  {
    sql::Statement c(db, "SELECT 1 FROM pragma_table_info('trials', 'src') WHERE name = 'choice'");
    choice = c.step();
  }
  const std::string src_choice = choice ? "s.choice" : "''";
  sql::Statement range(db, "SELECT count(*) FROM src.trials s WHERE typeof(s.trial) != 'integer' OR s.trial < 0 OR s.trial > 4294967295");
  range.step();
  if (range.integer(0) > 0)
    fail_usage(input + ": " + std::to_string(range.integer(0)) + " trial row(s) have a trial number outside 0 to 2^32 - 1; nothing was written");
  const std::string joined = " FROM src.trials s JOIN main.case_runs mc ON mc.run_id = s.run_id AND mc.case_id = s.case_id";
  sql::Statement conflict(db, "SELECT s.run_id, s.case_id, s.trial" + joined +
                                  " JOIN main.trial_rows m ON m.id = mc.num * 4294967296 + s.trial WHERE (s.digest, s.elapsed_ns,"
                                  " s.diff_count, s.diff_max_abs, s.diff_max_ulp, s.diff_first_index, s.chain, " + src_choice +
                                  ") IS NOT (" + as_shown("m.digest") + ", m.elapsed_ns, m.diff_count, m.diff_max_abs, m.diff_max_ulp,"
                                  " m.diff_first_index, " + as_shown("m.chain") + ", m.choice) LIMIT 1");
  if (conflict.step())
    fail_usage(input + ": conflicts with what is already merged: table trials, row (run_id=" + conflict.text(0) + ", case_id=" +
               conflict.text(1) + ", trial=" + conflict.text(2) + ") exists with other content. Stores of the same run must not "
               "disagree; nothing was written");
  sql::Statement count(db, "SELECT count(*) FROM src.trials");
  count.step();
  sql::exec(db, "INSERT OR IGNORE INTO main.trial_rows(id, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp,"
                " diff_first_index, chain, choice) SELECT mc.num * 4294967296 + s.trial, d9m_bytes(s.digest, 16), s.elapsed_ns,"
                " s.diff_count, s.diff_max_abs, s.diff_max_ulp, s.diff_first_index, d9m_bytes(s.chain, 32), " + src_choice + joined);
  const std::int64_t added = sqlite3_changes(db);
  sum.added += added;
  sum.present += count.integer(0) - added;
}

void merge_table(sqlite3* db, const std::string& input, const std::string& table, MergeSummary& sum) {
  if (table == "trials") return merge_trials(db, input, sum);
  Columns c = columns_of(db, table);
  const bool runs = table == "runs";
  std::set<std::string> ignored = runs ? kRunClosingColumns : std::set<std::string>{};
  if (table == "case_runs") {
    // A case row's number is this file's own (trial_rows' key), not evidence: rows new to main
    // are numbered after main's.
    sql::Statement top(db, "SELECT coalesce(max(num), 0) FROM main.case_runs");
    top.step();
    for (std::size_t i = 0; i < c.all.size(); ++i)
      if (c.all[i] == "num") c.from_src[i] = std::to_string(top.integer(0)) + " + row_number() OVER (ORDER BY s.rowid)";
    ignored.insert("num");
  }
  refuse_conflicts(db, input, table, c, ignored);
  if (runs) sum.advanced += advance_runs(db, c);
  sql::Statement count(db, "SELECT count(*) FROM src." + table);
  count.step();
  const std::int64_t rows = count.integer(0);
  sql::exec(db, "INSERT OR IGNORE INTO main." + table + " (" + join(c.all, "", ", ") + ") SELECT " + join(c.from_src, "", ", ") +
                    " FROM src." + table + " s");
  const std::int64_t added = sqlite3_changes(db);
  sum.added += added;
  sum.present += rows - added;
}

// `as_output`: the store being merged into, whose own manifest chain the result continues.
void merge_one(sqlite3* db, const std::string& input, bool as_output, MergeSummary& sum) {
  sql::Statement(db, "ATTACH DATABASE ? AS src").bind(1, file_uri(input)).run();
  try {
    sql::Transaction tx(db);
    for (const char* table : kTables)
      if (src_has_table(db, table)) merge_table(db, input, table, sum);
    if (as_output && src_has_table(db, "manifest_origin"))
      sql::exec(db, "DELETE FROM main.manifest_origin; INSERT INTO main.manifest_origin SELECT id FROM src.manifest_origin");
    // Runs of a store older than the manifest are recorded as they came, so that the result
    // verifies and from now on shows their deletion.
    if (!src_has_table(db, "manifest")) sum.adopted += manifest::adopt_unrecorded_runs(db);
    tx.commit();
  } catch (...) {
    sqlite3_exec(db, "DETACH DATABASE src", nullptr, nullptr, nullptr);
    throw;
  }
  sql::exec(db, "DETACH DATABASE src");
}

// Every store merge reads must verify: a tampered input would pass its faults on (and a merged
// store that verifies would launder them). Returns the store's evidence digest.
std::string verified(const std::string& path) {
  const Store s = Store::open(path, Store::Mode::read_only);
  return require_sound(s, "merged", "; nothing was written").evidence.digest;
}

void refuse_live_runs(sqlite3* db, const std::string& lease_key, const std::string& out) {
  sql::Statement running(db, "SELECT id FROM runs WHERE state = 'running'");
  while (running.step())
    if (RunLease::taken(lease_key, running.text(0)))
      fail_environment(out + ": run " + running.text(0) + " is still writing into it; merge into it once it has ended");
}

// `out` as `d9m run --db` writes it: a symlink's final target (a rename over the link would
// replace the link, and the store would fork).
std::string real_output(const std::string& out) { return real_path_or_self(out); }

// A merge writes OUT.merging-HOST-PID-RANDOM and renames it into place. One killed before it
// could clean up (SIGKILL, a power cut) leaves that file behind; the next merge into the same OUT
// removes those of this host whose process is gone (found by an auditor: they were left for
// good). Another host's, or a live process's, are left alone: on a shared folder they may be a
// merge in progress.
std::string merging_infix() {
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) != 0 || !*host) std::snprintf(host, sizeof host, "unknown");
  for (char* c = host; *c; ++c)
    if (*c == '-' || *c == '/') *c = '_';
  return std::string(".merging-") + host + "-";
}

void remove_abandoned_merges(const std::string& target) {
  const std::string dir = parent_dir(target), prefix = target.substr(target.rfind('/') + 1) + merging_infix();
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> abandoned;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // PID-RANDOM[-wal|-shm|-journal|-runlease]
    const std::size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || rest.find_first_not_of("0123456789") != dash) continue;
    const long pid = std::strtol(rest.substr(0, dash).c_str(), nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) abandoned.push_back(dir + "/" + name);
  }
  ::closedir(d);
  for (const auto& path : abandoned) std::remove(path.c_str());
}

struct Connection {
  sqlite3* db = nullptr;
  ~Connection() { sqlite3_close(db); }
};

// Replaces the existing `target` with `tmp`. Under the store's write lock (no writer can add to
// it meanwhile), with its write-ahead log folded in and empty (a stale log must never meet the
// new file), and only when it still holds exactly what was merged from it.
void replace_output(const std::string& tmp, const std::string& target, const std::string& out, const std::string& merged_evidence) {
  Connection c;
  if (sqlite3_open_v2(sql::file_name(target).c_str(), &c.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
    fail_environment(out + ": cannot open it to put the merged store in place: " + sqlite3_errmsg(c.db) + "; nothing was written");
  sqlite3_extended_result_codes(c.db, 1);
  sqlite3_busy_timeout(c.db, kStoreBusyTimeoutMs);
  sql::exec(c.db, "PRAGMA wal_checkpoint(TRUNCATE)");
  sql::Transaction lock(c.db);
  struct stat st {};
  const char* wal = sqlite3_filename_wal(sqlite3_db_filename(c.db, "main"));
  if (wal && ::stat(wal, &st) == 0 && st.st_size > 0)
    fail_environment(out + ": its write-ahead log cannot be folded in now (a reader is using it); nothing was written: merge again");
  if (evidence_of(c.db).digest != merged_evidence)
    fail_environment(out + ": it changed while merging (a run wrote into it); nothing was written: merge again");
  refuse_live_runs(c.db, target, out);
  // The merged store keeps OUT's permissions (found by review: a 0600 store became 0644).
  if (struct stat was {}; ::stat(target.c_str(), &was) == 0) ::chmod(tmp.c_str(), was.st_mode & 07777);
  if (std::rename(tmp.c_str(), target.c_str()) != 0)
    fail_environment(out + ": cannot move the merged store into place (" + std::strerror(errno) + "); nothing was written");
}

void place_output(const std::string& tmp, const std::string& target, const std::string& out,
                  const std::optional<std::string>& merged_evidence) {
  if (merged_evidence) return replace_output(tmp, target, out, *merged_evidence);
  // A new output: link() never replaces a store another process created meanwhile.
  if (::link(tmp.c_str(), target.c_str()) != 0)
    fail_environment(out + (errno == EEXIST ? ": it was created while merging; nothing was written: merge again"
                                            : ": cannot put the merged store in place (" + std::string(std::strerror(errno)) + ")"));
}

}  // namespace

MergeSummary merge_stores(const std::string& out, const std::vector<std::string>& inputs) {
  if (inputs.empty()) fail_usage("merge needs at least one input store");
  // Found by review: OUT named another store's log (the next run of that store deleted the merged
  // store), a dangling link or a folder, each with a misleading message.
  for (const char* side : {"-wal", "-shm", "-journal", "-runlease"})
    if (out.size() > std::strlen(side) && out.compare(out.size() - std::strlen(side), std::string::npos, side) == 0)
      fail_usage(out + ": names a side file of the store " + out.substr(0, out.size() - std::strlen(side)) +
                 " (SQLite's and d9m's own), which its next writer may remove; name the merged store otherwise");
  if (struct stat st {}; ::lstat(out.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode) && !path_exists(out))
      fail_environment(out + ": a symbolic link to a file or folder that does not exist; nothing was written");
    if (struct stat to {}; ::stat(out.c_str(), &to) == 0 && S_ISDIR(to.st_mode))
      fail_environment(out + ": is a folder, not a store; nothing was written");
  }
  for (const auto& in : inputs) verified(in);
  const std::string target = real_output(out);
  const bool out_existed = path_exists(target);
  std::optional<std::string> out_evidence;
  if (out_existed) {
    out_evidence = verified(target);
    // The merged store replaces OUT: a run still writing into OUT would go on writing into the
    // replaced file and its rows would be lost.
    const Store s = Store::open(target, Store::Mode::read_only);
    refuse_live_runs(s.db(), target, out);
  } else if (!path_exists(parent_dir(target))) {
    fail_environment(out + ": cannot write the merged store: folder " + parent_dir(target) + " does not exist");
  }
  remove_abandoned_merges(target);
  const std::string tmp = target + merging_infix() + std::to_string(::getpid()) + "-" + random_run_id().substr(0, 12);
  auto cleanup = [&] {
    for (const char* suffix : {"", "-wal", "-shm", "-journal", "-runlease"}) std::remove((tmp + suffix).c_str());
  };
  MergeSummary sum;
  try {
    {
      Store dst = Store::open(tmp, Store::Mode::read_write);
      if (out_existed) merge_one(dst.db(), target, true, sum);
      const MergeSummary from_out = sum;
      for (const auto& in : inputs) merge_one(dst.db(), in, false, sum);
      sum.present -= from_out.present;
      sum.added -= from_out.added;
      sum.advanced -= from_out.advanced;
      const VerifyReport v = verify_store(dst);
      if (!v.problems.empty())
        fail_usage(out + ": the inputs do not combine into a store that verifies (a run continued differently in two copies of "
                   "a store?): " + v.problems.front() + (v.problems.size() > 1 ? " (and more)" : "") + "; nothing was written");
      sql::exec(dst.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
    }  // closed: its write-ahead log is folded in and removed
    // Nothing added: OUT stays the file it was, byte for byte (found by audit: a merge that added
    // nothing rewrote it, without its cache of library versions, and an attestation of it failed).
    sum.unchanged = out_existed && sum.added == 0 && sum.advanced == 0 && sum.adopted == 0;
    if (!sum.unchanged) place_output(tmp, target, out, out_evidence);
  } catch (const sql::Error& e) {
    cleanup();
    fail_environment(out + ": merge failed: " + e.what() + "; nothing was written");
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  return sum;
}

}  // namespace d9m
