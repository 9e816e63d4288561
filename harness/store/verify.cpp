#include "harness/store/verify.h"

#include <map>
#include <set>

#include "harness/core/digest.h"
#include "harness/store/sqlite.h"

namespace d9m {

VerifyReport verify_store(const Store& store) {
  VerifyReport v;
  sqlite3* db = store.db();
  auto problem = [&](std::string s) { v.problems.push_back(std::move(s)); };
  try {
    {
      sql::Statement s(db, "PRAGMA integrity_check");
      while (s.step())
        if (s.text(0) != "ok") problem("SQLite integrity check: " + s.text(0));
    }
    {
      sql::Statement s(db, "PRAGMA foreign_key_check");
      while (s.step()) problem("foreign key: a row of " + s.text(0) + " refers to a missing row of " + s.text(2));
    }
    {
      sql::Statement s(db, "SELECT id, canonical FROM fingerprints");
      while (s.step())
        if (sha256_hex(s.text(1)) != s.text(0)) problem("fingerprint " + s.text(0) + ": id does not match its content");
    }
    {
      sql::Statement s(db, "SELECT id, op, variant, backend, config, config_id, params, seed, input_digest,"
                           " output_dtype, output_shape FROM cases");
      while (s.step()) {
        ++v.cases;
        CaseRecord c{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6),
                     static_cast<std::uint64_t>(s.integer(7)), s.text(8), s.text(9), s.text(10)};
        if (Store::case_id(c) != c.id) problem("case " + c.id + " (" + c.op + "/" + c.config + "/" + c.variant + "): id does not match its content");
      }
    }
    std::map<std::string, std::int64_t> trials_per_case;
    std::map<std::string, std::string> run_state;
    {
      sql::Statement s(db, "SELECT id, state, trials_per_case FROM runs");
      while (s.step()) {
        ++v.runs;
        run_state[s.text(0)] = s.text(1);
        trials_per_case[s.text(0)] = s.integer(2);
        if (s.text(1) == "running")
          v.notes.push_back("run " + s.text(0) +
                            (store.run_alive(s.text(0)) ? " is running (its process holds the run lease)"
                                                        : " is marked running but its process is gone: it was interrupted; "
                                                          "`d9m run --resume` continues it, any write to the store marks it"));
        if (s.text(1) == "interrupted")
          v.notes.push_back("run " + s.text(0) + " was interrupted: its rows up to then are evidence; `d9m run --resume` continues it");
      }
    }
    // Each case row of a run against its trials.
    sql::Statement rows(db, "SELECT run_id, case_id, status, trials, distinct_digests FROM case_runs");
    sql::Statement trials(db, "SELECT trial, digest, diff_count FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial");
    while (rows.step()) {
      const std::string run = rows.text(0), cs = rows.text(1), status = rows.text(2);
      const std::string where = "run " + run.substr(0, 8) + " case " + cs.substr(0, 12);
      trials.bind(1, run).bind(2, cs);
      std::int64_t n = 0;
      std::set<std::string> digests;
      std::string first;
      while (trials.step()) {
        ++v.trials;
        if (trials.integer(0) != n) problem(where + ": trial " + std::to_string(n) + " is missing (found trial " + std::to_string(trials.integer(0)) + ")");
        n = trials.integer(0) + 1;
        const std::string d = trials.text(1);
        if (digests.empty()) first = d;
        digests.insert(d);
        const bool differs = d != first;
        if (differs == trials.is_null(2)) problem(where + " trial " + std::to_string(trials.integer(0)) + ": diff stats " + (differs ? "missing for a differing" : "present for an equal") + " digest");
      }
      trials.reset();
      const auto distinct = static_cast<std::int64_t>(digests.size());
      if (rows.integer(3) != n) problem(where + ": records " + std::to_string(rows.integer(3)) + " trials, the store holds " + std::to_string(n));
      if (rows.integer(4) != distinct) problem(where + ": records " + std::to_string(rows.integer(4)) + " distinct digests, the trials have " + std::to_string(distinct));
      const bool evidence = status == "DETERMINISTIC" || status == "NONDETERMINISTIC";
      if (status == "DETERMINISTIC" && distinct != 1) problem(where + ": DETERMINISTIC with " + std::to_string(distinct) + " distinct digests");
      if (status == "NONDETERMINISTIC" && distinct < 2) problem(where + ": NONDETERMINISTIC with " + std::to_string(distinct) + " distinct digest(s)");
      if (!evidence && n != 0) problem(where + ": " + status + " but has trials");
      if (evidence && run_state[run] == "complete" && n != trials_per_case[run])
        problem(where + ": " + std::to_string(n) + " trials in a complete run of " + std::to_string(trials_per_case[run]) + " per case");
    }
    // The hash chain of every run: recomputed from the rows, in the order the run wrote them.
    sql::Statement runs(db, "SELECT id, chain_root FROM runs ORDER BY id");
    sql::Statement cases(db, "SELECT cr.case_id, cr.seq, cr.status, cr.detail, cr.claim_determinism, cr.claim_source,"
                             " cr.claim_reason, cr.claim_bit_equal_to, cr.trials, cr.distinct_digests, cr.median_ns, cr.min_ns,"
                             " cr.chain, c.op, c.config, c.variant, " + std::string(store.schema_version() >= 3 ? "cr.role" : "''") +
                             " FROM case_runs cr LEFT JOIN cases c ON c.id = cr.case_id WHERE cr.run_id = ? ORDER BY cr.seq");
    sql::Statement trial_rows(db, "SELECT trial, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain"
                            " FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial");
    auto opt = [](const sql::Statement& st, int col) {
      return st.is_null(col) ? std::optional<std::int64_t>() : std::optional<std::int64_t>(st.integer(col));
    };
    while (runs.step()) {
      const std::string run = runs.text(0);
      std::string link = Store::chain_start(run), broken;
      std::int64_t expected_seq = 0;
      cases.bind(1, run);
      while (broken.empty() && cases.step()) {
        const std::string cs = cases.text(0);
        const std::string what = "run " + run.substr(0, 8) + ", case " + cases.text(13) + "/" + cases.text(14) + "/" + cases.text(15);
        if (cases.integer(1) != expected_seq) {
          broken = what + ": case sequence jumps from " + std::to_string(expected_seq) + " to " + std::to_string(cases.integer(1));
          break;
        }
        ++expected_seq;
        CaseRunRecord cr{status_from_string(cases.text(2)), cases.text(3), cases.text(4), cases.text(5), cases.text(6), cases.text(7),
                         cases.integer(8), cases.integer(9), opt(cases, 10), opt(cases, 11), cases.text(16)};
        link = Store::chain_link(link, Store::canonical_case_run(run, cs, cases.integer(1), cr));
        if (link != cases.text(12)) {
          broken = what + ": the case row does not match its hash-chain link (edited, or rows before it changed)";
          break;
        }
        trial_rows.bind(1, run).bind(2, cs);
        while (trial_rows.step()) {
          TrialRecord t{trial_rows.integer(0), trial_rows.text(1), trial_rows.integer(2), std::nullopt};
          if (!trial_rows.is_null(3)) t.diff = DiffStats{trial_rows.integer(3), trial_rows.real(4), trial_rows.integer(5), trial_rows.integer(6)};
          link = Store::chain_link(link, Store::canonical_trial(run, cs, t));
          if (link != trial_rows.text(7)) {
            broken = what + ", trial " + std::to_string(t.trial) +
                     ": the row does not match its hash-chain link (edited, inserted, reordered, or a row before it removed)";
            break;
          }
        }
        trial_rows.reset();
      }
      cases.reset();
      if (broken.empty() && !runs.is_null(1) && runs.text(1) != link)
        broken = "run " + run.substr(0, 8) + ": the chain root does not match the rows (rows removed or added at the end)";
      if (!broken.empty()) problem("hash chain: " + broken);
      else v.chain_roots.push_back(run + " " + (runs.is_null(1) ? std::string("(no root: run not ended)") : runs.text(1)));
    }
  } catch (const sql::Error& e) {
    problem(std::string("cannot read the store: ") + e.what());
  } catch (const std::invalid_argument& e) {
    problem(std::string("unreadable row: ") + e.what());
  }
  return v;
}

}  // namespace d9m
