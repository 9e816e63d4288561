// The store: creation, refusal of anything that is not a d9m store (leaving it untouched),
// concurrent writers, and verify's consistency checks.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

#include "scratch_dir.h"
namespace d9m {
namespace {

namespace fs = std::filesystem;

class StoreTest : public test::ScratchDirTest {
 protected:
  StoreTest() : ScratchDirTest("store_test") {}

  // Opening fails with an environment error whose message contains `expect`.
  static void expect_open_fails(const std::string& p, Store::Mode mode, const std::string& expect) {
    try {
      Store::open(p, mode);
      ADD_FAILURE() << "opened " << p;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::environment);
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  }

  // Opening must fail with an environment error whose message contains `expect`, and leave
  // the file (and its folder) exactly as they were.
  void expect_refused(const std::string& p, Store::Mode mode, const std::string& expect) {
    const bool existed = fs::exists(p);
    const std::string before = existed ? contents(p) : "";
    const auto entries_before = std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
    expect_open_fails(p, mode, expect);
    EXPECT_EQ(fs::exists(p), existed);
    if (existed) {
      EXPECT_EQ(contents(p), before) << "the file was modified";
    }
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), entries_before) << "files were left behind";
  }

  static void write_run(Store& s, const std::string& tag, int cases, int trials) {
    const Fingerprint fp = fingerprint_from_json({{"test", "stack"}});
    RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "cat", trials, 1};
    const std::string run = s.begin_run(fp, info);
    for (int c = 0; c < cases; ++c) {
      CaseRecord rec{"", "op", "cpu.serial", "cpu", tag + std::to_string(c), "cid", "{}", 1, "in", "float32", "[1]"};
      rec.id = Store::case_id(rec);
      // Even cases carry a role (schema 3 rows), odd ones none (as rows written before schema 3).
      CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", trials, 1, 10, 5, c % 2 ? "" : "reference"};
      std::vector<TrialRecord> ts;
      for (int t = 0; t < trials; ++t) ts.push_back({t, "d", 10, std::nullopt});
      s.put_case(run, rec, cr, ts);
    }
    s.finish_run(run, "complete");
  }
};

std::int64_t count(const Store& s, const std::string& table) {
  sql::Statement st(s.db(), "SELECT count(*) FROM " + table);
  st.step();
  return st.integer(0);
}

// Reports print a run by the first 12 characters of its id; `report --run` and `trace diff
// STORE@run:ID` take that start, and refuse one that names no run or several (found by review:
// `report --run` took a whole id only, the one the reports do not print).
TEST_F(StoreTest, ARunIsNamedByTheStartOfItsId) {
  Store s = Store::open(path("s.sqlite"), Store::Mode::read_write);
  const Fingerprint fp = fingerprint_from_json({{"test", "stack"}});
  const std::string a = "abc1" + random_run_id().substr(4), b = "abc2" + random_run_id().substr(4);
  for (const std::string& id : {a, b}) s.begin_run(fp, RunInfo{id, utc_now(), "host", "[]", "[]", "cat", 2, 1});
  EXPECT_EQ(s.run_id_with_prefix(a, "--run"), a);
  EXPECT_EQ(s.run_id_with_prefix(a.substr(0, 12), "--run"), a);
  EXPECT_EQ(s.run_id_with_prefix("abc2", "--run"), b);
  auto refused = [&](const std::string& prefix, const std::string& why) {
    try {
      s.run_id_with_prefix(prefix, "--run " + prefix);
      ADD_FAILURE() << "'" << prefix << "' named a run";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::usage);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused("abc", "more than one run in " + s.path() + " has an id starting with 'abc' (" + a + ", " + b + "): give more");
  refused("abcz", "no run in " + s.path() + " has an id starting with 'abcz'");
  refused("", "expected a run id or the start of one");
  refused("%", "no run");  // matched as text, not as a LIKE pattern
}

TEST_F(StoreTest, CreatesAStoreWithItsIdentityAndWal) {
  {
    Store s = Store::open(path("a.sqlite"), Store::Mode::read_write);
    write_run(s, "c", 3, 4);
  }
  Store s = Store::open(path("a.sqlite"), Store::Mode::read_only);
  sql::Statement a(s.db(), "PRAGMA application_id");
  a.step();
  EXPECT_EQ(a.integer(0), kStoreApplicationId);
  sql::Statement v(s.db(), "PRAGMA user_version");
  v.step();
  EXPECT_EQ(v.integer(0), kStoreSchemaVersion);
  sql::Statement j(s.db(), "PRAGMA journal_mode");
  j.step();
  EXPECT_EQ(j.text(0), "wal");
  EXPECT_EQ(count(s, "trials"), 12);
  EXPECT_EQ(count(s, "results"), 3);
  EXPECT_TRUE(verify_store(s).problems.empty());
}

TEST_F(StoreTest, RefusesWhatIsNotAD9mStoreAndTouchesNothing) {
  write(path("random.sqlite"), std::string(5000, '\x7f') + "not sqlite");
  expect_refused(path("random.sqlite"), Store::Mode::read_write, "is not a SQLite database");
  expect_refused(path("random.sqlite"), Store::Mode::read_only, "is not a SQLite database");

  {  // a SQLite database of another application
    sqlite3* db = nullptr;
    sqlite3_open(path("other.sqlite").c_str(), &db);
    sql::exec(db, "CREATE TABLE t(x); PRAGMA application_id = 1234;");
    sqlite3_close(db);
  }
  expect_refused(path("other.sqlite"), Store::Mode::read_write, "another application");

  {  // a d9m store from the future
    Store s = Store::open(path("new.sqlite"), Store::Mode::read_write);
    sql::exec(s.db(), "PRAGMA user_version = 99; PRAGMA wal_checkpoint(TRUNCATE)");
  }
  expect_refused(path("new.sqlite"), Store::Mode::read_write, "newer d9m (schema 99");

  {  // a truncated store
    Store s = Store::open(path("full.sqlite"), Store::Mode::read_write);
    write_run(s, "c", 50, 20);
    sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  std::string bytes = contents(path("full.sqlite"));
  write(path("cut.sqlite"), bytes.substr(0, bytes.size() / 2));
  fs::remove(path("full.sqlite"));
  // SQLite notices a truncated file when it reads a missing page: opening or verify must say so.
  try {
    Store s = Store::open(path("cut.sqlite"), Store::Mode::read_only);
    EXPECT_FALSE(verify_store(s).problems.empty()) << "verify accepted a truncated store";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::environment);
  }

  write(path("empty.sqlite"), "");
  expect_refused(path("empty.sqlite"), Store::Mode::read_only, "is empty");
  expect_refused(path("missing.sqlite"), Store::Mode::read_only, "no such store");
  expect_refused(path("no/such/folder/d9m.sqlite"), Store::Mode::read_write, "does not exist");
}

// A store created or merged into place by a d9m killed between link() and removing its temporary
// name keeps that name, a second link no process uses (found by the kill-and-resume test: every
// later open refused the store as hard-linked). Such leftovers are no second name: a reader opens
// the store, a writer removes them. A foreign link beside them still refuses it.
TEST_F(StoreTest, AKilledCreatorsTemporaryNameIsNoSecondName) {
  { Store s = Store::open(path("s.sqlite"), Store::Mode::read_write); }
  const std::string creating = path("s.sqlite.creating-0123456789ab"), merging = path("s.sqlite.merging-host-99-0123456789ab");
  fs::create_hard_link(path("s.sqlite"), creating);
  fs::create_hard_link(path("s.sqlite"), merging);
  { Store s = Store::open(path("s.sqlite"), Store::Mode::read_only); }
  EXPECT_TRUE(fs::exists(creating) && fs::exists(merging)) << "a reader removed them";
  fs::create_hard_link(path("s.sqlite"), path("other.sqlite"));
  expect_open_fails(path("s.sqlite"), Store::Mode::read_write, "has 4 names (hard links)");
  fs::remove(path("other.sqlite"));
  write(path("s.sqlite.creating-other"), "not the store");  // the name, another file: left alone
  { Store s = Store::open(path("s.sqlite"), Store::Mode::read_write); }
  EXPECT_FALSE(fs::exists(creating) || fs::exists(merging)) << "a writer left them";
  EXPECT_TRUE(fs::exists(path("s.sqlite.creating-other")));
  EXPECT_EQ(fs::hard_link_count(path("s.sqlite")), 1u);
}

// What SQLite would misread, found by audit: a FIFO blocked readers for good; a second name (a
// hard link) gave each name its own log and lease; a rollback journal beside a store was played
// into it by the next writer; "file:NAME" opened NAME; a store through a dangling symbolic link
// failed with "No such file or directory".
TEST_F(StoreTest, RefusesWhatSqliteWouldMisreadAndCreatesThroughALink) {
  fs::remove(path("fifo"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const auto refused_unread = [](const std::string& p, const std::string& expect) {  // (expect_refused would read p)
    for (const auto mode : {Store::Mode::read_only, Store::Mode::read_write}) expect_open_fails(p, mode, expect);
  };
  fs::remove(path("fifo"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  refused_unread(path("fifo"), "not a regular file");
  fs::remove(path("fifo"));
  fs::create_directory(path("folder"));
  refused_unread(path("folder"), "is a folder");
  fs::remove(path("folder"));
  { Store s = Store::open(path("one.sqlite"), Store::Mode::read_write); }
  fs::create_hard_link(path("one.sqlite"), path("two.sqlite"));
  expect_refused(path("two.sqlite"), Store::Mode::read_write, "has 2 names (hard links)");
  expect_refused(path("one.sqlite"), Store::Mode::read_only, "has 2 names (hard links)");
  fs::remove(path("two.sqlite"));
  write(path("one.sqlite-journal"), std::string(600, 'j'));
  expect_refused(path("one.sqlite"), Store::Mode::read_only, "a rollback journal lies beside it");
  expect_refused(path("one.sqlite"), Store::Mode::read_write, "a rollback journal lies beside it");
  write(path("one.sqlite-journal"), "");  // an empty journal is not one SQLite plays
  { Store s = Store::open(path("one.sqlite"), Store::Mode::read_only); }
  fs::remove(path("one.sqlite-journal"));

  fs::create_symlink("target.sqlite", path("link.sqlite"));
  { Store s = Store::open(path("link.sqlite"), Store::Mode::read_write); }
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(path("target.sqlite"))));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("link.sqlite"))));
  fs::create_symlink("loop2.sqlite", path("loop1.sqlite"));
  fs::create_symlink("loop1.sqlite", path("loop2.sqlite"));
  refused_unread(path("loop1.sqlite"), "link that leads to no file");

  const auto cwd = fs::current_path();
  fs::current_path(dir_);
  try {
    { Store s = Store::open("file:uri.sqlite", Store::Mode::read_write); }
    EXPECT_TRUE(fs::exists("file:uri.sqlite"));
    EXPECT_FALSE(fs::exists("uri.sqlite"));
  } catch (...) {
    fs::current_path(cwd);
    throw;
  }
  fs::current_path(cwd);
}

TEST_F(StoreTest, InvalidUtf8InAStoreIsReportedNotACrash) {
  // Found by fuzz_store: text that is not UTF-8 made JSON serialisation throw inside verify.
  const std::string p = path("utf8.sqlite");
  {
    Store s = Store::open(p, Store::Mode::read_write);
    write_run(s, "c", 1, 2);
    sql::exec(s.db(), "UPDATE runs SET host = CAST(X'6869B6' AS TEXT); UPDATE cases SET config = CAST(X'FF00FE' AS TEXT)");
  }
  Store s = Store::open(p, Store::Mode::read_only);
  const auto v = verify_store(s);
  EXPECT_FALSE(v.problems.empty());  // the edited case no longer matches its content-addressed id
}

TEST_F(StoreTest, RefusesReadOnlyFilesAndFolders) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores file permissions";
  { Store s = Store::open(path("ro.sqlite"), Store::Mode::read_write); }
  fs::permissions(path("ro.sqlite"), fs::perms::owner_read, fs::perm_options::replace);
  expect_refused(path("ro.sqlite"), Store::Mode::read_write, "not writable");
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec, fs::perm_options::replace);
  expect_refused(path("new.sqlite"), Store::Mode::read_write, "not writable");
}

TEST_F(StoreTest, TwoProcessesWritingOneStoreBothLandCompletely) {
  const std::string p = path("shared.sqlite");
  std::vector<pid_t> children;
  for (int k = 0; k < 2; ++k) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        Store s = Store::open(p, Store::Mode::read_write);
        write_run(s, "proc" + std::to_string(k) + "_", 40, 25);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", k, e.what());
        rc = 1;
      }
      std::_Exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  Store s = Store::open(p, Store::Mode::read_only);
  EXPECT_EQ(count(s, "runs"), 2);
  EXPECT_EQ(count(s, "case_runs"), 80);
  EXPECT_EQ(count(s, "trials"), 2000);
  EXPECT_TRUE(verify_store(s).problems.empty());
}

TEST_F(StoreTest, VerifyFindsEditedDeletedAndInconsistentRows) {
  const std::string p = path("v.sqlite");
  {
    Store s = Store::open(p, Store::Mode::read_write);
    write_run(s, "c", 3, 5);
    sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  const std::vector<std::string> edits = {
      "UPDATE trials SET digest = 'x' WHERE trial = 2 AND case_id = (SELECT min(case_id) FROM trials)",
      "DELETE FROM trials WHERE trial = 3 AND case_id = (SELECT min(case_id) FROM trials)",
      "UPDATE case_runs SET status = 'NONDETERMINISTIC' WHERE seq = 1",
      "UPDATE cases SET params = '{\"n\":2}' WHERE rowid = 1",
      "UPDATE fingerprints SET canonical = '{}'",
      "UPDATE runs SET chain_root = 'x'",
      "UPDATE case_runs SET role = 'control' WHERE seq = 0",  // a role changed
      "UPDATE case_runs SET role = '' WHERE seq = 0",         // a role removed
      "UPDATE case_runs SET role = 'atomic' WHERE seq = 1",   // a role given to a row written without one
  };
  const std::string pristine = contents(p);
  for (const auto& edit : edits) {
    write(p, pristine);
    {
      Store s = Store::open(p, Store::Mode::read_write);
      sql::exec(s.db(), "PRAGMA foreign_keys = OFF; " + edit);
    }
    Store s = Store::open(p, Store::Mode::read_only);
    EXPECT_FALSE(verify_store(s).problems.empty()) << "verify missed: " << edit;
  }
}

// Tamper evidence: every trial row of a small store edited (one field that no other check
// covers), deleted, followed by an inserted row, and swapped with its neighbour -- each on a
// fresh copy -- must make verify fail.
TEST_F(StoreTest, TheHashChainCatchesEveryEditDeletionInsertionAndReorderingOfEveryTrialRow) {
  const std::string p = path("chain.sqlite");
  {
    Store s = Store::open(p, Store::Mode::read_write);
    write_run(s, "c", 3, 4);
    sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  std::vector<std::pair<std::string, std::int64_t>> rows;
  {
    Store s = Store::open(p, Store::Mode::read_only);
    EXPECT_TRUE(verify_store(s).problems.empty());
    sql::Statement st(s.db(), "SELECT case_id, trial FROM trials ORDER BY case_id, trial");
    while (st.step()) rows.emplace_back(st.text(0), st.integer(1));
  }
  ASSERT_EQ(rows.size(), 12u);
  const std::string pristine = contents(p);
  int checked = 0;
  for (const auto& row : rows) {
    const auto& [cs, trial] = row;  // clang before 16 cannot capture a structured binding: the lambda takes row
    const std::string where = " WHERE case_id = '" + cs + "' AND trial = " + std::to_string(trial);
    const std::vector<std::string> tampering = {
        "UPDATE trials SET elapsed_ns = elapsed_ns + 1" + where,
        "DELETE FROM trials" + where,
        // a forged row after it, copying its content (and chain value) under the next free number
        "INSERT INTO trials SELECT run_id, case_id, (SELECT max(trial) + 1 FROM trials WHERE case_id = '" + cs +
            "'), digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain, choice FROM trials" + where,
        // swap with the next row of the case (or the previous one for the last), through 999
        [&row] {
          const auto& [c, t] = row;
          const std::string a = std::to_string(t), b = std::to_string(t == 3 ? 2 : t + 1);
          const std::string in_case = " WHERE case_id = '" + c + "' AND trial = ";
          return "UPDATE trials SET trial = 999" + in_case + a + "; UPDATE trials SET trial = " + a + in_case + b +
                 "; UPDATE trials SET trial = " + b + in_case + "999";
        }(),
    };
    for (const auto& t : tampering) {
      write(p, pristine);
      {
        Store s = Store::open(p, Store::Mode::read_write);
        // (total changes: the trials view's triggers make the edits, which sqlite3_changes leaves out)
        const int before = sqlite3_total_changes(s.db());
        sql::exec(s.db(), "PRAGMA foreign_keys = OFF; " + t);
        ASSERT_GT(sqlite3_total_changes(s.db()), before) << "the tampering changed nothing: " << t;
      }
      Store s = Store::open(p, Store::Mode::read_only);
      const auto v = verify_store(s);
      EXPECT_FALSE(v.problems.empty()) << "verify missed: " << t;
      bool chain = false;
      for (const auto& problem : v.problems) chain |= problem.rfind("hash chain:", 0) == 0;
      EXPECT_TRUE(chain) << "the hash chain missed: " << t;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48);
}

// Schema 7 writes a case's trial rows 64 to a statement, with the chain hashed on a second thread
// from 256 trials on. Whatever the count, the rows read back through the trials view are the ones
// written (a digest that is not d9m's hex kept as text), their links are the chain computed one by
// one, and verify finds the run whole; an edit in the middle is caught at its trial.
TEST_F(StoreTest, TrialRowsOfEveryCountReadBackAsWrittenWithTheChainComputedInOrder) {
  const std::string p = path("s.sqlite");
  Store s = Store::open(p, Store::Mode::read_write);
  RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "cat", 1, 1};
  const std::string run = s.begin_run(fingerprint_from_json({{"test", "chain"}}), info);
  std::string link = *Store::run_head(s.db(), run);
  std::int64_t seq = 0;
  for (const int n : {0, 1, 63, 64, 65, 255, 256, 1000}) {
    CaseRecord rec{"", "op", "cpu.atomic", "cpu", "n" + std::to_string(n), "cid", "{}", 1, "in", "float32", "[1]"};
    rec.id = Store::case_id(rec);
    std::vector<TrialRecord> ts;
    for (int t = 0; t < n; ++t) {
      TrialRecord r{t, t % 7 ? "00112233445566778899aabbccddeeff" : "ffeeddccbbaa99887766554433221100", 100 + t, std::nullopt,
                    t % 5 == 1 ? "algo" + std::to_string(t % 3) : ""};
      if (t == 3) r.digest = "not hex";  // kept as written
      if (t % 7 != 0) r.diff = DiffStats{t, 0.25 * t, 3, t % 11};  // (the digest differs from trial 0's)
      ts.push_back(r);
    }
    const Status status = n == 0 ? Status::skipped : n == 1 ? Status::deterministic : Status::nondeterministic;
    CaseRunRecord cr{status, n ? "" : "none", "nondeterministic", "design", "r", "", n, n > 3 ? 3 : n, std::nullopt, std::nullopt};
    s.put_case(run, rec, cr, ts);
    link = Store::chain_link(link, Store::canonical_case_run(run, rec.id, seq++, cr));
    sql::Statement back(s.db(), "SELECT trial, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain,"
                                " choice FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial");
    back.bind(1, run).bind(2, rec.id);
    for (const auto& t : ts) {
      ASSERT_TRUE(back.step()) << n << " trials: row " << t.trial << " missing";
      link = Store::chain_link(link, Store::canonical_trial(run, rec.id, t));
      EXPECT_EQ(back.integer(0), t.trial);
      EXPECT_EQ(back.text(1), t.digest);
      EXPECT_EQ(back.integer(2), t.elapsed_ns);
      EXPECT_EQ(back.is_null(3), !t.diff);
      if (t.diff) EXPECT_EQ(back.real(4), t.diff->max_abs);
      EXPECT_EQ(back.text(7), link) << n << " trials: trial " << t.trial;
      EXPECT_EQ(back.text(8), t.choice);
    }
    EXPECT_FALSE(back.step()) << n << " trials: a row too many";
  }
  s.finish_run(run, "interrupted");  // (a complete run has as many trials in every case)
  EXPECT_EQ(count(s, "trial_rows WHERE typeof(digest) = 'text'"), 6);  // trial 3 of each case of more than 3
  EXPECT_EQ(count(s, "trial_rows WHERE typeof(chain) = 'blob' AND length(chain) = 32"), count(s, "trial_rows"));
  const VerifyReport v = verify_store(s);
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  EXPECT_EQ(v.trials, 1 + 63 + 64 + 65 + 255 + 256 + 1000);
  sql::exec(s.db(), "UPDATE trial_rows SET elapsed_ns = 1 WHERE id = (SELECT num FROM case_runs WHERE case_id = (SELECT id FROM cases"
                    " WHERE config = 'n1000')) * 4294967296 + 700");
  const VerifyReport edited = verify_store(s);
  ASSERT_FALSE(edited.problems.empty());
  EXPECT_NE(edited.problems.front().find("n1000/cpu.atomic, trial 700: the row does not match"), std::string::npos)
      << edited.problems.front();
}

// What schema 7 adds to verify: trial rows keyed into no case row, digests and links of another
// type or length, case rows without a number, traces of trials not stored, and a trials view or
// trigger that is not d9m's.
// The chain's definition pinned to values computed outside d9m (Python's hashlib): a link is the
// SHA-256 of the previous link's hex, a newline and the row's canonical text. The fast paths (the
// direct row writer, the hashing thread's allocation-free link) share code with chain_link, so
// the test above alone could not see a change to the definition.
TEST(StoreChainDefinition, ALinkIsTheSha256OfThePreviousLinkANewlineAndTheRowsCanonicalText) {
  const std::string run = "0123456789abcdef0123456789abcdef";
  std::string previous;
  for (int i = 0; i < 32; ++i) previous += "ab";
  std::string case_id;
  for (int i = 0; i < 32; ++i) case_id += "fe";
  const std::string digest = "0123456789abcdef0123456789abcdef";
  const TrialRecord with_diff{7, digest, 1234, DiffStats{3, 0.5, 7, 11}, "algo3"};
  const TrialRecord plain_row{8, digest, 99, std::nullopt, ""};
  const std::string row1 = "[\"trial\",\"" + run + "\",\"" + case_id + "\",7,\"" + digest + "\",1234,[3,0.5,7,11],\"algo3\"]";
  const std::string row2 = "[\"trial\",\"" + run + "\",\"" + case_id + "\",8,\"" + digest + "\",99,null]";
  EXPECT_EQ(Store::canonical_trial(run, case_id, with_diff), row1);
  EXPECT_EQ(Store::canonical_trial_general(run, case_id, with_diff), row1);
  EXPECT_EQ(Store::canonical_trial(run, case_id, plain_row), row2);
  EXPECT_EQ(Store::chain_link(previous, row1), "0688f4e7c9ea123fc114b1dafc12ba1a986f0e24285dde5c5785095f86ed74e4");
  EXPECT_EQ(Store::chain_link(previous, row2), "28c43fed8704eb2a5b5fef2e05f14a65a974a159910c8bd864877578bfef2b58");
  unsigned char bytes[32];
  char hex[64];
  Store::chain_link_into(previous, row1, bytes, hex);
  EXPECT_EQ(std::string(hex, 64), "0688f4e7c9ea123fc114b1dafc12ba1a986f0e24285dde5c5785095f86ed74e4");
  EXPECT_EQ(bytes[0], 0x06);
  EXPECT_EQ(bytes[31], 0xe4);
}

TEST_F(StoreTest, VerifyChecksWhatSchema7KeysByNumberAndTheTrialsView) {
  const std::string p = path("s.sqlite");
  {
    Store s = Store::open(p, Store::Mode::read_write);
    RunInfo info{random_run_id(), utc_now(), "host", "[]", "[]", "cat", 2, 1};
    const std::string run = s.begin_run(fingerprint_from_json({{"test", "trace"}}), info);
    CaseRecord rec{"", "pipeline:cnn", "det", "cpu", "p", "cid", "{}", 1, "in", "float32", "[1]"};
    rec.id = Store::case_id(rec);
    CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 2, 1, 10, 5};
    std::vector<TrialRecord> ts = {{0, "00112233445566778899aabbccddeeff", 10, std::nullopt},
                                   {1, "00112233445566778899aabbccddeeff", 11, std::nullopt}};
    std::vector<TraceRecord> trace;
    for (int t = 0; t < 2; ++t)
      for (int pos = 0; pos < 2; ++pos) trace.push_back({t, 0, pos, "op" + std::to_string(pos), "conv", "cpu.serial", "[]", "aa", std::nullopt});
    s.put_case(run, rec, cr, ts, trace);
    s.finish_run(run, "complete");
    ASSERT_TRUE(verify_store(s).problems.empty()) << verify_store(s).problems.front();
    sql::exec(s.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  const std::string pristine = contents(p);
  auto problems_after = [&](const std::string& edit) {
    for (const char* x : {"-wal", "-shm"}) fs::remove(p + x);
    write(p, pristine);
    {
      Store s = Store::open(p, Store::Mode::read_only);
      sqlite3* db = nullptr;
      EXPECT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
      sql::exec(db, "PRAGMA foreign_keys = OFF; " + edit);
      sqlite3_close(db);
    }
    const Store s = Store::open(p, Store::Mode::read_only);
    std::string all;
    for (const auto& m : verify_store(s).problems) all += m + "\n";
    return all;
  };
  EXPECT_NE(problems_after("UPDATE trial_rows SET id = id + 5 * 4294967296 WHERE id % 4294967296 = 1").find("trial_rows: 1 row(s) belong to no case row"),
            std::string::npos);
  EXPECT_NE(problems_after("UPDATE trial_rows SET digest = x'0011' WHERE id % 4294967296 = 1").find("neither its 16 bytes nor text"),
            std::string::npos);
  EXPECT_NE(problems_after("UPDATE trial_rows SET chain = 7 WHERE id % 4294967296 = 0").find("neither its 32 bytes nor text"),
            std::string::npos);
  EXPECT_NE(problems_after("UPDATE case_runs SET num = 0").find("case_runs: 1 row(s) without a row number"), std::string::npos);
  EXPECT_NE(problems_after("DELETE FROM trial_rows WHERE id % 4294967296 = 1").find("trace: 2 row(s) of a trial that is not stored"),
            std::string::npos);
  // A view that shows the readers one digest the table does not hold.
  std::string view;
  {
    const Store s = Store::open(p, Store::Mode::read_only);
    sql::Statement v(s.db(), "SELECT sql FROM sqlite_master WHERE name = 'trials'");
    ASSERT_TRUE(v.step());
    view = v.text(0);
  }
  const auto at = view.find("lower(hex(t.digest))");
  ASSERT_NE(at, std::string::npos);
  view.replace(at, std::string("lower(hex(t.digest))").size(), "'00000000000000000000000000000000'");
  EXPECT_NE(problems_after("DROP VIEW trials; " + view).find("schema: trials is not d9m's definition"), std::string::npos);
  EXPECT_NE(problems_after("DROP TRIGGER trials_delete").find("schema: trials_delete is missing"), std::string::npos);
  // The table renamed (SQLite rewrites the view to follow it): the checks above must not stop.
  EXPECT_NE(problems_after("ALTER TABLE trial_rows RENAME TO x").find("schema: trial_rows is missing"), std::string::npos);
  EXPECT_NE(problems_after("CREATE TRIGGER extra AFTER INSERT ON trial_rows BEGIN SELECT 1; END").find("schema: trigger extra is not d9m's"),
            std::string::npos);
  EXPECT_NE(problems_after("DROP INDEX case_runs_by_num").find("schema: case_runs_by_num is missing"), std::string::npos);
}

// Case row numbers are a local key: moved to the top of their range by an edit (with their trial
// rows, which is no fault), the next case takes the lowest free number and the store verifies.
TEST_F(StoreTest, ACaseRowNumberMovedToTheTopLeavesTheStoreWritable) {
  const std::string p = path("s.sqlite");
  {
    Store s = Store::open(p, Store::Mode::read_write);
    write_run(s, "a", 2, 3);
    sql::exec(s.db(), "UPDATE trial_rows SET id = id + (2147483647 - 2) * 4294967296 WHERE id >> 32 = 2;"
                      " UPDATE case_runs SET num = 2147483647 WHERE num = 2");
    ASSERT_TRUE(verify_store(s).problems.empty()) << verify_store(s).problems.front();
  }
  Store s = Store::open(p, Store::Mode::read_write);
  write_run(s, "b", 2, 3);
  const VerifyReport v = verify_store(s);
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  sql::Statement nums(s.db(), "SELECT group_concat(num) FROM (SELECT num FROM case_runs ORDER BY num)");
  ASSERT_TRUE(nums.step());
  EXPECT_EQ(nums.text(0), "1,2,3,2147483647");
}

}  // namespace
}  // namespace d9m
