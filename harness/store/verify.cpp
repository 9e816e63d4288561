#include "harness/store/verify.h"

#include <map>
#include <set>

#include "harness/core/digest.h"
#include "harness/core/embedded.h"
#include "harness/core/error.h"
#include "harness/core/value_check.h"
#include "harness/store/snapshot.h"
#include "harness/store/sqlite.h"

namespace d9m {

namespace {

bool is_table(sqlite3* db, const std::string& name) {
  sql::Statement t(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  t.bind(1, name);
  return t.step();
}

void check_sqlite(sqlite3* db, VerifyReport& v) {
  sql::Statement ic(db, "PRAGMA integrity_check");
  while (ic.step())
    if (ic.text(0) != "ok") v.problems.push_back("SQLite integrity check: " + ic.text(0));
  sql::Statement fk(db, "PRAGMA foreign_key_check");
  while (fk.step()) v.problems.push_back("foreign key: a row of " + fk.text(0) + " refers to a missing row of " + fk.text(2));
}

// Every value of the type its column declares. d9m's readers convert what they read to that
// type, so a value of another type (2.25 in an INTEGER column, read as 2) would be an edit that
// neither the chains nor any report could see.
void check_storage_types(sqlite3* db, VerifyReport& v) {
  static const std::map<std::string, std::string> kStored = {{"INTEGER", "integer"}, {"TEXT", "text"}, {"REAL", "real"}};
  for (const std::string table :
       {"fingerprints", "runs", "cases", "case_runs", "trials", "trial_rows", "trace", "manifest", "manifest_origin"}) {
    if (!is_table(db, table)) continue;  // a table an older schema lacks, or (schema 7) the trials view
    std::vector<std::pair<std::string, std::string>> columns;
    {
      sql::Statement c(db, "SELECT name, upper(type) FROM pragma_table_info(?)");
      c.bind(1, table);
      while (c.step())
        if (kStored.count(c.text(1))) columns.emplace_back(c.text(0), c.text(1));
    }
    if (columns.empty()) continue;
    std::string counts;  // one scan of the table counts every column's misfits
    for (const auto& [name, type] : columns)
      counts += std::string(counts.empty() ? "" : ", ") + "coalesce(sum(typeof(\"" + name + "\") NOT IN ('" + kStored.at(type) +
                "', 'null')), 0)";
    sql::Statement n(db, "SELECT " + counts + " FROM \"" + table + "\"");
    if (!n.step()) continue;
    for (std::size_t i = 0; i < columns.size(); ++i)
      if (const std::int64_t bad = n.integer(static_cast<int>(i)); bad > 0)
        v.problems.push_back(table + "." + columns[i].first + ": " + std::to_string(bad) + " row(s) hold a value that is not " +
                             columns[i].second + " (an edit d9m's readers would not see)");
  }
}

// Schema 7's trial_rows: each row keyed into a case row that exists, its digest and link either
// the bytes d9m writes or text kept as it came (never another type, nor bytes of another length),
// every case row numbered, and every trace row's trial stored. (Up to schema 6, foreign keys said
// the first and the last; a key computed from a number cannot be one.)
void check_trial_rows(sqlite3* db, int schema, VerifyReport& v) {
  if (schema < 7) return;
  if (!is_table(db, "trial_rows")) {
    v.problems.push_back("schema: trial_rows is missing (renamed or dropped): the store's trial rows cannot be checked");
    return;
  }
  sql::Statement n(db, "SELECT"
                       // (NOT IN: one look-up table of the numbers, also when their index is gone)
                       " (SELECT count(*) FROM trial_rows t WHERE t.id >> 32 NOT IN (SELECT num FROM case_runs) OR t.id < 0),"
                       " (SELECT count(*) FROM trial_rows WHERE NOT (typeof(digest) = 'text' OR (typeof(digest) = 'blob' AND length(digest) = 16))),"
                       " (SELECT count(*) FROM trial_rows WHERE NOT (typeof(chain) = 'text' OR (typeof(chain) = 'blob' AND length(chain) = 32))),"
                       " (SELECT count(*) FROM case_runs WHERE typeof(num) != 'integer' OR num < 1 OR num > 2147483647),"
                       " (SELECT count(*) FROM trace r WHERE NOT EXISTS (SELECT 1 FROM case_runs cr JOIN trial_rows t"
                       "   ON t.id = cr.num * 4294967296 + r.trial WHERE cr.run_id = r.run_id AND cr.case_id = r.case_id))");
  if (!n.step()) return;
  const char* const what[] = {
      "belong to no case row (their key names a case row number that does not exist)",
      "hold a digest that is neither its 16 bytes nor text",
      "hold a chain link that is neither its 32 bytes nor text",
  };
  for (int i = 0; i < 3; ++i)
    if (n.integer(i) > 0) v.problems.push_back("trial_rows: " + std::to_string(n.integer(i)) + " row(s) " + what[i]);
  if (n.integer(3) > 0)
    v.problems.push_back("case_runs: " + std::to_string(n.integer(3)) + " row(s) without a row number (num) from 1 to 2^31 - 1, so no trials");
  if (n.integer(4) > 0)
    v.problems.push_back("trace: " + std::to_string(n.integer(4)) + " row(s) of a trial that is not stored (a trial deleted?)");
}

// Schema 7's readers read trial rows through the trials view: it and its triggers must be d9m's
// own, as the schema file defines them (a view redefined could show the readers other rows than
// the table holds; a changed trigger could route edits elsewhere).
void check_trials_view(sqlite3* db, int schema, VerifyReport& v) {
  if (schema < 7) return;
  sqlite3* ref = nullptr;
  std::map<std::string, std::string> want;
  if (sqlite3_open(":memory:", &ref) == SQLITE_OK) {
    try {
      sql::exec(ref, embedded::store_schema_sql());
      // The trials view and its triggers, the table under it and the index of its keys: each is
      // created from schema 7's block, by a new store and by the migration alike.
      sql::Statement d(ref, "SELECT name, sql FROM sqlite_master WHERE tbl_name IN ('trials', 'trial_rows')"
                            " OR name = 'case_runs_by_num'");
      while (d.step()) want[d.text(0)] = d.text(1);
    } catch (const sql::Error&) {
    }
  }
  sqlite3_close(ref);
  if (want.empty()) fail_internal("the store schema's trials view cannot be instantiated");
  sql::Statement have(db, "SELECT name, sql FROM sqlite_master WHERE name = ?");
  for (const auto& [name, definition] : want) {
    have.bind(1, name);
    if (!have.step()) v.problems.push_back("schema: " + name + " is missing (d9m's readers read trial rows through it)");
    else if (have.text(1) != definition) v.problems.push_back("schema: " + name + " is not d9m's definition (redefined)");
    have.reset();
  }
  // A trigger d9m does not define could change rows as d9m writes or reads them.
  sql::Statement triggers(db, "SELECT name FROM sqlite_master WHERE type = 'trigger'");
  while (triggers.step())
    if (!want.count(triggers.text(0))) v.problems.push_back("schema: trigger " + triggers.text(0) + " is not d9m's");
}

// Content-addressed rows must match their keys, and every one must be used: d9m writes a
// fingerprint only with its run and a case only with its case row, so an unused one is what a
// deleted run leaves behind, or an inserted row.
void check_content_addressed(sqlite3* db, VerifyReport& v) {
  sql::Statement f(db, "SELECT id, canonical, EXISTS (SELECT 1 FROM runs r WHERE r.fingerprint_id = f.id) FROM fingerprints f");
  while (f.step()) {
    if (sha256_hex(f.text(1)) != f.text(0)) v.problems.push_back("fingerprint " + f.text(0) + ": id does not match its content");
    if (!f.integer(2)) v.problems.push_back("fingerprint " + f.text(0) + ": no run uses it (a run deleted, or a row inserted)");
  }
  const bool precision = has_column(db, "cases", "dtype");  // schema 4
  sql::Statement c(db, "SELECT id, op, variant, backend, config, config_id, params, seed, input_digest, output_dtype,"
                       " output_shape, EXISTS (SELECT 1 FROM case_runs cr WHERE cr.case_id = c.id), " +
                           std::string(precision ? "dtype, math" : "'f32', 'default'") + " FROM cases c");
  while (c.step()) {
    ++v.cases;
    CaseRecord r{c.text(0), c.text(1), c.text(2), c.text(3), c.text(4), c.text(5), c.text(6),
                 static_cast<std::uint64_t>(c.integer(7)), c.text(8), c.text(9), c.text(10), c.text(12), c.text(13)};
    const std::string what = "case " + r.id + " (" + r.op + "/" + r.config + "/" + r.variant + ")";
    if (Store::case_id(r) != r.id) v.problems.push_back(what + ": id does not match its content");
    if (!c.integer(11)) v.problems.push_back(what + ": no run uses it (a run deleted, or a row inserted)");
  }
}

// A pipeline case's trace rows: each (step, position) of a later trial has diff stats exactly when
// its digest differs from trial 0's, and every trial traced the same (step, position)s. (A
// program's trace, from d9m exec, has no diff stats and may take other paths in other trials.)
void check_trace_rows(sqlite3* db, VerifyReport& v) {
  if (!has_column(db, "trace", "chain")) return;
  sql::Statement rows(db, "SELECT t.run_id, t.case_id, t.trial, t.step, t.position, t.digest, t.diff_count IS NULL,"
                          " (t.diff_count IS NULL) + (t.diff_max_abs IS NULL) + (t.diff_max_ulp IS NULL) + (t.diff_first_index IS NULL),"
                          " f.digest FROM trace t JOIN cases c ON c.id = t.case_id AND substr(c.op, 1, 9) = 'pipeline:'"
                          " LEFT JOIN trace f ON f.run_id = t.run_id AND f.case_id = t.case_id AND f.trial = 0"
                          " AND f.step = t.step AND f.position = t.position");
  while (rows.step()) {
    const std::string where = "run " + rows.text(0).substr(0, 8) + " case " + rows.text(1).substr(0, 12) + " trace of trial " +
                              std::to_string(rows.integer(2)) + " step " + std::to_string(rows.integer(3)) + " op " +
                              std::to_string(rows.integer(4));
    if (rows.is_null(8)) {
      v.problems.push_back(where + ": trial 0 has no row at this step and op (trials traced different ops)");
      continue;
    }
    const bool differs = rows.text(5) != rows.text(8);
    if (differs == static_cast<bool>(rows.integer(6)))
      v.problems.push_back(where + ": diff stats " + (differs ? "missing for a differing" : "present for an equal") + " digest");
    if (rows.integer(7) % 4 != 0) v.problems.push_back(where + ": diff stats only partly set");
  }
  sql::Statement counts(db, "SELECT t.run_id, t.case_id, t.trial, count(*) FROM trace t JOIN cases c ON c.id = t.case_id"
                            " WHERE substr(c.op, 1, 9) = 'pipeline:' GROUP BY t.run_id, t.case_id, t.trial ORDER BY t.run_id, t.case_id, t.trial");
  std::map<std::pair<std::string, std::string>, std::int64_t> per_case;
  while (counts.step()) {
    const auto [it, fresh] = per_case.try_emplace({counts.text(0), counts.text(1)}, counts.integer(3));
    if (!fresh && it->second != counts.integer(3))
      v.problems.push_back("run " + counts.text(0).substr(0, 8) + " case " + counts.text(1).substr(0, 12) + ": trial " +
                           std::to_string(counts.integer(2)) + " has " + std::to_string(counts.integer(3)) + " trace rows, trial 0 " +
                           std::to_string(it->second));
  }
}

void note_run_states(const Store& store, const std::vector<RunFacts>& runs, VerifyReport& v) {
  for (const auto& r : runs) {
    if (r.state == "running")
      v.notes.push_back("run " + r.id +
                        (store.run_alive(r.id) ? " is running (its process holds the run lease)"
                                               : " is marked running but its process is gone: it was interrupted; "
                                                 "`d9m run --resume` continues it, any write to the store marks it"));
    if (r.state == "interrupted")
      v.notes.push_back("run " + r.id + " was interrupted: its rows up to then are evidence; `d9m run --resume` continues it");
  }
}

// Each case row's value check (schema 9) says what d9m writes, and holds together: an outcome its
// own numbers contradict, or a check on the reference (which defines the values), is an edit the
// unkeyed chain cannot show once its links are recomputed.
void check_value_checks(sqlite3* db, int schema, VerifyReport& v) {
  if (schema < 9) return;
  sql::Statement rows(db, "SELECT run_id, case_id, role, value_check FROM case_runs WHERE value_check != ''");
  while (rows.step()) {
    const std::string where = "run " + rows.text(0).substr(0, 8) + " case " + rows.text(1).substr(0, 12);
    if (rows.text(2) == "reference") v.problems.push_back(where + ": a value check on the reference, which defines the values");
    try {
      ValueCheck::from_json_text(rows.text(3));
    } catch (const std::invalid_argument& e) {
      v.problems.push_back(where + ": " + e.what());
    }
  }
}

// Each case row of a run against its trials.
void check_case_rows(sqlite3* db, const std::vector<RunFacts>& runs, VerifyReport& v) {
  std::map<std::string, const RunFacts*> by_id;
  for (const auto& r : runs) by_id[r.id] = &r;
  sql::Statement rows(db, "SELECT run_id, case_id, status, trials, distinct_digests FROM case_runs");
  sql::Statement trials(db, "SELECT trial, digest, diff_count, (diff_count IS NULL) + (diff_max_abs IS NULL) + (diff_max_ulp IS NULL) +"
                           " (diff_first_index IS NULL) FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial");
  while (rows.step()) {
    const std::string run = rows.text(0), cs = rows.text(1), status = rows.text(2);
    const std::string where = "run " + run.substr(0, 8) + " case " + cs.substr(0, 12);
    trials.bind(1, run).bind(2, cs);
    std::int64_t n = 0;
    std::set<std::string> digests;
    std::string first;
    while (trials.step()) {
      ++v.trials;
      if (trials.integer(0) != n) v.problems.push_back(where + ": trial " + std::to_string(n) + " is missing (found trial " + std::to_string(trials.integer(0)) + ")");
      n = trials.integer(0) + 1;
      const std::string d = trials.text(1);
      if (digests.empty()) first = d;
      digests.insert(d);
      const bool differs = d != first;
      if (differs == trials.is_null(2)) v.problems.push_back(where + " trial " + std::to_string(trials.integer(0)) + ": diff stats " + (differs ? "missing for a differing" : "present for an equal") + " digest");
      // The chain covers the diff stats through diff_count: the others are all set with it or none is.
      if (trials.integer(3) % 4 != 0) v.problems.push_back(where + " trial " + std::to_string(trials.integer(0)) + ": diff stats only partly set");
    }
    trials.reset();
    const auto distinct = static_cast<std::int64_t>(digests.size());
    if (rows.integer(3) != n) v.problems.push_back(where + ": records " + std::to_string(rows.integer(3)) + " trials, the store holds " + std::to_string(n));
    if (rows.integer(4) != distinct) v.problems.push_back(where + ": records " + std::to_string(rows.integer(4)) + " distinct digests, the trials have " + std::to_string(distinct));
    const bool evidence = status == "DETERMINISTIC" || status == "NONDETERMINISTIC";
    if (status == "DETERMINISTIC" && distinct != 1) v.problems.push_back(where + ": DETERMINISTIC with " + std::to_string(distinct) + " distinct digests");
    if (status == "NONDETERMINISTIC" && distinct < 2) v.problems.push_back(where + ": NONDETERMINISTIC with " + std::to_string(distinct) + " distinct digest(s)");
    if (!evidence && n != 0) v.problems.push_back(where + ": " + status + " but has trials");
    const auto it = by_id.find(run);
    if (evidence && it != by_id.end() && it->second->state == "complete" && n != it->second->trials_per_case)
      v.problems.push_back(where + ": " + std::to_string(n) + " trials in a complete run of " + std::to_string(it->second->trials_per_case) + " per case");
  }
}

// One run's chain recomputed from its rows, in the order the run wrote them. Returns what broke
// it (empty: the chain holds) and leaves the last link in `link`.
class ChainWalker {
 public:
  // `schema`: the store's; case rows have a role from schema 3 on.
  ChainWalker(sqlite3* db, int schema)
      : cases_(db, "SELECT cr.case_id, cr.seq, cr.status, cr.detail, cr.claim_determinism, cr.claim_source,"
                   " cr.claim_reason, cr.claim_bit_equal_to, cr.trials, cr.distinct_digests, cr.median_ns, cr.min_ns,"
                   " cr.chain, c.op, c.config, c.variant, " + std::string(schema >= 3 ? "cr.role" : "''") + ", " +
                   std::string(schema >= 5 ? "cr.invariance" : "''") + ", " + std::string(schema >= 9 ? "cr.value_check" : "''") +
                   " FROM case_runs cr LEFT JOIN cases c ON c.id = cr.case_id WHERE cr.run_id = ? ORDER BY cr.seq"),
        trials_(db, "SELECT trial, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain, " +
                    std::string(schema >= 5 ? "choice" : "''") + " FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial"),
        // Stores before schema 6 have no traces: a query that finds nothing stands in.
        trace_(db, schema >= 6 ? "SELECT trial, step, position, name, op, variant, inputs, digest, diff_count, diff_max_abs,"
                                 " diff_max_ulp, diff_first_index, chain FROM trace WHERE run_id = ? AND case_id = ?"
                                 " ORDER BY trial, step, position"
                               : "SELECT 0, 0, 0, '', '', '', '', '', NULL, NULL, NULL, NULL, '' WHERE ? IS NULL AND ? IS NULL") {}

  // `after_case`, where given, gets the link after each case in turn (its trials and trace
  // included), the chain's start first: [k] is the link a run of k cases ended on.
  std::string walk(const std::string& run, std::string& link, std::vector<std::string>* after_case = nullptr) {
    std::string broken;
    if (after_case) after_case->assign(1, link);
    std::int64_t expected_seq = 0;
    cases_.bind(1, run);
    while (broken.empty() && cases_.step()) {
      const std::string cs = cases_.text(0);
      const std::string what = "run " + run.substr(0, 8) + ", case " + cases_.text(13) + "/" + cases_.text(14) + "/" + cases_.text(15);
      if (cases_.integer(1) != expected_seq) {
        broken = what + ": case sequence jumps from " + std::to_string(expected_seq) + " to " + std::to_string(cases_.integer(1));
        break;
      }
      ++expected_seq;
      CaseRunRecord cr{status_from_string(cases_.text(2)), cases_.text(3), cases_.text(4), cases_.text(5), cases_.text(6), cases_.text(7),
                       cases_.integer(8), cases_.integer(9), opt(cases_, 10), opt(cases_, 11), cases_.text(16), cases_.text(17),
                       cases_.text(18)};
      link = Store::chain_link(link, Store::canonical_case_run(run, cs, cases_.integer(1), cr));
      if (link != cases_.text(12)) {
        broken = what + ": the case row does not match its hash-chain link (edited, or rows before it or the run's metadata changed)";
        break;
      }
      broken = walk_trials(run, cs, what, link);
      if (broken.empty()) broken = walk_trace(run, cs, what, link);
      if (after_case) after_case->push_back(link);
    }
    cases_.reset();
    return broken;
  }

 private:
  static std::optional<std::int64_t> opt(const sql::Statement& st, int col) {
    return st.is_null(col) ? std::optional<std::int64_t>() : std::optional<std::int64_t>(st.integer(col));
  }
  std::string walk_trials(const std::string& run, const std::string& cs, const std::string& what, std::string& link) {
    std::string broken;
    trials_.bind(1, run).bind(2, cs);
    while (trials_.step()) {
      TrialRecord t{trials_.integer(0), trials_.text(1), trials_.integer(2), std::nullopt, trials_.text(8)};
      if (!trials_.is_null(3)) t.diff = DiffStats{trials_.integer(3), trials_.real(4), trials_.integer(5), trials_.integer(6)};
      link = Store::chain_link(link, Store::canonical_trial(run, cs, t));
      if (link != trials_.text(7)) {
        broken = what + ", trial " + std::to_string(t.trial) +
                 ": the row does not match its hash-chain link (edited, inserted, reordered, or a row before it removed)";
        break;
      }
    }
    trials_.reset();
    return broken;
  }
  std::string walk_trace(const std::string& run, const std::string& cs, const std::string& what, std::string& link) {
    std::string broken;
    trace_.bind(1, run).bind(2, cs);
    while (trace_.step()) {
      TraceRecord t{trace_.integer(0), trace_.integer(1), trace_.integer(2), trace_.text(3), trace_.text(4),
                    trace_.text(5),    trace_.text(6),    trace_.text(7),    std::nullopt};
      if (!trace_.is_null(8)) t.diff = DiffStats{trace_.integer(8), trace_.real(9), trace_.integer(10), trace_.integer(11)};
      link = Store::chain_link(link, Store::canonical_trace(run, cs, t));
      if (link != trace_.text(12)) {
        broken = what + ", trace of trial " + std::to_string(t.trial) + " step " + std::to_string(t.step) + " op " +
                 std::to_string(t.position) + ": the row does not match its hash-chain link (edited, inserted, reordered, or a row before it removed)";
        break;
      }
    }
    trace_.reset();
    return broken;
  }
  sql::Statement cases_, trials_, trace_;
};

// The chain of one run: its rows from its start (its metadata, for v2), then its root.
void check_chain(sqlite3* db, ChainWalker& walker, const RunFacts& r, const std::vector<manifest::EndedFacts>& ended,
                 VerifyReport& v) {
  const std::string name = "run " + r.id.substr(0, 8);
  auto fault = [&](const std::string& why) { v.problems.push_back("hash chain: " + name + ": " + why); };
  const auto start = Store::chain_start_of(db, r.id, r.chain_version);
  if (!start) {
    fault(r.chain_version == 2 ? "its metadata cannot be read (its fingerprint row is missing)"
                               : "unknown chain version " + std::to_string(r.chain_version));
    return;
  }
  std::string link = *start;
  std::vector<std::string> after_case;
  const std::string broken = walker.walk(r.id, link, &after_case);
  if (!broken.empty()) {
    v.problems.push_back("hash chain: " + broken);
    return;
  }
  // Every earlier end of a run that was resumed since: its root was taken over the rows it had
  // then, which a resume only adds to (found by audit: a case removed from an interrupted run's
  // end was run again by `run --resume`, and only the latest end was checked, so verify said OK).
  // The latest end (resumptions as now) is checked against the closing facts below and by the
  // manifest's account.
  for (const auto& e : ended) {
    if (e.resumes >= r.resumes) continue;
    const std::string when = "when it ended " + e.state + " before resumption " + std::to_string(e.resumes + 1);
    if (e.cases < 0 || static_cast<std::size_t>(e.cases) >= after_case.size()) {
      fault("it had " + std::to_string(e.cases) + " cases " + when + ", and has " + std::to_string(after_case.size() - 1) +
            " now (cases removed)");
      continue;
    }
    if (!e.root || *e.root != Store::chain_root(r.chain_version, after_case[static_cast<std::size_t>(e.cases)], r.id, e.state,
                                                e.finished_at.value_or(""), e.resumes))
      fault("its first " + std::to_string(e.cases) + " cases are not the rows it had " + when +
            " (rows edited or removed since, and cases run again by a resume?)");
  }
  if (r.state == "running") {
    if (r.root) return fault("marked running, yet it has a chain root (its state edited?)");
    v.chain_roots.push_back(r.id + " (no root: run not ended)");
    return;
  }
  // A run that ended has a root: without one, rows removed from its end would go unnoticed.
  if (!r.root) return fault("it has ended (" + r.state + ") but has no chain root (rows removed at its end and the root cleared?)");
  const std::string want = Store::chain_root(r.chain_version, link, r.id, r.state, r.finished_at.value_or(""), r.resumes);
  if (*r.root != want)
    return fault(r.chain_version == 1 ? "the chain root does not match the rows (rows removed or added at the end)"
                                       : "the chain root does not match the rows and the closing facts (rows removed or added "
                                         "at the end, or its state, finish time or resumptions edited)");
  v.chain_roots.push_back(r.id + " " + *r.root);
}

// The manifest's own chains: every event matches its link and follows an event that is there.
void check_manifest_chains(sqlite3* db, const std::vector<ManifestEvent>& events, VerifyReport& v) {
  {
    sql::Statement o(db, "SELECT id FROM manifest_origin");
    int n = 0;
    while (o.step()) ++n;
    if (n != 1) v.problems.push_back("manifest: the store names " + std::to_string(n) + " origins of its own (one expected)");
  }
  std::map<std::string, const ManifestEvent*> by_link;
  for (const auto& e : events) by_link[e.link] = &e;
  const std::set<std::string> kinds(std::begin(manifest::kEvents), std::end(manifest::kEvents));
  for (const auto& e : events) {
    const std::string what = "manifest: event " + e.origin.substr(0, 8) + "#" + std::to_string(e.seq) + " (" + e.event + " of run " +
                             e.run_id.substr(0, 8) + ")";
    if (!kinds.count(e.event)) v.problems.push_back(what + ": unknown event");
    if (manifest::link_of(e) != e.link) {
      v.problems.push_back(what + ": does not match its link (edited)");
      continue;
    }
    if (e.seq == 0) {
      if (e.prev != manifest::genesis(e.origin)) v.problems.push_back(what + ": the first event of its origin does not start from its genesis");
      continue;
    }
    const auto p = by_link.find(e.prev);
    if (p == by_link.end() || p->second->origin != e.origin || p->second->seq != e.seq - 1)
      v.problems.push_back(what + ": the event before it is missing (removed)");
  }
}

// Runs against the manifest: every run it names is there, and every run is as it recorded.
void check_runs_in_manifest(sqlite3* db, const std::vector<RunFacts>& runs, const std::vector<ManifestEvent>& events,
                            VerifyReport& v) {
  std::map<std::string, std::vector<const ManifestEvent*>> by_run;
  for (const auto& e : events) by_run[e.run_id].push_back(&e);
  std::set<std::string> present;
  for (const auto& r : runs) present.insert(r.id);
  for (const auto& [id, evs] : by_run)
    if (!present.count(id))
      v.problems.push_back("manifest: run " + id + " was recorded (" + evs.front()->event + ") but is not in the store (deleted)");
  std::int64_t v1 = 0;
  for (const auto& r : runs) {
    v1 += r.chain_version == 1;
    for (const auto& p : manifest::account_for(r, Store::run_head(db, r.id), by_run[r.id]).problems)
      v.problems.push_back("manifest: run " + r.id + ": " + p);
  }
  if (v1)
    v.notes.push_back(std::to_string(v1) + " run(s) use chain v1 (written before schema 3): their chains do not cover their "
                      "metadata; the manifest does, since the store recorded them");
}

void check_manifest(sqlite3* db, const Store& store, const std::vector<RunFacts>& runs, VerifyReport& v) {
  if (!manifest::present(db)) {
    // Only a store written before schema 3 may lack it, and such a store has only chain v1 runs and
    // no runs.chain_version column (the migration to schema 3 adds both the column and the
    // manifest): without this, dropping the table, and setting the version back, hid every run
    // deleted whole (found by review, in a store migrated from schema 1 whose newer run was cut).
    std::int64_t v2 = 0;
    for (const auto& r : runs) v2 += r.chain_version != 1;
    if (store.schema_version() >= 3 || v2 || has_column(db, "runs", "chain_version")) {
      v.problems.push_back("manifest: the table is missing (dropped), in a store of schema " + std::to_string(store.schema_version()) +
                           (v2 ? " with " + std::to_string(v2) + " run(s) of chain v2, which only a store with a manifest writes"
                               : " laid out as schema 3 or later (runs.chain_version)") +
                           ": whole runs deleted could not be seen");
      return;
    }
    v.notes.push_back("a store of schema " + std::to_string(store.schema_version()) +
                      ": its runs use chain v1 and it has no manifest, so edited run metadata (host, versions, catalogue, "
                      "start time, fingerprint) and whole runs deleted cannot be detected; any write to it, or `d9m merge`, "
                      "migrates it and records its runs as they are now");
    return;
  }
  const auto events = manifest::read_all(db);
  check_manifest_chains(db, events, v);
  check_runs_in_manifest(db, runs, events, v);
}

}  // namespace

VerifyReport verify_store(const Store& store) {
  VerifyReport v;
  sqlite3* db = store.db();
  const ReadSnapshot snapshot(store);
  try {
    check_sqlite(db, v);
    check_storage_types(db, v);
    check_content_addressed(db, v);
    check_trial_rows(db, store.schema_version(), v);
    check_trials_view(db, store.schema_version(), v);
    const std::vector<RunFacts> runs = read_run_facts(db);
    v.runs = static_cast<std::int64_t>(runs.size());
    note_run_states(store, runs, v);
    check_case_rows(db, runs, v);
    check_value_checks(db, store.schema_version(), v);
    check_trace_rows(db, v);
    ChainWalker walker(db, store.schema_version());
    const std::vector<ManifestEvent> events = manifest::present(db) ? manifest::read_all(db) : std::vector<ManifestEvent>{};
    std::map<std::string, std::vector<const ManifestEvent*>> events_of;
    for (const auto& e : events) events_of[e.run_id].push_back(&e);
    for (const auto& r : runs) check_chain(db, walker, r, manifest::ended_facts(events_of[r.id]), v);
    check_manifest(db, store, runs, v);
    v.evidence = evidence_of(db);
  } catch (const sql::Error& e) {
    v.problems.push_back(std::string("cannot read the store: ") + e.what());
  } catch (const std::invalid_argument& e) {
    v.problems.push_back(std::string("unreadable row: ") + e.what());
  }
  return v;
}

VerifyReport require_sound(const Store& store, const std::string& what, const std::string& tail) {
  VerifyReport v = verify_store(store);
  if (!v.problems.empty())
    fail_store_fault(store.path() + ": does not verify, so it is not " + what + ": " + v.problems.front() +
                     (v.problems.size() > 1 ? " (and " + std::to_string(v.problems.size() - 1) + " more)" : "") +
                     ". `d9m verify --db " + store.path() + "` lists every fault" + tail);
  return v;
}

}  // namespace d9m
