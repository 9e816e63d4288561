#include "harness/store/store.h"
#include "harness/core/json_text.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
#include "harness/store/manifest.h"
#include "harness/store/sqlite.h"

namespace d9m {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string random_run_id() {
  unsigned char bytes[16] = {};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    fail_environment("cannot read /dev/urandom for a run id");
  char hex[33];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return hex;
}

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string parent_dir(const std::string& path) {
  const auto p = path.find_last_of('/');
  return p == std::string::npos ? "." : (p == 0 ? "/" : path.substr(0, p));
}

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

void create_schema(sqlite3* db) {
  sql::exec(db, embedded::store_schema_sql());
  manifest::own_origin(db);
  sql::exec(db, "PRAGMA application_id = " + std::to_string(kStoreApplicationId));
  sql::exec(db, "PRAGMA user_version = " + std::to_string(kStoreSchemaVersion));
}

// The tables schema 3 adds (the manifest), as the schema file declares them: migrating creates
// exactly what a new store has.
std::string schema3_block() {
  const std::string& all = embedded::store_schema_sql();
  const std::string begin = "-- schema 3 (integrity) ---", end = "-- end of schema 3 (integrity)";
  const auto b = all.find(begin), e = all.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) fail_internal("the store schema has no schema-3 block");
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
  sql::exec(db, schema3_block());
  manifest::own_origin(db);
  manifest::adopt_unrecorded_runs(db);
  sql::exec(db, "PRAGMA user_version = 3");
}

// WAL needs shared memory that every process of the store sees coherently; network file systems
// do not give that (https://www.sqlite.org/wal.html, "WAL does not work over a network
// filesystem"), so a store there could be silently corrupted. The magic numbers are statfs(2)'s.
std::optional<std::string> network_filesystem(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return std::nullopt;
  return network_filesystem_name(static_cast<std::int64_t>(fs.f_type));
}

}  // namespace

std::optional<std::string> network_filesystem_name(std::int64_t f_type) {
  switch (static_cast<std::uint32_t>(f_type)) {
    case 0x6969: return "NFS";
    case 0x517b: return "SMB";
    case 0xff534d42: return "CIFS";
    case 0xfe534d42: return "SMB2";
    case 0x564c: return "NCP";
    case 0x5346414f: return "AFS";
    case 0x6b414653: return "AFS (kAFS)";
    case 0x00c36400: return "CephFS";
    case 0x0bd00bd0: return "Lustre";
    case 0x47504653: return "GPFS";
    case 0x01021997: return "9p";
    case 0x013111a8: return "IBRIX";
    case 0x19830326: return "FhGFS/BeeGFS";
    case 0x65735546: return std::nullopt;  // FUSE: local or remote, cannot tell
    default: return std::nullopt;
  }
}

namespace {

// Creates a complete, empty store at `path` without a window in which another process could
// see half of it: the schema is written to a private temporary file, which is then linked into
// place. link() never replaces an existing file, so when two processes race, one wins and the
// other simply opens the winner's store. Nothing but our own temporary file is ever removed.
// Whether a freshly written store file holds a whole database on its own: no log beside it and
// SQLite's quick check passes when it is opened afresh.
bool complete_store_file(const std::string& path) {
  struct stat st {};
  if (::stat((path + "-wal").c_str(), &st) == 0 && st.st_size > 0) return false;
  sqlite3* db = nullptr;
  bool ok = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK;
  if (ok) {
    sqlite3_stmt* s = nullptr;
    ok = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW &&
         sqlite3_column_text(s, 0) && std::strcmp(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "ok") == 0;
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return ok;
}

void create_store(const std::string& path) {
  const std::string tmp = path + ".creating-" + random_run_id().substr(0, 12);
  auto cleanup = [&] {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((tmp + suffix).c_str());
  };
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(tmp.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_EXCLUSIVE, nullptr);
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

}  // namespace

Store Store::open(const std::string& path, Mode mode) {
  if (auto fs = network_filesystem(exists(path) ? path : parent_dir(path)))
    fail_environment(path + ": the store is on a network file system (" + *fs +
                     "); SQLite's WAL mode, which d9m stores use, is not safe there (readers and writers on "
                     "different hosts corrupt it). Keep the store on a local disk and copy it, or merge stores "
                     "with `d9m merge`, to share it");
  if (!exists(path)) {
    if (mode == Mode::read_only) fail_environment(path + ": no such store");
    const std::string dir = parent_dir(path);
    if (!exists(dir)) fail_environment(path + ": cannot create the store: folder " + dir + " does not exist");
    if (::access(dir.c_str(), W_OK) != 0)
      fail_environment(path + ": cannot create the store: folder " + dir + " is not writable (" + std::strerror(errno) + ")");
    create_store(path);
  } else if (mode == Mode::read_write && ::access(path.c_str(), W_OK) != 0) {
    fail_environment(path + ": the store is not writable (" + std::strerror(errno) + ")");
  }

  sqlite3* db = nullptr;
  // URI filenames let merge ATTACH its inputs read-only ("file:...?mode=ro").
  const int flags = (mode == Mode::read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  auto refuse = [&](const std::string& why) {
    sqlite3_close(db);
    fail_environment(path + ": " + why);
  };
  if (rc != SQLITE_OK) refuse(std::string("cannot open: ") + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 60'000);
  int schema = 0;

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
    sql::Statement(db_, "VACUUM INTO ?").bind(1, tmp).run();
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
    sql::Statement v(db_, "PRAGMA user_version");
    const std::int64_t now = v.step() ? v.integer(0) : 0;
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
    tx.commit();
  } catch (const sql::Error& e) {
    fail_environment(path_ + ": migrating from schema " + std::to_string(from) + " failed: " + describe_sqlite_failure(e) +
                     "; the store is unchanged (backup: " + backup + ")");
  }
  if (migrated) {
    notice_ = path_ + ": migrated from schema " + std::to_string(from) + " to " + std::to_string(kStoreSchemaVersion) +
              "; the store as it was is kept in " + backup;
  } else {
    std::remove(backup.c_str());
  }
  schema_ = kStoreSchemaVersion;
}

namespace {
int chain_version_of(sqlite3* db, const std::string& run_id) {
  if (!has_column(db, "runs", "chain_version")) return 1;
  sql::Statement v(db, "SELECT chain_version FROM runs WHERE id = ?");
  v.bind(1, run_id);
  return v.step() ? static_cast<int>(v.integer(0)) : 1;
}
}  // namespace

Store::ChainState Store::stored_chain(sqlite3* db, const std::string& run_id) {
  const int version = chain_version_of(db, run_id);
  sql::Statement c(db, "SELECT seq, chain, case_id FROM case_runs WHERE run_id = ? ORDER BY seq DESC LIMIT 1");
  c.bind(1, run_id);
  if (!c.step()) return {version, 0, chain_start_of(db, run_id, version).value_or(chain_start(run_id))};
  ChainState st{version, c.integer(0) + 1, c.text(1)};
  sql::Statement t(db, "SELECT chain FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial DESC LIMIT 1");
  t.bind(1, run_id).bind(2, c.text(2));
  if (t.step()) st.last = t.text(0);
  return st;
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

Store::Store(sqlite3* db, std::string path, int schema) : db_(db), path_(std::move(path)), schema_(schema) {
  char* real = ::realpath(path_.c_str(), nullptr);
  lease_key_ = real ? real : path_;
  std::free(real);
}

Store::~Store() {
  if (db_) sqlite3_close(db_);
}

std::string Store::case_id(const CaseRecord& c) {
  const nlohmann::json j = {{"op", c.op},         {"variant", c.variant},           {"backend", c.backend},
                            {"config", c.config}, {"config_id", c.config_id},       {"params", c.params},
                            {"seed", c.seed},     {"input_digest", c.input_digest}, {"output_dtype", c.output_dtype},
                            {"output_shape", c.output_shape}};
  return sha256_hex(json_text(j));
}

std::string Store::chain_start(const std::string& run_id) { return sha256_hex("d9m-chain-v1:" + run_id); }

std::optional<std::string> Store::run_head_text(sqlite3* db, const std::string& run_id) {
  const std::string plan = has_column(db, "runs", "plan_digest") ? "r.plan_digest" : "''";
  sql::Statement s(db, "SELECT r.id, r.fingerprint_id, r.started_at, r.host, r.gpu_uuids, r.d9m_version, r.d9m_commit,"
                       " r.catalog_digest, r.trials_per_case, r.threads, r.arguments, " + plan + ", f.canonical"
                       " FROM runs r JOIN fingerprints f ON f.id = r.fingerprint_id WHERE r.id = ?");
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  const nlohmann::json head = {{"chain", "d9m-chain-v2"},      {"id", s.text(0)},          {"fingerprint_id", s.text(1)},
                               {"started_at", s.text(2)},      {"host", s.text(3)},        {"gpu_uuids", s.text(4)},
                               {"d9m_version", s.text(5)},     {"d9m_commit", s.text(6)},  {"catalog_digest", s.text(7)},
                               {"trials_per_case", s.integer(8)}, {"threads", s.integer(9)}, {"arguments", s.text(10)},
                               {"plan_digest", s.text(11)},    {"fingerprint", s.text(12)}};
  return json_text(head);
}

std::optional<std::string> Store::run_head(sqlite3* db, const std::string& run_id) {
  const auto text = run_head_text(db, run_id);
  return text ? std::optional<std::string>(sha256_hex(*text)) : std::nullopt;
}

std::optional<std::string> Store::chain_start_of(sqlite3* db, const std::string& run_id, int chain_version) {
  if (chain_version == 1) return chain_start(run_id);
  return chain_version == 2 ? run_head(db, run_id) : std::nullopt;
}

std::string Store::closing_row(const std::string& run_id, const std::string& state, const std::string& finished_at,
                               std::int64_t resumes) {
  return json_text(nlohmann::json::array({"close", run_id, state, finished_at, resumes}));
}

std::string Store::chain_root(int chain_version, const std::string& last, const std::string& run_id, const std::string& state,
                              const std::string& finished_at, std::int64_t resumes) {
  return chain_version == 1 ? last : chain_link(last, closing_row(run_id, state, finished_at, resumes));
}

std::string Store::chain_link(const std::string& previous, const std::string& canonical_row) {
  std::string head;
  head.reserve(previous.size() + 1);
  head += previous;
  head += '\n';
  return sha256_hex(head, canonical_row);
}

namespace {
nlohmann::json optional_json(const std::optional<std::int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
}  // namespace

std::string Store::canonical_case_run(const std::string& run_id, const std::string& case_id, std::int64_t seq,
                                      const CaseRunRecord& cr) {
  auto row = nlohmann::json::array({"case_run", run_id, case_id, seq, to_string(cr.status), cr.detail, cr.claim_determinism,
                                     cr.claim_source, cr.claim_reason, cr.claim_bit_equal_to, cr.trials, cr.distinct,
                                     optional_json(cr.median_ns), optional_json(cr.min_ns)});
  // The role joined the row in schema 3. Rows written before have none, and their links must
  // come out as they were written; a role set on such a row, or cleared on a newer one, breaks
  // the link.
  if (!cr.role.empty()) row.push_back(cr.role);
  return json_text(row);
}

namespace {
// Strings JSON writes as they are: no escapes, no UTF-8 to check.
bool plain(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.';
  });
}
void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
}  // namespace

std::string Store::canonical_trial(const std::string& run_id, const std::string& case_id, const TrialRecord& t) {
  // The common row (hex ids and digest, no diff) written directly, byte for byte what the
  // nlohmann dump below gives (a unit test holds the two equal): one row per trial is the
  // store's hot path. Anything else takes the general path.
  if (!t.diff && plain(run_id) && plain(case_id) && plain(t.digest)) {
    std::string out;
    out.reserve(32 + run_id.size() + case_id.size() + t.digest.size() + 40);
    out += "[\"trial\",\"";
    out += run_id;
    out += "\",\"";
    out += case_id;
    out += "\",";
    append_int(out, t.trial);
    out += ",\"";
    out += t.digest;
    out += "\",";
    append_int(out, t.elapsed_ns);
    out += ",null]";
    return out;
  }
  return canonical_trial_general(run_id, case_id, t);
}

std::string Store::canonical_trial_general(const std::string& run_id, const std::string& case_id, const TrialRecord& t) {
  nlohmann::json diff = nullptr;
  if (t.diff) diff = {t.diff->count, t.diff->max_abs, t.diff->max_ulp, t.diff->first_index};
  return json_text(nlohmann::json::array({"trial", run_id, case_id, t.trial, t.digest, t.elapsed_ns, diff}));
}

std::string Store::begin_run(const Fingerprint& fp, const RunInfo& info) {
  // The lease before the row: nobody may see the run 'running' while no one holds it.
  RunLease lease;
  if (!lease.acquire(lease_key_, info.id)) fail_environment(path_ + ": run id " + info.id + " is already in use");
  leases_[info.id] = std::move(lease);
  try {
    sql::Transaction tx(db_);
    sql::Statement(db_, "INSERT OR IGNORE INTO fingerprints(id, canonical) VALUES (?, ?)")
        .bind(1, fp.id).bind(2, fp.canonical()).run();
    sql::Statement(db_,
                   "INSERT INTO runs(id, fingerprint_id, state, started_at, host, gpu_uuids, d9m_version, d9m_commit,"
                   " catalog_digest, trials_per_case, threads, arguments, plan_digest, chain_version)"
                   " VALUES (?,?, 'running', ?,?,?,?,?,?,?,?,?,?, 2)")
        .bind(1, info.id).bind(2, fp.id).bind(3, info.started_at).bind(4, info.host).bind(5, info.gpu_uuids)
        .bind(6, d9m_version()).bind(7, d9m_commit()).bind(8, info.catalog_digest)
        .bind(9, info.trials_per_case).bind(10, info.threads).bind(11, info.arguments).bind(12, info.plan_digest).run();
    // The head as read back: exactly what verify will recompute from the stored row.
    const auto head = run_head(db_, info.id);
    if (!head) fail_internal("run " + info.id + " cannot be read back after its insertion");
    manifest::append(db_, "begun", info.id, {{"chain_version", 2}, {"head", *head}});
    tx.commit();
    chains_[info.id] = {2, 0, *head};
  } catch (const sql::Error& e) {
    fail_environment(path_ + ": cannot record the run: " + describe_sqlite_failure(e));
  }
  return info.id;
}

std::optional<ResumedRun> Store::resume_run(const Fingerprint& fp, const RunInfo& info, int* busy) {
  if (busy) *busy = 0;
  try {
    std::vector<std::string> candidates;
    {
      sql::Statement s(db_,
                       "SELECT id FROM runs WHERE state IN ('interrupted', 'running') AND fingerprint_id = ? AND plan_digest = ?"
                       " AND plan_digest != '' AND catalog_digest = ? AND trials_per_case = ? AND threads = ?"
                       " ORDER BY started_at DESC, id");
      s.bind(1, fp.id).bind(2, info.plan_digest).bind(3, info.catalog_digest).bind(4, info.trials_per_case).bind(5, info.threads);
      while (s.step()) candidates.push_back(s.text(0));
    }
    for (const auto& id : candidates) {
      RunLease lease;
      if (!lease.acquire(lease_key_, id)) {  // another process is running or resuming it
        if (busy) ++*busy;
        continue;
      }
      ResumedRun r;
      r.id = id;
      sql::Transaction tx(db_);
      sql::Statement(db_, "UPDATE runs SET state = 'running', finished_at = NULL, chain_root = NULL, resumes = resumes + 1"
                          " WHERE id = ? AND state IN ('interrupted', 'running')")
          .bind(1, id).run();
      if (sqlite3_changes(db_) != 1) continue;  // finished meanwhile
      sql::Statement n(db_, "SELECT resumes FROM runs WHERE id = ?");
      n.bind(1, id);
      if (n.step()) r.resumes = n.integer(0);
      manifest::append(db_, "resumed", id, {{"resumes", r.resumes}});
      sql::Statement d(db_,
                       "SELECT c.op, c.config, c.config_id, c.variant, cr.status, cr.claim_determinism, cr.trials,"
                       " cr.distinct_digests FROM case_runs cr JOIN cases c ON c.id = cr.case_id WHERE cr.run_id = ?"
                       " ORDER BY cr.seq");
      d.bind(1, id);
      while (d.step()) {
        StoredCase sc{d.text(0), d.text(1), d.text(2), d.text(3), {}};
        sc.cr.status = status_from_string(d.text(4));
        sc.cr.claim_determinism = d.text(5);
        sc.cr.trials = d.integer(6);
        sc.cr.distinct = d.integer(7);
        r.done.push_back(std::move(sc));
      }
      const ChainState chain = stored_chain(db_, id);
      tx.commit();
      chains_[id] = chain;
      leases_[id] = std::move(lease);
      return r;
    }
  } catch (const sql::Error& e) {
    fail_environment(path_ + ": cannot resume a run: " + describe_sqlite_failure(e));
  } catch (const std::invalid_argument& e) {
    fail_environment(path_ + ": cannot resume a run: " + e.what());
  }
  return std::nullopt;
}

void Store::finish_run(const std::string& run_id, const std::string& state) {
  try {
    sql::Transaction tx(db_);
    auto it = chains_.find(run_id);
    // Only a run this process still runs: never overwrite what another process decided.
    if (!close_run(run_id, it == chains_.end() ? stored_chain(db_, run_id) : it->second, state))
      fail_environment(path_ + ": run " + run_id + " is no longer marked running: another process marked or took it over; "
                       "this process's rows up to its last case are stored");
    tx.commit();
    leases_.erase(run_id);
  } catch (const sql::Error& e) {
    fail_environment(path_ + ": cannot finish the run: " + describe_sqlite_failure(e));
  }
}

bool Store::close_run(const std::string& run_id, const ChainState& chain, const std::string& state) {
  sql::Statement r(db_, "SELECT resumes, coalesce(finished_at, ?) FROM runs WHERE id = ? AND state = 'running'");
  r.bind(1, utc_now()).bind(2, run_id);
  if (!r.step()) return false;
  const std::int64_t resumes = r.integer(0);
  const std::string finished_at = r.text(1);
  const std::string root = chain_root(chain.version, chain.last, run_id, state, finished_at, resumes);
  sql::Statement(db_, "UPDATE runs SET state = ?, finished_at = ?, chain_root = ? WHERE id = ? AND state = 'running'")
      .bind(1, state).bind(2, finished_at).bind(3, root).bind(4, run_id).run();
  sql::Statement n(db_, "SELECT count(*) FROM case_runs WHERE run_id = ?");
  n.bind(1, run_id);
  n.step();
  manifest::append(db_, "ended", run_id,
                   {{"state", state}, {"finished_at", finished_at}, {"resumes", resumes}, {"root", root}, {"cases", n.integer(0)}});
  return true;
}

void Store::put_case(const std::string& run_id, const CaseRecord& c, const CaseRunRecord& cr,
                     const std::vector<TrialRecord>& trials) {
  try {
    sql::Transaction tx(db_);
    sql::Statement(db_,
                   "INSERT OR IGNORE INTO cases(id, op, variant, backend, config, config_id, params, seed,"
                   " input_digest, output_dtype, output_shape) VALUES (?,?,?,?,?,?,?,?,?,?,?)")
        .bind(1, c.id).bind(2, c.op).bind(3, c.variant).bind(4, c.backend).bind(5, c.config)
        .bind(6, c.config_id).bind(7, c.params).bind(8, static_cast<std::int64_t>(c.seed))
        .bind(9, c.input_digest).bind(10, c.output_dtype).bind(11, c.output_shape).run();
    auto known = chains_.find(run_id);
    ChainState chain = known != chains_.end() ? known->second : stored_chain(db_, run_id);
    const std::int64_t seq = chain.next_seq++;
    chain.last = chain_link(chain.last, canonical_case_run(run_id, c.id, seq, cr));
    sql::Statement(db_,
                   "INSERT INTO case_runs(run_id, case_id, status, detail, claim_determinism, claim_source,"
                   " claim_reason, claim_bit_equal_to, trials, distinct_digests, median_ns, min_ns, seq, chain, role)"
                   " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
        .bind(1, run_id).bind(2, c.id).bind(3, to_string(cr.status)).bind(4, cr.detail)
        .bind(5, cr.claim_determinism).bind(6, cr.claim_source).bind(7, cr.claim_reason).bind(8, cr.claim_bit_equal_to)
        .bind(9, cr.trials).bind(10, cr.distinct).bind(11, cr.median_ns).bind(12, cr.min_ns).bind(13, seq)
        .bind(14, chain.last).bind(15, cr.role).run();
    sql::Statement ins(db_,
                       "INSERT INTO trials(run_id, case_id, trial, digest, elapsed_ns, diff_count, diff_max_abs,"
                       " diff_max_ulp, diff_first_index, chain) VALUES (?,?,?,?,?,?,?,?,?,?)");
    for (const auto& t : trials) {
      chain.last = chain_link(chain.last, canonical_trial(run_id, c.id, t));
      ins.bind(1, run_id).bind(2, c.id).bind(3, t.trial).bind(4, t.digest).bind(5, t.elapsed_ns);
      if (t.diff) {
        ins.bind(6, t.diff->count).bind(7, t.diff->max_abs).bind(8, t.diff->max_ulp).bind(9, t.diff->first_index);
      } else {
        ins.bind_null(6).bind_null(7).bind_null(8).bind_null(9);
      }
      ins.bind(10, chain.last);
      ins.run();
    }
    tx.commit();
    chains_[run_id] = chain;  // only once the rows are durable
  } catch (const sql::Error& e) {
    fail_environment(path_ + ": cannot store case " + c.op + "/" + c.config + "/" + c.variant + ": " +
                     describe_sqlite_failure(e));
  }
}

}  // namespace d9m
