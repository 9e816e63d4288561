#include "harness/verify.h"

#include <map>
#include <set>

#include "harness/digest.h"
#include "harness/sqlite.h"

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
        if (s.text(1) == "running") v.notes.push_back("run " + s.text(0) + " is marked running (still going, or it died)");
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
  } catch (const sql::Error& e) {
    problem(std::string("cannot read the store: ") + e.what());
  }
  return v;
}

}  // namespace d9m
