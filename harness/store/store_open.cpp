// Opening a store: refusing what is not a d9m store before a byte is written, creating a new one
// whole, migrating an older schema forward after a backup, and marking interrupted the runs whose
// process is gone.
#include "harness/store/store.h"
#include "harness/core/json_text.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/core/digest.h"
#include "harness/core/embedded.h"
#include "harness/core/error.h"
#include "harness/core/files.h"
#include "harness/store/manifest.h"
#include "harness/store/sqlite.h"

namespace d9m {

namespace {

// Reads what makes a file a d9m store. A file that is not SQLite fails right here (SQLite reads
// the header lazily), still without anything written.
struct Identity {
  std::int64_t application_id = 0, user_version = 0, objects = 0;
};

Identity identify(sqlite3* db) {
  Identity id;
  sql::Statement a(db, "PRAGMA application_id");
  if (a.step()) id.application_id = a.integer(0);
  sql::Statement v(db, "PRAGMA user_version");
  if (v.step()) id.user_version = v.integer(0);
  sql::Statement n(db, "SELECT count(*) FROM sqlite_master");
  if (n.step()) id.objects = n.integer(0);
  return id;
}


void create_schema(sqlite3* db) {
  sql::exec(db, embedded::store_schema_sql());
  manifest::own_origin(db);
  sql::exec(db, "PRAGMA application_id = " + std::to_string(kStoreApplicationId));
  sql::exec(db, "PRAGMA user_version = " + std::to_string(kStoreSchemaVersion));
}

// The tables a schema adds (3: the manifest; 6: traces; 8: the library versions cache), as the schema file declares them between
// "-- schema N (what) ---" and "-- end of schema N (what)": migrating creates exactly what a new
// store has.
std::string schema_block(int version, const std::string& what) {
  const std::string& all = embedded::store_schema_sql();
  const std::string tag = "schema " + std::to_string(version) + " (" + what + ")";
  const std::string begin = "-- " + tag + " ---", end = "-- end of " + tag;
  const auto b = all.find(begin), e = all.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) fail_internal("the store schema has no block for " + tag);
  return all.substr(b, e - b);
}

// Schema 2 -> 3: runs gain their chain version (1 for every run already there: their chains
// stay as they were written), the manifest is created, and every run is recorded in it as
// adopted, so that from now on deleting one, or editing its metadata, shows.
void migrate_2_to_3(sqlite3* db) {
  sql::exec(db, "ALTER TABLE runs ADD COLUMN chain_version INTEGER NOT NULL DEFAULT 1");
  // Existing case rows keep role '': what they were is read from the registry, or from the naming
  // convention of the d9m that wrote them (report/results.cpp); filling it in here would change
  // rows the hash chain covers.
  sql::exec(db, "ALTER TABLE case_runs ADD COLUMN role TEXT NOT NULL DEFAULT ''");
  sql::exec(db, schema_block(3, "integrity"));
  manifest::own_origin(db);
  manifest::adopt_unrecorded_runs(db);
  sql::exec(db, "PRAGMA user_version = 3");
}

// Schema 3 -> 4: cases gain their precision. Every case already there is f32 at the default math
// mode, which is what the defaults say, and its id (which leaves defaults out) stays valid.
void migrate_3_to_4(sqlite3* db) {
  sql::exec(db, "ALTER TABLE cases ADD COLUMN dtype TEXT NOT NULL DEFAULT 'f32'");
  sql::exec(db, "ALTER TABLE cases ADD COLUMN math TEXT NOT NULL DEFAULT 'default'");
  sql::exec(db, "PRAGMA user_version = 4");
}

void migrate_4_to_5(sqlite3* db) {
  sql::exec(db, "ALTER TABLE case_runs ADD COLUMN invariance TEXT NOT NULL DEFAULT ''");
  sql::exec(db, "ALTER TABLE trials ADD COLUMN choice TEXT NOT NULL DEFAULT ''");
  sql::exec(db, "PRAGMA user_version = 5");
}

// Schema 5 -> 6: the trace table of pipeline cases. No row changes.
void migrate_5_to_6(sqlite3* db) {
  sql::exec(db, schema_block(6, "traces"));
  sql::exec(db, "PRAGMA user_version = 6");
}

// Schema 7 -> 8: the cache of library versions (not evidence). No row changes.
void migrate_7_to_8(sqlite3* db) {
  sql::exec(db, schema_block(8, "library versions"));
  sql::exec(db, "PRAGMA user_version = 8");
}

// Schema 8 -> 9: case rows gain the check of their values against the serial reference. Rows
// already there keep '' (not checked), and with it their links.
void migrate_8_to_9(sqlite3* db) {
  sql::exec(db, "ALTER TABLE case_runs ADD COLUMN value_check TEXT NOT NULL DEFAULT ''");
  sql::exec(db, "PRAGMA user_version = 9");
}

// Schema 9 -> 10: a value check may say whether the output has the bits of the variant its
// variant claims (ValueCheck::claimed_bits), a key a d9m of schema 9 would read as text it does not
// write, calling the store edited: the version tells it instead that a newer d9m wrote the store.
// No row changes.
void migrate_9_to_10(sqlite3* db) { sql::exec(db, "PRAGMA user_version = 10"); }

// The results view as the schema file declares it (its last statement).
std::string results_view() {
  const std::string& all = embedded::store_schema_sql();
  const auto b = all.find("CREATE VIEW results AS");
  if (b == std::string::npos) fail_internal("the store schema has no results view");
  return all.substr(b);
}

// Schema 6 -> 7: trial rows move to trial_rows, keyed by the case row's number in this file with
// the digest and link as bytes (every row kept: a value that is not the hex d9m writes stays as
// it was), and `trials` becomes a view that shows them as before. Traces lose their foreign key
// into trials (a view cannot be one's parent; verify checks it instead). The hash chains cover
// the rows as the view shows them, so every link stays valid.
void migrate_6_to_7(sqlite3* db, const std::string& path) {
  {
    // Rows schema 7 cannot key: no case row to number them by, or a trial number outside 0..2^32-1.
    // Only an edit makes them (schema 6's foreign key and d9m's writer do not); refusing keeps them.
    // And digests or links stored as anything but text: schema 7 keeps text as it is and would take
    // such a value for its bytes, so the type fault verify shows now would be gone after.
    sql::Statement bad(db, "SELECT count(*) FROM trials t WHERE typeof(t.trial) != 'integer' OR t.trial < 0 OR t.trial > 4294967295"
                           " OR typeof(t.digest) != 'text' OR typeof(t.chain) != 'text'"
                           " OR NOT EXISTS (SELECT 1 FROM case_runs cr WHERE cr.run_id = t.run_id AND cr.case_id = t.case_id)");
    bad.step();
    if (bad.integer(0) > 0)
      fail_environment(path + ": holds " + std::to_string(bad.integer(0)) + " trial row(s) that belong to no case row, have a "
                       "trial number outside 0 to 2^32 - 1, or a digest or link that is not text (the store was edited: `d9m "
                       "verify` shows it). Schema 7 cannot keep such rows as they are, so the store is not migrated and stays as "
                       "it was; it can still be read (`d9m report`, `d9m verify`)");
  }
  sql::exec(db, "DROP VIEW IF EXISTS results");
  std::string trace = schema_block(6, "traces");
  const auto create = trace.find("CREATE TABLE trace (");
  if (create == std::string::npos) fail_internal("the store schema's trace block has no trace table");
  trace.replace(create, std::string("CREATE TABLE trace (").size(), "CREATE TABLE trace_schema7 (");
  const std::string columns = "run_id, case_id, trial, step, position, name, op, variant, inputs, digest, diff_count, diff_max_abs,"
                              " diff_max_ulp, diff_first_index, chain";
  sql::exec(db, trace);
  sql::exec(db, "INSERT INTO trace_schema7 (" + columns + ") SELECT " + columns + " FROM trace");
  sql::exec(db, "DROP TABLE trace; ALTER TABLE trace_schema7 RENAME TO trace");
  sql::exec(db, "ALTER TABLE case_runs ADD COLUMN num INTEGER NOT NULL DEFAULT 0");
  // Numbered 1, 2, ... in rowid order (a rowid can be anything an edit made it, zero or negative).
  sql::exec(db, "CREATE TEMP TABLE case_run_numbers AS SELECT rowid AS r, row_number() OVER (ORDER BY rowid) AS n FROM case_runs");
  sql::exec(db, "UPDATE case_runs SET num = (SELECT n FROM case_run_numbers WHERE r = case_runs.rowid);"
                " DROP TABLE case_run_numbers");
  sql::exec(db, "ALTER TABLE trials RENAME TO trials_schema6");
  sql::exec(db, schema_block(7, "compact trials"));
  sql::exec(db, "INSERT INTO trial_rows(id, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain, choice)"
                " SELECT cr.num * 4294967296 + t.trial, d9m_bytes(t.digest, 16), t.elapsed_ns, t.diff_count, t.diff_max_abs,"
                " t.diff_max_ulp, t.diff_first_index, d9m_bytes(t.chain, 32), t.choice"
                " FROM trials_schema6 t JOIN case_runs cr ON cr.run_id = t.run_id AND cr.case_id = t.case_id");
  {
    sql::Statement copied(db, "SELECT (SELECT count(*) FROM trials_schema6), (SELECT count(*) FROM trial_rows)");
    copied.step();
    if (copied.integer(0) != copied.integer(1))
      fail_internal("migrating to schema 7 copied " + std::to_string(copied.integer(1)) + " of " +
                    std::to_string(copied.integer(0)) + " trial rows");
  }
  sql::exec(db, "DROP TABLE trials_schema6");
  sql::exec(db, results_view());
  sql::exec(db, "PRAGMA user_version = 7");
}

// WAL needs shared memory that every process of the store sees coherently; network file systems
// do not give that (https://www.sqlite.org/wal.html, "WAL does not work over a network
// filesystem"), so a store there could be silently corrupted. The magic numbers are statfs(2)'s.
std::optional<std::string> network_filesystem(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return std::nullopt;
  return network_filesystem_name(static_cast<std::int64_t>(fs.f_type));
}

// Whether a freshly written store file holds a whole database on its own: no log beside it and
// SQLite's quick check passes when it is opened afresh.
bool complete_store_file(const std::string& path) {
  struct stat st {};
  if (::stat((path + "-wal").c_str(), &st) == 0 && st.st_size > 0) return false;
  sqlite3* db = nullptr;
  bool ok = sqlite3_open_v2(sql::file_name(path).c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK;
  if (ok) {
    sqlite3_stmt* s = nullptr;
    ok = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW &&
         sqlite3_column_text(s, 0) && std::strcmp(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "ok") == 0;
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return ok;
}

// Creates a complete, empty store at `path` without a window in which another process could
// see half of it: the schema is written to a private temporary file, which is then linked into
// place. link() never replaces an existing file, so when two processes race, one wins and the
// other simply opens the winner's store. Nothing but our own temporary file is ever removed.
void create_store(const std::string& path) {
  const std::string tmp = path + ".creating-" + random_run_id().substr(0, 12);
  auto cleanup = [&] {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((tmp + suffix).c_str());
  };
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(sql::file_name(tmp).c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_EXCLUSIVE, nullptr);
  try {
    if (rc != SQLITE_OK) throw sql::Error(rc, std::string("creating: ") + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_extended_result_codes(db, 1);
    sql::exec(db, "PRAGMA journal_mode = WAL");  // persistent: recorded in the file header
    sql::Transaction tx(db);
    create_schema(db);
    tx.commit();
    // The schema must be in the file itself before it is linked into place: a checkpoint that
    // fails (a full disk) would otherwise leave it only in the temporary WAL, which is removed.
    sql::Statement checkpoint(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    if (!checkpoint.step() || checkpoint.integer(0) != 0 || checkpoint.integer(1) != checkpoint.integer(2))
      throw sql::Error(SQLITE_IOERR, "the new store's log could not be written into its file");
  } catch (const sql::Error& e) {
    sqlite3_close(db);
    cleanup();
    fail_environment(path + ": cannot create the store: " + describe_sqlite_failure(e));
  }
  if (const int closed = sqlite3_close(db); closed != SQLITE_OK || !complete_store_file(tmp)) {
    cleanup();
    fail_environment(path + ": cannot create the store: " +
                     describe_sqlite_failure(sql::Error(closed != SQLITE_OK ? closed : SQLITE_FULL,
                                                        "the new store could not be completed on disk")));
  }
  if (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    const std::string why = std::strerror(errno);
    cleanup();
    fail_environment(path + ": cannot create the store (" + why + ")");
  }
  cleanup();
}

// A rollback journal beside the store (see check_store_file).
void check_store_file_journal(const std::string& path) {
  for (const std::string& journal : {path + "-journal", real_path_or_self(path) + "-journal"}) {
    struct stat j {};
    if (::stat(journal.c_str(), &j) == 0 && j.st_size > 0)
      fail_environment(path + ": a rollback journal lies beside it (" + journal + ", " + std::to_string(j.st_size) +
                       " bytes). d9m stores never have one (they use a write-ahead log); the next program to write the store "
                       "would copy its pages into the file. Left by another program, or put there: inspect it, and remove it "
                       "only if the store should stay as it is (`d9m verify` then checks the store)");
  }
}

// d9m's own temporary names of the store file: NAME.creating-RANDOM (create_store) and
// NAME.merging-HOST-PID-RANDOM (d9m merge of a new output), beside it, that are links to this very
// file. Each is linked into place as NAME and then removed; a process killed in between (found by
// the kill-and-resume test: SIGKILL right after the link) leaves its name behind for good. No
// process ever opens the store by such a name, so it is no second name in use.
std::vector<std::string> own_temporary_links(const std::string& path, const struct stat& st) {
  const std::string real = real_path_or_self(path);
  const std::string dir = parent_dir(real), name = real.substr(real.rfind('/') + 1);
  std::vector<std::string> links;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return links;
  while (const dirent* e = ::readdir(d)) {
    const std::string entry = e->d_name;
    if (entry.rfind(name + ".creating-", 0) != 0 && entry.rfind(name + ".merging-", 0) != 0) continue;
    struct stat l {};
    if (::lstat((dir + "/" + entry).c_str(), &l) == 0 && S_ISREG(l.st_mode) && l.st_dev == st.st_dev && l.st_ino == st.st_ino)
      links.push_back(dir + "/" + entry);
  }
  ::closedir(d);
  return links;
}

// What SQLite would misread, found by audit. A store is a regular file (a FIFO blocked every
// reader for good; a folder read as "disk I/O error"). Its logs and d9m's lease are named after
// its path, so a second name (a hard link) is a second set of them: a run writing through each
// name corrupted the store and lost one run after reporting it stored. And a store never has a
// rollback journal (stores are in WAL mode): one beside it, left by another program or put there,
// would be played into the file by the next writer, pages no hash chain was checked against.
void check_store_file(const std::string& path, struct stat& st, Store::Mode mode) {
  if (S_ISDIR(st.st_mode)) fail_environment(path + ": is a folder, not a store");
  if (!S_ISREG(st.st_mode)) fail_environment(path + ": is not a regular file (a FIFO, socket or device), so not a store");
  // d9m itself links a new store or a merged one into place and then removes its temporary name:
  // a second link that lasts longer than that is someone else's, or one a killed d9m left.
  for (int wait = 0; st.st_nlink > 1 && wait < 20; ++wait) {
    ::usleep(50 * 1000);
    if (::stat(path.c_str(), &st) != 0) fail_environment(path + ": cannot open: " + std::strerror(errno));
  }
  // d9m's own leftovers are no second name in use; a writer removes them.
  const std::vector<std::string> left = st.st_nlink > 1 ? own_temporary_links(path, st) : std::vector<std::string>{};
  if (st.st_nlink > 1 + left.size())
    fail_environment(path + ": the store file has " + std::to_string(st.st_nlink) +
                     " names (hard links). SQLite names its logs, and d9m its run lease, after the name a process opened, "
                     "so processes using two names would each keep their own and corrupt the store. Keep one name (a "
                     "symbolic link is fine) or copy it with `d9m merge -o COPY.sqlite " + path + "`");
  if (mode == Store::Mode::read_write)
    for (const auto& l : left) ::unlink(l.c_str());
  check_store_file_journal(path);
}

}  // namespace

Store Store::open(const std::string& path, Mode mode) {
  if (auto fs = network_filesystem(path_exists(path) ? path : parent_dir(path)))
    fail_environment(path + ": the store is on a network file system (" + *fs +
                     "); SQLite's WAL mode, which d9m stores use, is not safe there (readers and writers on "
                     "different hosts corrupt it). Keep the store on a local disk and copy it, or merge stores "
                     "with `d9m merge`, to share it");
  if (!path_exists(path)) {
    if (struct stat l {}; mode == Mode::read_only && ::lstat(path.c_str(), &l) == 0)
      fail_environment(path + ": no such store: a symbolic link that leads to no file (or a loop)");
    if (mode == Mode::read_only) fail_environment(path + ": no such store");
    // Through a symbolic link to a file not there yet the store is created as the file the link
    // names, as `merge -o` does (found by audit: link() met the link itself, and the open failed
    // with "No such file or directory").
    if (struct stat l {}; ::lstat(path.c_str(), &l) == 0 && S_ISLNK(l.st_mode)) {
      std::string target(static_cast<std::size_t>(PATH_MAX), '\0');
      const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
      if (n <= 0 || static_cast<std::size_t>(n) >= target.size())
        fail_environment(path + ": a symbolic link that cannot be read (" + std::strerror(errno) + ")");
      target.resize(static_cast<std::size_t>(n));
      if (target.front() != '/') target = parent_dir(path) + "/" + target;
      if (struct stat t {}; ::lstat(target.c_str(), &t) == 0)
        fail_environment(path + ": a symbolic link to " + target + ", itself a link that leads to no file (or a loop); "
                         "give the store's own path");
      Store::open(target, mode);  // creates it
      return Store::open(path, mode);
    }
    const std::string dir = parent_dir(path);
    if (!path_exists(dir)) fail_environment(path + ": cannot create the store: folder " + dir + " does not exist");
    if (::access(dir.c_str(), W_OK) != 0)
      fail_environment(path + ": cannot create the store: folder " + dir + " is not writable (" + std::strerror(errno) + ")");
    create_store(path);
  } else if (mode == Mode::read_write && ::access(path.c_str(), W_OK) != 0) {
    fail_environment(path + ": the store is not writable (" + std::strerror(errno) + ")");
  }

  // The file as opened: stat before and after the open name one file only if no rename put
  // another in its place meanwhile (check_not_replaced compares later writes with it).
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) fail_environment(path + ": cannot open: " + std::strerror(errno));
  check_store_file(path, before, mode);
  sqlite3* db = nullptr;
  // URI filenames let merge ATTACH its inputs read-only ("file:...?mode=ro").
  const int flags = (mode == Mode::read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  const int rc = sqlite3_open_v2(sql::file_name(path).c_str(), &db, flags, nullptr);
  auto refuse = [&](const std::string& why) {
    sqlite3_close(db);
    fail_environment(path + ": " + why);
  };
  if (rc != SQLITE_OK) refuse(std::string("cannot open: ") + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  struct stat after {};
  if (::stat(path.c_str(), &after) != 0 || after.st_dev != before.st_dev || after.st_ino != before.st_ino)
    refuse("was replaced while it was being opened (by `d9m merge -o`?): try again");
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kStoreBusyTimeoutMs);
  int schema = 0;
  try {
    sql::register_functions(db);
  } catch (const sql::Error& e) {
    refuse(describe_sqlite_failure(e));
  }

  try {
    // Everything below only reads until the file is known to be a d9m store of a schema this
    // build understands: a foreign file is refused without a byte written.
    const Identity id = identify(db);
    if (id.application_id == 0 && id.objects == 0) refuse("is empty: not a d9m store");
    if (id.application_id != kStoreApplicationId) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "0x%08llx", static_cast<unsigned long long>(id.application_id) & 0xffffffffull);
      refuse(std::string("is a SQLite database of another application (application_id ") + hex +
             ", d9m uses 0x64396d31): refusing to touch it");
    }
    if (id.user_version > kStoreSchemaVersion)
      refuse("was written by a newer d9m (schema " + std::to_string(id.user_version) + "; this build reads up to " +
             std::to_string(kStoreSchemaVersion) + "): upgrade d9m to read it");
    if (id.user_version < 1) refuse("has an unknown d9m schema version " + std::to_string(id.user_version));
    sql::exec(db, "PRAGMA foreign_keys = ON");
    schema = static_cast<int>(id.user_version);
  } catch (const sql::Error& e) {
    refuse(describe_sqlite_failure(e));
  }
  Store store(db, path, schema);
  store.dev_ = before.st_dev;
  store.ino_ = before.st_ino;
  if (mode == Mode::read_write) {
    store.migrate();
    store.mark_dead_runs_interrupted();
  }
  return store;
}

// Forward migration, one step per version, after a complete copy of the store as it was
// (VACUUM INTO a temporary name, then linked into place: a crash leaves no half backup under
// the final name). The schema change itself is one transaction, so a crash leaves either the old
// store or the new one. Two processes migrating at once: the second finds the work done inside
// its transaction and removes its own backup.
void Store::migrate() {
  if (schema_ >= kStoreSchemaVersion) return;
  const int from = schema_;
  // A private temporary name (processes may migrate at once), linked to the first free name.
  const std::string base = path_ + ".schema" + std::to_string(from) + "-backup";
  const std::string tmp = base + ".partial-" + random_run_id().substr(0, 12);
  try {
    sql::Statement(db_, "VACUUM INTO ?").bind(1, sql::file_name(tmp)).run();
  } catch (const sql::Error& e) {
    std::remove(tmp.c_str());
    fail_environment(path_ + ": schema " + std::to_string(from) + " needs migrating to " +
                     std::to_string(kStoreSchemaVersion) + ", but its backup " + tmp + " cannot be written: " +
                     describe_sqlite_failure(e) + "; the store is unchanged");
  }
  std::string backup = base;
  while (::link(tmp.c_str(), backup.c_str()) != 0) {
    if (errno == EEXIST) {
      backup = base + "-" + random_run_id().substr(0, 8);
      continue;
    }
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    fail_environment(path_ + ": cannot put the backup in place at " + backup + " (" + why + "); the store is unchanged");
  }
  std::remove(tmp.c_str());
  bool migrated = false;
  try {
    sql::Transaction tx(db_);
    check_not_replaced();
    std::int64_t now = 0;
    {  // (a statement left open would lock the tables the steps below drop)
      sql::Statement v(db_, "PRAGMA user_version");
      if (v.step()) now = v.integer(0);
    }
    if (now == 1) {
      sql::exec(db_, "ALTER TABLE runs ADD COLUMN plan_digest TEXT NOT NULL DEFAULT ''");
      sql::exec(db_, "ALTER TABLE runs ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0");
      sql::exec(db_, "PRAGMA user_version = 2");
      migrated = true;
    }
    if (now == 1 || now == 2) {
      migrate_2_to_3(db_);
      migrated = true;
    }
    if (now >= 1 && now <= 3) {
      migrate_3_to_4(db_);
      migrated = true;
    }
    if (now >= 1 && now <= 4) {
      migrate_4_to_5(db_);
      migrated = true;
    }
    if (now >= 1 && now <= 5) {
      migrate_5_to_6(db_);
      migrated = true;
    }
    if (now >= 1 && now <= 6) {
      migrate_6_to_7(db_, path_);
      migrated = true;
    }
    if (now >= 1 && now <= 7) {
      migrate_7_to_8(db_);
      migrated = true;
    }
    if (now >= 1 && now <= 8) {
      migrate_8_to_9(db_);
      migrated = true;
    }
    if (now >= 1 && now <= 9) {
      migrate_9_to_10(db_);
      migrated = true;
    }
    tx.commit();
  } catch (const sql::Error& e) {
    fail_environment(path_ + ": migrating from schema " + std::to_string(from) + " failed: " + describe_sqlite_failure(e) +
                     "; the store is unchanged (backup: " + backup + ")");
  } catch (const Error&) {  // refused (the store unchanged, so its backup is not needed)
    std::remove(backup.c_str());
    throw;
  }
  if (migrated) {
    notice_ = path_ + ": migrated from schema " + std::to_string(from) + " to " + std::to_string(kStoreSchemaVersion) +
              "; the store as it was is kept in " + backup;
  } else {
    std::remove(backup.c_str());
  }
  schema_ = kStoreSchemaVersion;
}

// A run left 'running' by a process that died (SIGKILL, OOM, power) is interrupted: its rows up
// to the last committed case are evidence, its chain is closed there. The check and the update
// happen under the write lock and while holding the run's lease, so a process resuming the run
// at the same moment cannot be overruled.
void Store::mark_dead_runs_interrupted() {
  try {
    std::vector<std::string> running;
    {
      sql::Statement s(db_, "SELECT id FROM runs WHERE state = 'running'");
      while (s.step()) running.push_back(s.text(0));
    }
    if (running.empty()) return;
    sql::Transaction tx(db_);
    check_not_replaced();
    for (const auto& id : running) {
      RunLease lease;
      if (!lease.acquire(lease_key_, id)) continue;  // alive
      close_run(id, stored_chain(db_, id), "interrupted");
    }
    tx.commit();
  } catch (const sql::Error& e) {
    fail_environment(path_ + ": cannot mark runs of dead processes interrupted: " + describe_sqlite_failure(e));
  }
}

Store::Store(sqlite3* db, std::string path, int schema)
    : db_(db), path_(std::move(path)), lease_key_(real_path_or_self(path_)), schema_(schema) {}

bool Store::replaced() const {
  struct stat st {};
  return !(::stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_);
}

void Store::check_not_replaced() const {
  if (!replaced()) return;
  fail_environment(path_ + ": the store file was replaced after this process opened it (`d9m merge -o` puts its result in place "
                   "so); what it wrote from then on would be lost, so it stops here. Run again: `d9m run --resume` continues "
                   "a run in the new file");
}

Store::~Store() {
  // Statements first: SQLite does not close a connection that still has some.
  insert_one_.reset();
  insert_many_.reset();
  if (db_) sqlite3_close(db_);
}

}  // namespace d9m
