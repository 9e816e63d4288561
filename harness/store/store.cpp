#include "harness/store/store.h"
#include "harness/core/json_text.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
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


std::string Store::run_id_with_prefix(const std::string& prefix, const std::string& what) const {
  if (prefix.empty()) fail_usage(what + ": expected a run id or the start of one");
  sql::Statement s(db_, "SELECT id FROM runs WHERE substr(id, 1, length(?1)) = ?1 ORDER BY id LIMIT 3");
  s.bind(1, prefix);
  std::vector<std::string> ids;
  while (s.step()) ids.push_back(s.text(0));
  if (ids.size() == 1) return ids.front();
  if (ids.empty()) fail_usage(what + ": no run in " + path_ + " has an id starting with '" + prefix + "'");
  fail_usage(what + ": more than one run in " + path_ + " has an id starting with '" + prefix + "' (" + ids[0] + ", " + ids[1] +
             (ids.size() > 2 ? ", ..." : "") + "): give more of the id");
}

std::string Store::begin_run(const Fingerprint& fp, const RunInfo& info) {
  // The lease before the row: nobody may see the run 'running' while no one holds it.
  RunLease lease;
  if (!lease.acquire(lease_key_, info.id)) fail_environment(path_ + ": run id " + info.id + " is already in use");
  leases_[info.id] = std::move(lease);
  try {
    sql::Transaction tx(db_);
    check_not_replaced();
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
      check_not_replaced();
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
    check_not_replaced();
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

namespace {

// A case's trial links, computed in order. With many trials, on a thread of its own: SQLite
// inserts row i while the chain hashes row i + k (the chain is sequential, the two are not), so a
// row costs the larger of the two instead of their sum (docs/PERFORMANCE.md, "Store").
class TrialLinks {
 public:
  static constexpr std::size_t kThreadFrom = 256;  // below this a thread costs more than it saves

  TrialLinks(const std::string& run_id, const std::string& case_id, const std::vector<TrialRecord>& trials, std::string start)
      : run_id_(run_id), case_id_(case_id), trials_(trials), bytes_(trials.size()), last_(std::move(start)) {
    if (trials.size() >= kThreadFrom) {
      try {
        worker_ = std::thread([this] { compute(); });
        return;
      } catch (const std::system_error&) {  // no thread to be had: compute them here
      }
    }
    compute();
  }
  ~TrialLinks() {
    stop_.store(true, std::memory_order_relaxed);
    if (worker_.joinable()) worker_.join();
  }
  TrialLinks(const TrialLinks&) = delete;
  TrialLinks& operator=(const TrialLinks&) = delete;

  // Link i's 32 bytes, once computed; rethrows what stopped the computation.
  const unsigned char* bytes(std::size_t i) {
    wait_for(i + 1);
    return bytes_[i].data();
  }
  // The last link (SHA-256 hex), where the case's chain ends.
  const std::string& last() {
    wait_for(trials_.size());
    return last_;
  }

 private:
  void wait_for(std::size_t n) {
    while (done_.load(std::memory_order_acquire) < n) {
      if (failed_.load(std::memory_order_acquire)) {
        if (worker_.joinable()) worker_.join();
        std::rethrow_exception(error_);
      }
      std::this_thread::yield();
    }
  }
  // Only the bytes of each link are kept, and the hex of the latest (the next one hashes it): one
  // row buffer and two hex buffers, no allocation per row.
  void compute() {
    try {
      std::string row;
      char hex[2][64];
      std::string_view previous = last_;
      for (std::size_t i = 0; i < trials_.size() && !stop_.load(std::memory_order_relaxed); ++i) {
        row.clear();
        Store::append_canonical_trial(row, run_id_, case_id_, trials_[i]);
        char* out = hex[i % 2];
        Store::chain_link_into(previous, row, bytes_[i].data(), out);
        previous = std::string_view(out, 64);
        if (i + 1 == trials_.size()) last_.assign(previous);  // before the last link is published
        done_.store(i + 1, std::memory_order_release);
      }
    } catch (...) {
      error_ = std::current_exception();
      failed_.store(true, std::memory_order_release);
    }
  }
  const std::string& run_id_;
  const std::string& case_id_;
  const std::vector<TrialRecord>& trials_;
  std::vector<std::array<unsigned char, 32>> bytes_;
  std::string last_;  // the chain's start until the first link; written by compute() only
  std::atomic<std::size_t> done_{0};
  std::atomic<bool> stop_{false}, failed_{false};
  std::exception_ptr error_;
  std::thread worker_;
};

constexpr int kTrialColumns = 9;

std::string trial_insert_sql(std::size_t rows) {
  std::string sql = "INSERT INTO trial_rows(id, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index,"
                    " chain, choice) VALUES ";
  for (std::size_t r = 0; r < rows; ++r) sql += r ? ",(?,?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?,?)";
  return sql;
}

}  // namespace

void Store::insert_trials(std::int64_t num, const std::string& run_id, const std::string& case_id,
                          const std::vector<TrialRecord>& trials, std::string& last) {
  if (trials.empty()) return;
  if (!insert_one_) {
    insert_one_ = std::make_unique<sql::Statement>(db_, trial_insert_sql(1));
    insert_many_ = std::make_unique<sql::Statement>(db_, trial_insert_sql(kTrialRowsPerInsert));
  }
  // A statement a failed write left stepped cannot be bound again until reset.
  insert_one_->reset();
  insert_many_->reset();
  TrialLinks links(run_id, case_id, trials, last);
  // The digests' bytes bound to one statement (SQLite reads them when it steps).
  unsigned char digests[kTrialRowsPerInsert][16];
  for (std::size_t i = 0; i < trials.size();) {
    const std::size_t rows = trials.size() - i >= kTrialRowsPerInsert ? kTrialRowsPerInsert : 1;
    sql::Statement& ins = rows == 1 ? *insert_one_ : *insert_many_;
    for (std::size_t r = 0; r < rows; ++r) {
      const TrialRecord& t = trials[i + r];
      if (t.trial < 0 || t.trial >= kTrialKeySpan) fail_internal("trial number " + std::to_string(t.trial) + " out of range");
      const int p = static_cast<int>(r) * kTrialColumns;
      ins.bind(p + 1, num * kTrialKeySpan + t.trial);
      if (sql::hex_bytes(t.digest.data(), t.digest.size(), digests[r], 16)) ins.bind_static_blob(p + 2, digests[r], 16);
      else ins.bind_static_text(p + 2, t.digest);  // not d9m-digest-v1 hex: kept as it came
      ins.bind(p + 3, t.elapsed_ns);
      if (t.diff)  // (the diff columns stay NULL otherwise: run() clears every binding)
        ins.bind(p + 4, t.diff->count).bind(p + 5, t.diff->max_abs).bind(p + 6, t.diff->max_ulp).bind(p + 7, t.diff->first_index);
      ins.bind_static_blob(p + 8, links.bytes(i + r), 32);
      ins.bind_static_text(p + 9, t.choice);
    }
    ins.run();
    i += rows;
  }
  last = links.last();
}

void Store::put_case(const std::string& run_id, const CaseRecord& c, const CaseRunRecord& cr,
                     const std::vector<TrialRecord>& trials, const std::vector<TraceRecord>& trace) {
  try {
    sql::Transaction tx(db_);
    check_not_replaced();
    // Only into a run still running, checked under the write lock as close_run checks (found by
    // audit: with its lease file removed, another process took the live run for dead and closed
    // it, and this one went on writing cases after its root, so the store failed verify).
    {
      sql::Statement state(db_, "SELECT state FROM runs WHERE id = ?");
      state.bind(1, run_id);
      if (!state.step() || state.text(0) != "running")
        fail_environment(path_ + ": run " + run_id + " is no longer marked running: another process marked it ended (its lease "
                         "file " + lease_key_ + "-runlease removed meanwhile?); its cases up to the last one stored are kept, "
                         "and `d9m run --resume` continues it");
    }
    sql::Statement(db_,
                   "INSERT OR IGNORE INTO cases(id, op, variant, backend, config, config_id, params, seed,"
                   " input_digest, output_dtype, output_shape, dtype, math) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")
        .bind(1, c.id).bind(2, c.op).bind(3, c.variant).bind(4, c.backend).bind(5, c.config)
        .bind(6, c.config_id).bind(7, c.params).bind(8, static_cast<std::int64_t>(c.seed))
        .bind(9, c.input_digest).bind(10, c.output_dtype).bind(11, c.output_shape).bind(12, c.dtype).bind(13, c.math).run();
    auto known = chains_.find(run_id);
    ChainState chain = known != chains_.end() ? known->second : stored_chain(db_, run_id);
    const std::int64_t seq = chain.next_seq++;
    chain.last = chain_link(chain.last, canonical_case_run(run_id, c.id, seq, cr));
    // The row's number in this file (schema 7): its trials' key range.
    sql::Statement next(db_, "SELECT coalesce(max(num), 0) + 1 FROM case_runs");
    next.step();
    std::int64_t num = next.integer(0);
    // num * 2^32 + trial must fit in 63 bits. Only an edit numbers a row so high (numbers are a
    // local key, and moving one is no fault): then the lowest free number.
    if (num < 1 || num > kMaxCaseRowNumber) {
      sql::Statement gap(db_, "SELECT min(n) FROM (SELECT 1 AS n WHERE NOT EXISTS (SELECT 1 FROM case_runs WHERE num = 1)"
                              " UNION ALL SELECT num + 1 FROM case_runs a WHERE num >= 1 AND num < ? AND NOT EXISTS"
                              " (SELECT 1 FROM case_runs b WHERE b.num = a.num + 1))");
      gap.bind(1, kMaxCaseRowNumber);
      if (!gap.step() || gap.is_null(0)) fail_environment(path_ + ": every case row number from 1 to 2^31 - 1 is taken");
      num = gap.integer(0);
    }
    sql::Statement(db_,
                   "INSERT INTO case_runs(run_id, case_id, status, detail, claim_determinism, claim_source,"
                   " claim_reason, claim_bit_equal_to, trials, distinct_digests, median_ns, min_ns, seq, chain, role, invariance, num,"
                   " value_check) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
        .bind(1, run_id).bind(2, c.id).bind(3, to_string(cr.status)).bind(4, cr.detail)
        .bind(5, cr.claim_determinism).bind(6, cr.claim_source).bind(7, cr.claim_reason).bind(8, cr.claim_bit_equal_to)
        .bind(9, cr.trials).bind(10, cr.distinct).bind(11, cr.median_ns).bind(12, cr.min_ns).bind(13, seq)
        .bind(14, chain.last).bind(15, cr.role).bind(16, cr.invariance).bind(17, num).bind(18, cr.value_check).run();
    insert_trials(num, run_id, c.id, trials, chain.last);
    if (!trace.empty()) {
      sql::Statement tr(db_,
                        "INSERT INTO trace(run_id, case_id, trial, step, position, name, op, variant, inputs, digest, diff_count,"
                        " diff_max_abs, diff_max_ulp, diff_first_index, chain) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
      for (const auto& t : trace) {
        chain.last = chain_link(chain.last, canonical_trace(run_id, c.id, t));
        tr.bind(1, run_id).bind(2, c.id).bind(3, t.trial).bind(4, t.step).bind(5, t.position).bind(6, t.name).bind(7, t.op)
            .bind(8, t.variant).bind(9, t.inputs).bind(10, t.digest);
        if (t.diff) {
          tr.bind(11, t.diff->count).bind(12, t.diff->max_abs).bind(13, t.diff->max_ulp).bind(14, t.diff->first_index);
        } else {
          tr.bind_null(11).bind_null(12).bind_null(13).bind_null(14);
        }
        tr.bind(15, chain.last);
        tr.run();
      }
    }
    tx.commit();
    chains_[run_id] = chain;  // only once the rows are durable
  } catch (const sql::Error& e) {
    fail_environment(path_ + ": cannot store case " + c.op + "/" + c.config + "/" + c.variant + ": " +
                     describe_sqlite_failure(e));
  }
}


}  // namespace d9m

namespace d9m {

// Eight contexts per library at most (the one just written and the seven written before it): a
// directory the loader searches that changes often (a temporary one in LD_LIBRARY_PATH) adds a
// row per run otherwise. The write does not wait for another writer's lock (busy timeout 0): a
// cache is not worth delaying a run's start for.
LibraryVersionCache Store::library_version_cache() {
  LibraryVersionCache cache;
  if (schema_ < 8) return cache;
  sqlite3* db = db_;
  const Store* self = this;
  cache.find = [db](const std::string& library, const std::string& context) -> std::optional<std::string> {
    try {
      sql::Statement s(db, "SELECT entry FROM library_versions WHERE library = ? AND context = ?");
      s.bind(1, library).bind(2, context);
      if (s.step()) return s.text(0);
    } catch (const sql::Error&) {  // unreadable: load the library instead
    }
    return std::nullopt;
  };
  cache.put = [db, self](const std::string& library, const std::string& context, const std::string& entry) {
    struct RestoreBusyTimeout {
      sqlite3* db;
      ~RestoreBusyTimeout() { sqlite3_busy_timeout(db, kStoreBusyTimeoutMs); }
    } restore{db};
    sqlite3_busy_timeout(db, 0);
    try {
      sql::Transaction tx(db);
      // Like every write: never into a file `d9m merge -o` has replaced since this process opened
      // it. Its log would then hold this write under the name of the new file's log, and be
      // applied to the new file (found by review: a run started during a merge left the merged
      // store unreadable).
      if (self->replaced()) return;
      sql::Statement(db, "INSERT OR REPLACE INTO library_versions (library, context, entry, written_at) VALUES (?, ?, ?, ?)")
          .bind(1, library)
          .bind(2, context)
          .bind(3, entry)
          .bind(4, utc_now())
          .run();
      sql::Statement(db,
                     "DELETE FROM library_versions WHERE library = ?1 AND context != ?2 AND context NOT IN "
                     "(SELECT context FROM library_versions WHERE library = ?1 AND context != ?2 ORDER BY written_at DESC, context LIMIT 7)")
          .bind(1, library)
          .bind(2, context)
          .run();
      tx.commit();
    } catch (const sql::Error&) {  // read-only, full or busy: the next run loads the library again
    }
  };
  return cache;
}

}  // namespace d9m
