// The evidence store (DESIGN.md "Store"): one SQLite file in WAL mode with a private
// application_id and user_version = schema version. Keys are content-addressed (fingerprints
// and cases by SHA-256 of their content; runs by a random 128-bit id), so stores from many
// machines merge without conflict. All writes are BEGIN IMMEDIATE transactions with a busy
// timeout, one per case, never one per trial.
#pragma once
#include <sqlite3.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/evidence.h"
#include "harness/core/files.h"  // network_filesystem_name, which open() refuses WAL stores on
#include "harness/core/fingerprint.h"
#include "harness/store/run_lease.h"
#include "harness/store/sqlite.h"

namespace d9m {

inline constexpr std::int32_t kStoreApplicationId = 0x64396d31;  // "d9m1"
inline constexpr int kStoreSchemaVersion = 10;
// How long a write waits for another writer's lock before failing.
inline constexpr int kStoreBusyTimeoutMs = 60'000;

struct TrialRecord {
  std::int64_t trial = 0;
  std::string digest;
  std::int64_t elapsed_ns = 0;
  std::optional<DiffStats> diff;  // only when the digest differs from trial 0
  std::string choice;             // an autotuning variant's choice in this trial (schema 5), or empty
};

// One op of one step of one trial of a pipeline case (schema 6).
struct TraceRecord {
  std::int64_t trial = 0, step = 0, position = 0;
  std::string name, op, variant;
  std::string inputs;  // JSON array of the input digests
  std::string digest;
  std::optional<DiffStats> diff;  // only when the digest differs from trial 0's at (step, position)
};

struct CaseRecord {
  std::string id;  // SHA-256 of the fields below (content-addressed)
  std::string op, variant, backend, config, config_id, params;
  std::uint64_t seed = 0;
  std::string input_digest, output_dtype, output_shape;
  // The precision (schema 4): the config's float dtype ("f32", "f16", "bf16", "f64") and math
  // mode. Part of the id only when not the default, so ids written before schema 4 stay valid.
  std::string dtype = "f32", math = "default";
};

struct CaseRunRecord {
  Status status = Status::error;
  std::string detail;  // why ERROR, UNSUPPORTED or SKIPPED
  std::string claim_determinism, claim_source, claim_reason;
  std::string claim_bit_equal_to;  // cross-implementation claim, or empty
  std::int64_t trials = 0, distinct = 0;
  std::optional<std::int64_t> median_ns, min_ns;
  std::string role;  // the variant's role (kernels/registry.h); "" in rows of schema 1-2 stores
  // Canonical JSON of the batch-invariance evidence (harness/core/batch_invariance.h; schema 5),
  // or empty when the config asked for none.
  std::string invariance;
  // Canonical JSON of the check of the first output's values against the serial reference
  // (harness/core/value_check.h; schema 9), or empty (the reference itself, a case that did not
  // run every trial, a row written before schema 9).
  std::string value_check;
};

struct RunInfo {
  std::string id;
  std::string started_at;
  std::string host;
  std::string gpu_uuids;  // JSON array
  std::string arguments;  // JSON
  std::string catalog_digest;
  std::int64_t trials_per_case = 0;
  std::int64_t threads = 0;
  std::string plan_digest;  // what --resume matches: see runner.cpp plan_digest()
};

// A case an interrupted run had already stored, as resuming it needs to know.
struct StoredCase {
  std::string op, config, config_id, variant;
  CaseRunRecord cr;
};

struct ResumedRun {
  std::string id;
  std::int64_t resumes = 0;  // including this one
  std::vector<StoredCase> done;
};

class Store {
 public:
  enum class Mode { read_only, read_write };

  // Opens or (read_write) creates a store. Anything that is not a d9m store of a schema this
  // build understands is refused with Error(environment) before a single byte is written.
  // read_write also migrates an older schema forward (after a backup: see notice()) and marks
  // interrupted every 'running' run whose process is gone (RunLease).
  static Store open(const std::string& path, Mode mode);

  Store(Store&& o) noexcept
      : db_(o.db_), path_(std::move(o.path_)), lease_key_(std::move(o.lease_key_)), dev_(o.dev_), ino_(o.ino_), schema_(o.schema_),
        notice_(std::move(o.notice_)),
        chains_(std::move(o.chains_)), leases_(std::move(o.leases_)), insert_one_(std::move(o.insert_one_)),
        insert_many_(std::move(o.insert_many_)) {
    o.db_ = nullptr;
  }
  Store& operator=(Store&&) = delete;
  ~Store();

  sqlite3* db() const { return db_; }
  const std::string& path() const { return path_; }
  int schema_version() const { return schema_; }  // a read-only store may be older than this build
  const std::string& notice() const { return notice_; }  // what open() did that a user should know

  // The one run whose id starts with `prefix` (reports print the first 12 characters of an id);
  // Error(usage) naming `what` (the option or operand) when no run or several do.
  std::string run_id_with_prefix(const std::string& prefix, const std::string& what) const;

  // Whether the run is really running: its state says so and its writer still holds the lease.
  bool run_alive(const std::string& run_id) const { return RunLease::taken(lease_key_, run_id); }

  std::string begin_run(const Fingerprint& fp, const RunInfo& info);  // returns the run id
  // Takes over the newest interrupted run of the same stack and plan (info's catalogue digest,
  // N, threads and plan digest), marks it running again and returns what it already holds; the
  // hash chain goes on from its last stored row. Empty when there is none.
  // `busy` (when given) counts the matching runs another process holds.
  std::optional<ResumedRun> resume_run(const Fingerprint& fp, const RunInfo& info, int* busy = nullptr);
  void finish_run(const std::string& run_id, const std::string& state);
  // A case's row, its trials and (a pipeline case) its trace, in one transaction; the chain links
  // them in that order, the trace in (trial, step, position) order.
  void put_case(const std::string& run_id, const CaseRecord& c, const CaseRunRecord& cr,
                const std::vector<TrialRecord>& trials, const std::vector<TraceRecord>& trace = {});

  static std::string case_id(const CaseRecord& c);

  // The cache of library versions a fingerprint reads (table library_versions): lookups and writes
  // that never throw, so a cache that fails costs only the load it would have saved. Nothing is
  // cached in a read-only store, or one of a schema without the table. Valid while this Store is.
  LibraryVersionCache library_version_cache();

  // The hash chain of a run (tamper evidence): links in write order, each case's case_runs row
  // then its trials in trial order; link = SHA-256(previous link || canonical JSON of the row).
  // Chain v1 (stores of schema 1 and 2) starts from chain_start(run) and its root is the last
  // link. Chain v2 (every run this build begins) starts from run_head(): the run's immutable
  // columns and its fingerprint's content, so editing them breaks the chain; and its root is a
  // closing link over the facts set when the run ends (state, finished_at, resumes), so editing
  // those breaks the root. runs.chain_root is set once the run has ended.
  static std::string chain_start(const std::string& run_id);
  // SHA-256 of run_head_text(): nullopt when the run (or its fingerprint row) is missing.
  static std::optional<std::string> run_head(sqlite3* db, const std::string& run_id);
  // The canonical JSON run_head() hashes, as read from the store.
  static std::optional<std::string> run_head_text(sqlite3* db, const std::string& run_id);
  // Where a run's chain starts: run_head() for v2, chain_start() for v1 (nullopt: no such run).
  static std::optional<std::string> chain_start_of(sqlite3* db, const std::string& run_id, int chain_version);
  // The root of an ended run: the last link itself for v1, the closing link over
  // closing_row() for v2.
  static std::string chain_root(int chain_version, const std::string& last, const std::string& run_id, const std::string& state,
                                const std::string& finished_at, std::int64_t resumes);
  static std::string closing_row(const std::string& run_id, const std::string& state, const std::string& finished_at,
                                 std::int64_t resumes);
  static std::string chain_link(const std::string& previous, const std::string& canonical_row);
  // The same link as its 32 bytes and 64 hex digits, with no allocation (the trial rows' path).
  static void chain_link_into(std::string_view previous, std::string_view canonical_row, unsigned char bytes[32], char hex[64]);
  static std::string canonical_case_run(const std::string& run_id, const std::string& case_id, std::int64_t seq,
                                        const CaseRunRecord& cr);
  static std::string canonical_trial(const std::string& run_id, const std::string& case_id, const TrialRecord& t);
  // canonical_trial appended to `out` (a buffer reused row after row).
  static void append_canonical_trial(std::string& out, const std::string& run_id, const std::string& case_id, const TrialRecord& t);
  // The same row through nlohmann::json only (the definition canonical_trial's fast path keeps to).
  static std::string canonical_trial_general(const std::string& run_id, const std::string& case_id, const TrialRecord& t);
  static std::string canonical_trace(const std::string& run_id, const std::string& case_id, const TraceRecord& t);

  // Where a run's chain stands as stored: the chain version, the last link (its last case row's
  // last trial, the case row itself when it has no trials, or the start when it has no rows),
  // the sequence number the next case row gets, and how many case rows it has.
  struct ChainState {
    int version = 2;
    std::int64_t next_seq = 0;
    std::string last;
  };
  static ChainState stored_chain(sqlite3* db, const std::string& run_id);

 private:
  Store(sqlite3* db, std::string path, int schema);
  void migrate();
  void mark_dead_runs_interrupted();
  // Error(environment) when the path no longer names the file this store opened: `d9m merge -o`
  // renames its result over OUT, and a process that opened OUT before goes on writing into the
  // replaced file, which nobody reads again. Called under the write lock, before each write.
  void check_not_replaced() const;
  bool replaced() const;  // the same question, without the error
  // Sets the closing facts of a running run and its root, and records them in the manifest, in
  // the caller's transaction. False when the run is not (or no longer) running.
  bool close_run(const std::string& run_id, const ChainState& chain, const std::string& state);
  // A case's trial rows into trial_rows (schema 7) under case row `num`, chained on from `last`.
  void insert_trials(std::int64_t num, const std::string& run_id, const std::string& case_id,
                     const std::vector<TrialRecord>& trials, std::string& last);
  sqlite3* db_;
  std::string path_;
  // The store's real path (symlinks resolved): leases belong to the file, whatever name a
  // process reached it by.
  std::string lease_key_;
  dev_t dev_ = 0;  // the file opened, as stat(2) named it (check_not_replaced)
  ino_t ino_ = 0;
  int schema_;
  std::string notice_;
  std::map<std::string, ChainState> chains_;  // runs this process writes
  std::map<std::string, RunLease> leases_;    // their leases, held until they finish
  // trial_rows' inserts, prepared once: one row, and kTrialRowsPerInsert rows per statement.
  std::unique_ptr<sql::Statement> insert_one_, insert_many_;
};

// Trial rows per INSERT statement (schema 7): SQLite's per-statement cost, shared by 64 rows.
inline constexpr std::size_t kTrialRowsPerInsert = 64;
// 2^32: trial_rows.id is case_runs.num * kTrialKeySpan + trial.
inline constexpr std::int64_t kTrialKeySpan = std::int64_t{1} << 32;
inline constexpr std::int64_t kMaxCaseRowNumber = (std::int64_t{1} << 31) - 1;

std::string utc_now();          // ISO 8601, seconds, "Z"
std::string random_run_id();    // 32 hex digits from the OS's random source

}  // namespace d9m
