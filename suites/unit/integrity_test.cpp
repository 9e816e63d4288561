// Tamper evidence, as an auditor would test it: every row of every table of a small store edited
// (each column), deleted, and joined by a forged row, each on a fresh copy with the tools anyone
// has (SQL, foreign keys and CHECK constraints off); verify must catch each, except what
// docs/ATTESTATION.md lists. Then the items of issue 11 one by one: a truncated run, run metadata
// and whole runs, the manifest under merge and resume, and migration from schema 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/store/manifest.h"
#include "harness/store/merge.h"
#include "harness/store/snapshot.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"
#include "scratch_dir.h"
#include "source_dir.h"

namespace d9m {
namespace {

namespace fs = std::filesystem;

class IntegrityTest : public test::ScratchDirTest {
 protected:
  IntegrityTest() : ScratchDirTest("integrity") {}

  // A store's bytes replace the file whole: a -wal or -shm left beside it would be read with it.
  static void write(const std::string& p, const std::string& bytes) {
    for (const char* s : {"-wal", "-shm"}) fs::remove(p + s);
    ScratchDirTest::write(p, bytes);
  }

  // A run of `cases` cases of 3 trials each on stack `stack`: the first case has a differing
  // trial (diff stats set), the last one is SKIPPED (no trials).
  static std::string add_run(Store& s, int stack, int cases, bool finish = true) {
    const Fingerprint fp = fingerprint_from_json({{"stack", stack}});
    RunInfo info{random_run_id(), utc_now(), "host" + std::to_string(stack), "[]", "[\"d9m\",\"run\"]", "catalog", 3, 2, "plan"};
    const std::string run = s.begin_run(fp, info);
    for (int c = 0; c < cases; ++c) {
      CaseRecord rec{"", "op", "cpu.v" + std::to_string(c), "cpu", "cfg", "cid", "{}", 1, "in", "float32", "[1]"};
      rec.id = Store::case_id(rec);
      const bool skipped = c == cases - 1 && cases > 1;
      std::vector<TrialRecord> ts;
      if (!skipped)
        for (int t = 0; t < 3; ++t)
          ts.push_back({t, c == 0 && t == 2 ? "d2" : "d1", 10 + t,
                        c == 0 && t == 2 ? std::optional<DiffStats>(DiffStats{1, 0.5, 2, 3}) : std::nullopt});
      CaseRunRecord cr{skipped ? Status::skipped : (c == 0 ? Status::nondeterministic : Status::deterministic),
                       skipped ? "no device" : "", "deterministic", "design", "r", "",
                       skipped ? 0 : 3, skipped ? 0 : (c == 0 ? 2 : 1),
                       skipped ? std::nullopt : std::optional<std::int64_t>(11), skipped ? std::nullopt : std::optional<std::int64_t>(10)};
      s.put_case(run, rec, cr, ts);
    }
    if (finish) s.finish_run(run, "complete");
    return run;
  }

  // Two complete runs on two stacks, checkpointed into one file.
  std::string make_store(const std::string& name) {
    const std::string p = path(name);
    {
      Store s = Store::open(p, Store::Mode::read_write);
      run_a_ = add_run(s, 1, 3);
      run_b_ = add_run(s, 2, 3);
      sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
    }
    return p;
  }

  // The store's problems after `sql` ran on a fresh copy of `pristine`, as an attacker with
  // SQLite runs it: no foreign keys, no CHECK constraints.
  std::vector<std::string> problems_after(const std::string& p, const std::string& pristine, const std::string& sql) {
    write(p, pristine);
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
    sql::exec(db, "PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON;");
    sql::exec(db, sql);
    const int changed = sqlite3_total_changes(db);
    sqlite3_close(db);
    EXPECT_GT(changed, 0) << "the tampering changed nothing: " << sql;
    const Store s = Store::open(p, Store::Mode::read_only);
    return verify_store(s).problems;
  }

  static std::vector<std::string> column_names(sqlite3* db, const std::string& table) {
    std::vector<std::string> out;
    sql::Statement s(db, "SELECT name FROM pragma_table_info(?) ORDER BY cid");
    s.bind(1, table);
    while (s.step()) out.push_back(s.text(0));
    return out;
  }

  // A WHERE clause naming each row of `table` by all its columns (WITHOUT ROWID tables have no
  // rowid), as SQL literals.
  static std::vector<std::string> row_selectors(sqlite3* db, const std::string& table) {
    const auto cols = column_names(db, table);
    std::string quoted;
    for (const auto& c : cols) quoted += std::string(quoted.empty() ? "" : " || ' AND ' || ") + "'" + c + " IS ' || quote(" + c + ")";
    std::vector<std::string> out;
    sql::Statement s(db, "SELECT " + quoted + " FROM " + table);
    while (s.step()) out.push_back(s.text(0));
    return out;
  }

  // typeof() of one column of one row of `pristine` (written to `p`).
  static std::string type_of(const std::string& p, const std::string& pristine, const std::string& table, const std::string& col,
                             const std::string& where) {
    write(p, pristine);
    const Store s = Store::open(p, Store::Mode::read_only);
    sql::Statement t(s.db(), "SELECT typeof(" + col + ") FROM " + table + " WHERE " + where);
    return t.step() ? t.text(0) : "";
  }

  std::string run_a_, run_b_;
};

bool mentions(const std::vector<std::string>& problems, const std::string& what) {
  for (const auto& p : problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "\n  " + s;
  return out;
}

// The tables as stored: from schema 7 the trials view shows trial_rows, which is what an attacker
// edits (edits through the view land there too).
const char* const kTables[] = {"fingerprints", "runs", "cases", "case_runs", "trial_rows", "manifest", "manifest_origin"};

TEST_F(IntegrityTest, EveryEditOfEveryColumnOfEveryRowOfEveryTableIsCaught) {
  const std::string p = make_store("s.sqlite");
  const std::string pristine = contents(p);
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;  // table, row selectors
  std::map<std::string, std::vector<std::string>> columns;
  {
    const Store s = Store::open(p, Store::Mode::read_only);
    ASSERT_TRUE(verify_store(s).problems.empty()) << joined(verify_store(s).problems);
    for (const char* t : kTables) {
      rows.emplace_back(t, row_selectors(s.db(), t));
      columns[t] = column_names(s.db(), t);
    }
  }
  int checked = 0;
  std::vector<std::string> missed;
  for (const auto& [table, selectors] : rows)
    for (const auto& where : selectors)
      for (const auto& col : columns[table]) {
        // manifest_origin names the chain this file appends to next; it holds no evidence
        // (docs/ATTESTATION.md), so editing it is not a fault.
        if (table == "manifest_origin") continue;
        const std::string edit = "UPDATE " + table + " SET " + col + " = CASE typeof(" + col + ") WHEN 'integer' THEN " + col +
                                 " + 1000 WHEN 'real' THEN " + col + " + 0.5 WHEN 'text' THEN " + col + " || 'x' ELSE 1 END WHERE " + where;
        // The same value as d9m reads it, stored as another type (2.25 is read as 2, a BLOB as
        // its text): invisible to every reader, so it must be caught as a type.
        const std::string retype = "UPDATE " + table + " SET " + col + " = CASE typeof(" + col + ") WHEN 'integer' THEN " + col +
                                   " + 0.25 WHEN 'text' THEN CAST(" + col + " AS BLOB) ELSE " + col + " END WHERE " + where;
        for (const auto& e : {edit, retype}) {
          // A case row's number is this file's key for its trial rows, not evidence (merge renumbers
          // it): moved to a free number with no trial rows to take along, nothing changes.
          if (e == edit && table == "case_runs" && col == "num" && where.find(" trials IS 0 ") != std::string::npos) continue;
          if (e == retype) {
            const std::string type = type_of(p, pristine, table, col, where);
            if (type != "integer" && type != "text") continue;  // NULL stays NULL, REAL stays REAL
            if (table == "trial_rows" && col == "id") continue;  // the rowid: SQLite stores nothing but an integer there
          }
          if (problems_after(p, pristine, e).empty()) missed.push_back(e);
          ++checked;
        }
      }
  EXPECT_TRUE(missed.empty()) << "verify missed " << missed.size() << " of " << checked << " edits:" << joined(missed);
  EXPECT_GT(checked, 550);
}

TEST_F(IntegrityTest, EveryDeletedRowOfEveryTableIsCaught) {
  const std::string p = make_store("s.sqlite");
  const std::string pristine = contents(p);
  std::vector<std::pair<std::string, std::string>> rows;
  {
    const Store s = Store::open(p, Store::Mode::read_only);
    for (const char* t : kTables)
      for (const auto& w : row_selectors(s.db(), t)) rows.emplace_back(t, w);
  }
  std::vector<std::string> missed;
  for (const auto& [table, where] : rows) {
    const std::string del = "DELETE FROM " + table + " WHERE " + where;
    if (problems_after(p, pristine, del).empty()) missed.push_back(del);
  }
  EXPECT_TRUE(missed.empty()) << "verify missed:" << joined(missed);
  EXPECT_EQ(rows.size(), 30u);  // 2 fingerprints, 2 runs, 3 cases, 6 case rows, 12 trials, 4 events, 1 origin
}

TEST_F(IntegrityTest, AForgedRowInEveryTableIsCaught) {
  const std::string p = make_store("s.sqlite");
  const std::string pristine = contents(p);
  const std::string a = "'" + run_a_ + "'", b = "'" + run_b_ + "'";
  const std::string forged_id = "'" + std::string(64, 'f') + "'";
  const std::vector<std::string> inserts = {
      "INSERT INTO fingerprints VALUES ('44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', '{}')",  // sha256("{}")
      "INSERT INTO runs SELECT " + std::string("'") + std::string(32, '9') + "'" +
          ", fingerprint_id, state, started_at, finished_at, host, gpu_uuids, d9m_version, d9m_commit, catalog_digest,"
          " trials_per_case, threads, arguments, chain_root, plan_digest, resumes, chain_version FROM runs WHERE id = " + a,
      "INSERT INTO cases SELECT " + forged_id + ", op, variant, backend, config, config_id, params, seed, input_digest, output_dtype,"
          " output_shape, dtype, math FROM cases LIMIT 1",
      // run B's first case row, given to run A as its next case (case ids are shared: use a new one)
      "INSERT INTO cases SELECT " + forged_id + ", op, 'cpu.forged', backend, config, config_id, params, seed, input_digest,"
          " output_dtype, output_shape, dtype, math FROM cases LIMIT 1; INSERT INTO case_runs SELECT " + a + ", " + forged_id +
          ", status, detail, claim_determinism, claim_source, claim_reason, claim_bit_equal_to, 0, 0, median_ns, min_ns,"
          " (SELECT max(seq) + 1 FROM case_runs WHERE run_id = " + a + "), chain, role, invariance, (SELECT max(num) + 1 FROM case_runs),"
          " value_check"
          " FROM case_runs WHERE run_id = " + b + " AND seq = 2",
      "INSERT INTO trials SELECT run_id, case_id, 3, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index,"
          " chain, choice FROM trials WHERE run_id = " + a + " AND trial = 1 LIMIT 1",
      // the same, as stored: a copy of a trial row keyed one trial further
      "INSERT INTO trial_rows SELECT id + 2, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain,"
          " choice FROM trial_rows WHERE id % 4294967296 = 1 LIMIT 1",
      // a trial row keyed into no case row
      "INSERT INTO trial_rows SELECT id + 1000 * 4294967296, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp,"
          " diff_first_index, chain, choice FROM trial_rows LIMIT 1",
      "INSERT INTO manifest SELECT " + forged_id + ", link, origin, seq + 1, at, event, run_id, detail FROM manifest"
          " ORDER BY seq DESC LIMIT 1",
      "INSERT INTO manifest_origin VALUES ('00000000000000000000000000000000')",
  };
  for (const auto& ins : inserts) EXPECT_FALSE(problems_after(p, pristine, ins).empty()) << "verify missed: " << ins;
}

// Issue 11, item 4: the last case of a complete run deleted and its root cleared.
TEST_F(IntegrityTest, ARunCutShortAndItsRootClearedIsCaught) {
  const std::string p = make_store("s.sqlite");
  const std::string pristine = contents(p);
  const std::string a = "'" + run_a_ + "'";
  const std::string cut = "DELETE FROM trials WHERE run_id = " + a + " AND case_id = (SELECT case_id FROM case_runs WHERE run_id = " + a +
                          " AND seq = 1); DELETE FROM case_runs WHERE run_id = " + a + " AND seq = 2;"
                          "DELETE FROM case_runs WHERE run_id = " + a + " AND seq = 1;";
  const auto cleared = problems_after(p, pristine, cut + "UPDATE runs SET chain_root = NULL WHERE id = " + a);
  EXPECT_TRUE(mentions(cleared, "has no chain root")) << joined(cleared);
  // The root recomputed over what is left (any SHA-256 tool can): the manifest recorded the end.
  std::string root;
  {
    write(p, pristine);
    Store s = Store::open(p, Store::Mode::read_only);
    sql::Statement first(s.db(), "SELECT case_id FROM case_runs WHERE run_id = ? AND seq = 0");
    first.bind(1, run_a_);
    ASSERT_TRUE(first.step());
    sql::Statement last(s.db(), "SELECT chain FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial DESC LIMIT 1");
    last.bind(1, run_a_).bind(2, first.text(0));
    ASSERT_TRUE(last.step());
    sql::Statement r(s.db(), "SELECT finished_at, resumes FROM runs WHERE id = ?");
    r.bind(1, run_a_);
    ASSERT_TRUE(r.step());
    root = Store::chain_root(2, last.text(0), run_a_, "complete", r.text(0), r.integer(1));
  }
  const auto recomputed = problems_after(p, pristine, cut + "UPDATE runs SET chain_root = '" + root + "' WHERE id = " + a);
  EXPECT_TRUE(mentions(recomputed, "not what the manifest recorded when it ended")) << joined(recomputed);
  EXPECT_FALSE(mentions(recomputed, "hash chain")) << "the recomputed root should hold: " << joined(recomputed);
}

// Issue 11, item 5: the run's own columns, its stack, and whole runs.
TEST_F(IntegrityTest, RunMetadataAndWholeRunsAreCovered) {
  const std::string p = make_store("s.sqlite");
  const std::string pristine = contents(p);
  const std::string a = "'" + run_a_ + "'";
  for (const std::string& set : std::vector<std::string>{"host = 'elsewhere'", "d9m_version = '9.9.9'", "d9m_commit = 'abc'", "catalog_digest = 'other'",
                                "started_at = '2020-01-01T00:00:00Z'", "gpu_uuids = '[\"GPU-1\"]'", "arguments = '[]'",
                                "trials_per_case = 4", "threads = 64", "plan_digest = ''",
                                "fingerprint_id = (SELECT fingerprint_id FROM runs WHERE id != " + a + ")",
                                "state = 'interrupted'", "finished_at = '2030-01-01T00:00:00Z'", "resumes = 1"}) {
    const auto problems = problems_after(p, pristine, "UPDATE runs SET " + set + " WHERE id = " + a);
    EXPECT_FALSE(problems.empty()) << "verify missed: " << set;
  }
  // Run A's rows removed whole: the manifest still names it.
  const std::string whole = "DELETE FROM trials WHERE run_id = " + a + "; DELETE FROM case_runs WHERE run_id = " + a +
                            "; DELETE FROM cases WHERE id NOT IN (SELECT case_id FROM case_runs);"
                            "DELETE FROM runs WHERE id = " + a + "; DELETE FROM fingerprints WHERE id NOT IN (SELECT fingerprint_id FROM runs)";
  EXPECT_TRUE(mentions(problems_after(p, pristine, whole), "is not in the store (deleted)"));
  // ...and with its events too: the events after them no longer follow.
  EXPECT_TRUE(mentions(problems_after(p, pristine, whole + "; DELETE FROM manifest WHERE run_id = " + a), "the event before it is missing"));
  // ...and with the manifest dropped: only a store of schema 1 or 2 may have none, and it has
  // only chain v1 runs (the store's version set back to 2 does not make it one).
  EXPECT_TRUE(mentions(problems_after(p, pristine, whole + "; DROP TABLE manifest"), "manifest: the table is missing (dropped)"));
  EXPECT_TRUE(mentions(problems_after(p, pristine, whole + "; DROP TABLE manifest; DROP TABLE manifest_origin; PRAGMA user_version = 2"),
                       "run(s) of chain v2, which only a store with a manifest writes"));
}

// What the chain cannot show from inside the store (docs/ATTESTATION.md): the last run and its
// events cut off the end together. The store verifies, but its evidence digest and manifest heads
// are no longer the ones quoted outside it.
TEST_F(IntegrityTest, TheLastRunCutOffWithItsEventsChangesTheEvidenceDigest) {
  const std::string p = make_store("s.sqlite");
  const std::string pristine = contents(p);
  Evidence before;
  {
    const Store s = Store::open(p, Store::Mode::read_only);
    before = verify_store(s).evidence;
  }
  const std::string b = "'" + run_b_ + "'";
  const auto problems = problems_after(p, pristine,
                                       "DELETE FROM trials WHERE run_id = " + b + "; DELETE FROM case_runs WHERE run_id = " + b +
                                           "; DELETE FROM cases WHERE id NOT IN (SELECT case_id FROM case_runs);"
                                           "DELETE FROM runs WHERE id = " + b +
                                           "; DELETE FROM fingerprints WHERE id NOT IN (SELECT fingerprint_id FROM runs);"
                                           "DELETE FROM manifest WHERE run_id = " + b);
  EXPECT_TRUE(problems.empty()) << joined(problems);
  const Store s = Store::open(p, Store::Mode::read_only);
  const Evidence after = verify_store(s).evidence;
  EXPECT_NE(after.digest, before.digest);
  EXPECT_NE(after.manifest_heads, before.manifest_heads);
}

// A run killed, marked interrupted, resumed and completed: its chain goes on, and every state
// it passed through is in the manifest.
TEST_F(IntegrityTest, AResumedRunVerifiesAndItsStateCannotBeSetBack) {
  const std::string p = path("s.sqlite");
  const Fingerprint fp = fingerprint_from_json({{"stack", 1}});
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 3, 1, "plan"};
  CaseRecord c{"", "op", "cpu.serial", "cpu", "cfg", "cid", "{}", 1, "in", "float32", "[1]"};
  c.id = Store::case_id(c);
  CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 3, 1, 10, 10};
  const std::vector<TrialRecord> ts = {{0, "a", 10, std::nullopt}, {1, "a", 10, std::nullopt}, {2, "a", 10, std::nullopt}};
  {
    Store s = Store::open(p, Store::Mode::read_write);
    s.begin_run(fp, info);
    s.put_case(info.id, c, cr, ts);
  }  // dies
  std::string interrupted;
  {
    Store s = Store::open(p, Store::Mode::read_write);  // marks it interrupted
    const VerifyReport v = verify_store(s);
    EXPECT_TRUE(v.problems.empty()) << joined(v.problems);
    sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
    interrupted = contents(p);
    ASSERT_TRUE(s.resume_run(fp, info));
    CaseRecord c2 = c;
    c2.config = "cfg2";
    c2.id = Store::case_id(c2);
    s.put_case(info.id, c2, cr, ts);
    s.finish_run(info.id, "complete");
    const VerifyReport done = verify_store(s);
    EXPECT_TRUE(done.problems.empty()) << joined(done.problems);
  }
  // The interrupted run set back to running to cut its last case: the manifest saw it end.
  const std::string id = "'" + info.id + "'";
  const auto problems = problems_after(p, interrupted,
                                       "UPDATE runs SET state = 'running', finished_at = NULL, chain_root = NULL WHERE id = " + id);
  EXPECT_TRUE(mentions(problems, "it is marked running, but the manifest recorded it interrupted")) << joined(problems);
}

// A resumed run set back to where it was interrupted, with only what the manifest shows: the
// cases written after the resumption deleted and the run's closing facts copied from the event
// that recorded the interruption. Every link and root left is genuine, so only the manifest's
// later events (the resumption, the end) can show it; found by review, it verified.
TEST_F(IntegrityTest, AResumedRunCannotBeRolledBackToItsInterruption) {
  const std::string p = path("s.sqlite");
  const Fingerprint fp = fingerprint_from_json({{"stack", 1}});
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 3, 1, "plan"};
  CaseRecord c{"", "op", "cpu.serial", "cpu", "cfg", "cid", "{}", 1, "in", "float32", "[1]"};
  c.id = Store::case_id(c);
  CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 3, 1, 10, 10};
  const std::vector<TrialRecord> ts = {{0, "a", 10, std::nullopt}, {1, "a", 10, std::nullopt}, {2, "a", 10, std::nullopt}};
  {
    Store s = Store::open(p, Store::Mode::read_write);
    s.begin_run(fp, info);
    s.put_case(info.id, c, cr, ts);
  }  // dies
  std::string resumed;
  {
    Store s = Store::open(p, Store::Mode::read_write);  // marks it interrupted
    ASSERT_TRUE(s.resume_run(fp, info));
    CaseRecord c2 = c;
    c2.config = "cfg2";
    c2.id = Store::case_id(c2);
    s.put_case(info.id, c2, cr, ts);
    s.finish_run(info.id, "complete");
    sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
    resumed = contents(p);
  }
  const std::string id = "'" + info.id + "'";
  const std::string interruption = "(SELECT detail FROM manifest WHERE event = 'ended' AND json_extract(detail, '$.resumes') = 0)";
  const auto problems = problems_after(
      p, resumed,
      "DELETE FROM trials WHERE case_id IN (SELECT case_id FROM case_runs WHERE seq >= 1);"
      "DELETE FROM case_runs WHERE seq >= 1; DELETE FROM cases WHERE id NOT IN (SELECT case_id FROM case_runs);"
      "UPDATE runs SET state = json_extract(" + interruption + ", '$.state'), finished_at = json_extract(" + interruption +
          ", '$.finished_at'), resumes = 0, chain_root = json_extract(" + interruption + ", '$.root') WHERE id = " + id);
  EXPECT_TRUE(mentions(problems, "the manifest recorded it resumed 1 time(s)")) << joined(problems);
}

// A case removed from the end of an interrupted run, and run again by a resume: the run's latest
// end then matches its rows, but its end before the resume does not (found by audit: only the
// latest end was checked, so verify said OK). `d9m run --resume` now refuses such a store; this
// resumes through the store's own API, as an edited d9m could.
TEST_F(IntegrityTest, ACaseRemovedFromAnInterruptedRunAndRunAgainByAResumeIsCaught) {
  const std::string p = path("s.sqlite");
  const Fingerprint fp = fingerprint_from_json({{"stack", 1}});
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 3, 1, "plan"};
  CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 3, 1, 10, 10};
  const auto case_of = [](const std::string& config) {
    CaseRecord c{"", "op", "cpu.serial", "cpu", config, "cid", "{}", 1, "in", "float32", "[1]"};
    c.id = Store::case_id(c);
    return c;
  };
  const std::vector<TrialRecord> ts = {{0, "a", 10, std::nullopt}, {1, "a", 10, std::nullopt}, {2, "a", 10, std::nullopt}};
  const std::vector<TrialRecord> again = {{0, "a", 11, std::nullopt}, {1, "a", 11, std::nullopt}, {2, "a", 11, std::nullopt}};
  {
    Store s = Store::open(p, Store::Mode::read_write);
    s.begin_run(fp, info);
    s.put_case(info.id, case_of("one"), cr, ts);
    s.put_case(info.id, case_of("two"), cr, ts);
  }  // dies
  { Store s = Store::open(p, Store::Mode::read_write); }  // marks it interrupted: ended with 2 cases
  {
    Store s = Store::open(p, Store::Mode::read_write);
    sql::exec(s.db(), "DELETE FROM trial_rows WHERE id >= 2 * 4294967296; DELETE FROM case_runs WHERE seq = 1");
    EXPECT_FALSE(verify_store(s).problems.empty());
    ASSERT_TRUE(s.resume_run(fp, info));
    s.put_case(info.id, case_of("two"), cr, again);
    s.finish_run(info.id, "complete");
  }
  Store s = Store::open(p, Store::Mode::read_only);
  const auto problems = verify_store(s).problems;
  EXPECT_TRUE(mentions(problems, "its first 2 cases are not the rows it had when it ended interrupted before resumption 1"))
      << joined(problems);
}

// An honest resume verifies: every earlier end matches the rows it had then.
TEST_F(IntegrityTest, ARunResumedTwiceVerifies) {
  const std::string p = path("s.sqlite");
  const Fingerprint fp = fingerprint_from_json({{"stack", 1}});
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 3, 1, "plan"};
  CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 3, 1, 10, 10};
  const std::vector<TrialRecord> ts = {{0, "a", 10, std::nullopt}, {1, "a", 10, std::nullopt}, {2, "a", 10, std::nullopt}};
  for (int k = 0; k < 3; ++k) {
    Store s = Store::open(p, Store::Mode::read_write);
    if (k == 0) s.begin_run(fp, info);
    else ASSERT_TRUE(s.resume_run(fp, info));
    CaseRecord c{"", "op", "cpu.serial", "cpu", "cfg" + std::to_string(k), "cid", "{}", 1, "in", "float32", "[1]"};
    c.id = Store::case_id(c);
    s.put_case(info.id, c, cr, ts);
    if (k == 2) s.finish_run(info.id, "complete");
  }
  Store s = Store::open(p, Store::Mode::read_only);
  const auto problems = verify_store(s).problems;
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// A case is stored only into a run still running (found by audit: with the lease file removed,
// another process closed the live run, which went on writing cases after its root).
TEST_F(IntegrityTest, NoCaseIsStoredIntoARunAnotherProcessEnded) {
  const std::string p = path("s.sqlite");
  const Fingerprint fp = fingerprint_from_json({{"stack", 1}});
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "catalog", 3, 1, "plan"};
  CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 3, 1, 10, 10};
  const std::vector<TrialRecord> ts = {{0, "a", 10, std::nullopt}, {1, "a", 10, std::nullopt}, {2, "a", 10, std::nullopt}};
  CaseRecord c{"", "op", "cpu.serial", "cpu", "cfg", "cid", "{}", 1, "in", "float32", "[1]"};
  c.id = Store::case_id(c);
  Store s = Store::open(p, Store::Mode::read_write);
  s.begin_run(fp, info);
  s.put_case(info.id, c, cr, ts);
  {
    Store other = Store::open(p, Store::Mode::read_write);
    sql::exec(other.db(), "UPDATE runs SET state = 'interrupted'");  // as another process closing it would (root aside)
  }
  c.config = "cfg2";
  c.id = Store::case_id(c);
  try {
    s.put_case(info.id, c, cr, ts);
    ADD_FAILURE() << "a case was stored into an ended run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is no longer marked running"), std::string::npos) << e.what();
  }
  sql::Statement n(s.db(), "SELECT count(*) FROM case_runs");
  ASSERT_TRUE(n.step());
  EXPECT_EQ(n.integer(0), 1);
}

// A store of schema 1 (the committed fixture) is read as it is, its run verified as chain v1,
// with a note; migrating records its runs, and from then on their metadata and their deletion
// show.
TEST_F(IntegrityTest, ASchema1StoreVerifiesAsV1AndMigrationRecordsItsRuns) {
  const std::string p = path("old.sqlite");
  fs::copy_file(test::source_path("suites/store/v1-store.sqlite"), p);
  {
    const Store s = Store::open(p, Store::Mode::read_only);
    const VerifyReport v = verify_store(s);
    EXPECT_TRUE(v.problems.empty()) << joined(v.problems);
    EXPECT_TRUE(std::any_of(v.notes.begin(), v.notes.end(), [](const std::string& n) { return n.find("no manifest") != std::string::npos; }));
  }
  {
    Store s = Store::open(p, Store::Mode::read_write);
    {
      sql::Statement r(s.db(), "SELECT chain_version FROM runs");
      ASSERT_TRUE(r.step());
      EXPECT_EQ(r.integer(0), 1) << "migration keeps the chain the run was written with";
    }
    const VerifyReport v = verify_store(s);
    EXPECT_TRUE(v.problems.empty()) << joined(v.problems);
    EXPECT_EQ(v.evidence.manifest_heads.size(), 1u);
    sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  const std::string migrated = contents(p);
  EXPECT_TRUE(mentions(problems_after(p, migrated, "UPDATE runs SET host = 'elsewhere'"), "metadata"));
  // A migrated store has only chain v1 runs here: its manifest dropped and its version set back to 2,
  // its layout still says it had one (found by review: its newer runs could be cut unseen).
  EXPECT_TRUE(mentions(problems_after(p, migrated, "DELETE FROM manifest; DROP TABLE manifest; DROP TABLE manifest_origin; PRAGMA user_version = 2"),
                       "laid out as schema 3 or later"));
  EXPECT_TRUE(mentions(problems_after(p, migrated, "DELETE FROM trials; DELETE FROM case_runs; DELETE FROM cases; DELETE FROM runs;"
                                                   " DELETE FROM fingerprints"),
                       "is not in the store (deleted)"));
}

// The manifest under merge: copied as it is, each origin checked on its own; a store of schema 1
// merged gets its runs recorded once, however often it is merged.
TEST_F(IntegrityTest, MergedStoresKeepEveryOriginsManifestAndRecordOlderRunsOnce) {
  const std::string a = make_store("a.sqlite");
  const std::string old = path("old.sqlite");
  fs::copy_file(test::source_path("suites/store/v1-store.sqlite"), old);
  const std::string out = path("out.sqlite");
  const MergeSummary first = merge_stores(out, {a, old});
  EXPECT_EQ(first.adopted, 1);
  const MergeSummary again = merge_stores(out, {old, a});
  EXPECT_EQ(again.added, 0);
  EXPECT_EQ(again.adopted, 0);
  const Store s = Store::open(out, Store::Mode::read_only);
  const VerifyReport v = verify_store(s);
  EXPECT_TRUE(v.problems.empty()) << joined(v.problems);
  EXPECT_EQ(v.runs, 3);
  sql::Statement origins(s.db(), "SELECT count(DISTINCT origin) FROM manifest");
  origins.step();
  EXPECT_EQ(origins.integer(0), 2) << "a's own chain, and the merged store's (which recorded the schema-1 run)";
}

// What attest and report --audit hash: a store whose log is empty, and whose file no checkpoint
// may change while they hold the snapshot; a store with a pending log is refused.
TEST_F(IntegrityTest, ASingleFileSnapshotKeepsTheFileAsReadersSeeIt) {
  const std::string p = make_store("s.sqlite");
  const std::string before = contents(p);
  {
    const Store s = Store::open(p, Store::Mode::read_only);
    const SingleFileSnapshot snapshot(s, "attested");
    sqlite3* w = nullptr;
    ASSERT_EQ(sqlite3_open(p.c_str(), &w), SQLITE_OK);
    sql::exec(w, "UPDATE runs SET host = host || 'x'; PRAGMA wal_checkpoint(TRUNCATE);");
    EXPECT_EQ(contents(p), before) << "a checkpoint wrote into the file under the snapshot";
    sqlite3_close(w);  // leaves the change in the log: the reader holds it
  }
  ASSERT_GT(fs::file_size(p + "-wal"), 0u);
  const Store s = Store::open(p, Store::Mode::read_only);
  try {
    const SingleFileSnapshot snapshot(s, "attested");
    ADD_FAILURE() << "a store with a pending log was taken as one file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::environment);
    EXPECT_NE(std::string(e.what()).find("has a write-ahead log"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace d9m
