#include "harness/report/results.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "harness/core/catalog.h"
#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/json_text.h"
#include "harness/store/snapshot.h"
#include "harness/store/sqlite.h"

namespace d9m {

using nlohmann::json;

std::string StackInfo::summary() const {
  const json& f = fingerprint;
  auto get = [&](const char* a, const char* b) -> std::string {
    if (!f.contains(a) || !f[a].contains(b) || !f[a][b].is_string()) return "?";
    return f[a][b].get<std::string>();
  };
  std::string gpu = "no GPU";
  if (f.contains("gpus") && f["gpus"].is_array() && !f["gpus"].empty()) {
    gpu = std::to_string(f["gpus"].size()) + "x " + f["gpus"][0].value("name", "?");
    if (f.contains("gpu_driver") && f["gpu_driver"].is_object())
      gpu += ", driver " + f["gpu_driver"].value("version", f["gpu_driver"].value("cuda_driver_api", "?"));
  }
  std::string commit = f.contains("d9m") ? f["d9m"].value("version", "?") + " " + f["d9m"].value("commit", "?") : "?";
  return get("host", "cpu_model") + "; " + gpu + "; " + get("host", "os") + ", " + get("host", "kernel") +
         ", glibc " + get("host", "glibc") + "; " + get("build", "compiler") + "; d9m " + commit;
}

bool CaseResult::is_control() const { return config == kCanaryConfig; }

std::string CaseResult::invariance_status() const {
  if (!invariance || (status != Status::deterministic && status != Status::nondeterministic)) return "";
  return d9m::invariance_status(status == Status::deterministic, *invariance);
}

namespace {

// The role of a stored case row. Rows written since schema 3 carry it. Older rows carry none: a
// variant this build registers has its registered role, and any other was named by the only
// convention d9m had before roles were stored (fixed history, so reading it is exact).
Role role_of_row(const std::string& stored, const std::string& op, const std::string& variant) {
  if (!stored.empty()) return role_from_string(stored).value_or(Role::unset);
  if (const VariantDef* v = Registry::global().find_variant(op, variant)) return v->role;
  auto ends_with = [&](const char* suffix) {
    const std::string s(suffix);
    return variant.size() >= s.size() && variant.compare(variant.size() - s.size(), s.size(), s) == 0;
  };
  if (variant == "cpu.serial") return Role::reference;
  if (ends_with(".atomic")) return Role::atomic;
  if (ends_with(".ordered")) return Role::ordered;
  if (variant.rfind("cudnn.", 0) == 0) return Role::vendor;
  if (variant.rfind("test.", 0) == 0) return Role::control;
  return Role::unset;
}

}  // namespace

std::string case_label(const std::string& op, const std::string& config, const std::string& variant, const std::string& dtype,
                       const std::string& math) {
  std::string s = op + "/" + config + "/" + variant;
  if (dtype != "f32" || math != "default") s += " at " + dtype;
  if (math != "default") s += " " + math;
  return s;
}

std::string CaseResult::label() const { return case_label(op, config, variant, dtype, math); }

std::string CaseResult::source() const {
  std::string s = op;
  if (dtype != "f32" || math != "default") s += " " + dtype;
  if (math != "default") s += " " + math;
  return s;
}

double CaseResult::bound95() const {
  if (trials < 2) return 1.0;
  return 1.0 - std::pow(0.05, 1.0 / static_cast<double>(trials - 1));
}

namespace {

[[noreturn]] void fail_edited_fingerprint(const Store& store, const std::string& id) {
  fail_store_fault(store.path() + ": fingerprint " + id.substr(0, 12) +
                   ": its id does not match its content (the store was edited); `d9m verify` lists the faults");
}

}  // namespace

void check_fingerprint_ids(const Store& store) {
  try {
    sql::Statement s(store.db(), "SELECT id, canonical FROM fingerprints");
    while (s.step())
      if (sha256_hex(s.text(1)) != s.text(0)) fail_edited_fingerprint(store, s.text(0));
  } catch (const sql::Error& e) {
    fail_environment(store.path() + ": cannot read the store: " + e.what());
  }
}

const StackInfo& ReportData::stack(const std::string& id) const {
  for (const auto* list : {&stacks, &partner_stacks})
    for (const auto& s : *list)
      if (s.id == id) return s;
  throw std::out_of_range("unknown stack " + id);
}

bool ReportData::reports_stack(const std::string& id) const {
  return std::any_of(stacks.begin(), stacks.end(), [&](const StackInfo& s) { return s.id == id; });
}

namespace {

// Which rows a Loader reads: every run's, one run's, or every run's rows of the cases that can
// take part in one run's verdict (the scope below).
struct LoadScope {
  enum class Kind { store, run, run_verdict } kind = Kind::store;
  std::string run_id;
};

// The cases `d9m run`'s verdict of run ?1 can read: those that share an op and a config id with a
// case the run recorded (its own cases on every stack and run, and every case a claim to another
// implementation's bits can pair with one of them: cross_checks pairs only cases of one op, config
// id and inputs), and every control case (a quiet control is judged run by run over the stack).
// Everything else is only partners of no check (load_run_evidence), and reading it made the
// verdict's time grow with the store: about 1 s of a 1.6 s certification test at the end of
// ci/test.sh's ctest, measured. (Rows outside the scope are not read, so a hand-edited row there no
// longer fails the run's verdict; `d9m verify` and `d9m report` still find it.)
std::string verdict_scope() {
  return std::string("WITH scope(id) AS (SELECT c2.id FROM cases c2 WHERE c2.config = '") + kCanaryConfig +
         "' OR (c2.op, c2.config_id) IN"
         " (SELECT c3.op, c3.config_id FROM case_runs cr3 JOIN cases c3 ON c3.id = cr3.case_id WHERE cr3.run_id = ?1)) ";
}

// Reads a store into ReportData in three passes (runs, case rows, trials) and settles each case's
// status; every query is limited to one run, or to one run's verdict scope, when one is given.
class Loader {
 public:
  Loader(const Store& store, const LoadScope& scope) : store_(store), db_(store.db()), scope_(scope) {
    switch (scope.kind) {
      case LoadScope::Kind::store:
        break;
      case LoadScope::Kind::run:
        run_filter_ = rows_filter_ = trials_filter_ = " WHERE r.id = ?1";
        break;
      case LoadScope::Kind::run_verdict:
        rows_prefix_ = verdict_scope();
        rows_filter_ = " WHERE cr.case_id IN (SELECT id FROM scope)";
        trials_filter_ = " WHERE t.case_id IN (SELECT id FROM scope)";
        break;
    }
    d_.store_path = store.path();
    d_.generated_at = utc_now();
    if (scope.kind == LoadScope::Kind::run) {
      d_.selection = "run " + scope.run_id;
      d_.warn_unpaired_claims = true;
    }
  }

  ReportData load() {
    try {
      d_.evidence = evidence_of(db_);
      load_runs();
      load_case_rows();
      load_trials();
      for (auto& [key, a] : acc_) d_.results.push_back(settle(a));
    } catch (const sql::Error& e) {
      fail_environment(store_.path() + ": cannot read the store: " + e.what());
    } catch (const std::invalid_argument& e) {
      fail_store_fault(store_.path() + ": the store holds a value d9m does not know (" + e.what() +
                       "); `d9m verify` lists the faults");
    }
    // A store whose rows do not hang together (found by fuzzing: a run whose fingerprint row is
    // missing) is refused with a message, not rendered half.
    for (const auto& r : d_.results)
      if (std::none_of(d_.stacks.begin(), d_.stacks.end(), [&](const StackInfo& s) { return s.id == r.stack; }))
        fail_store_fault(store_.path() + ": the store is inconsistent: results refer to stack " + r.stack.substr(0, 12) +
                         ", which has no fingerprint row; `d9m verify` lists the faults");
    // Stacks in their labels' order (S1, S2, ...: found by audit, rows sorted by fingerprint id
    // put S2 before S1, in the case tables and as "S2 vs S1" in the stack differences).
    std::map<std::string, std::size_t> stack_order;
    for (std::size_t i = 0; i < d_.stacks.size(); ++i) stack_order[d_.stacks[i].id] = i;
    std::sort(d_.results.begin(), d_.results.end(), [&](const CaseResult& a, const CaseResult& b) {
      return std::tie(a.op, a.config, a.variant, stack_order[a.stack]) < std::tie(b.op, b.config, b.variant, stack_order[b.stack]);
    });
    return std::move(d_);
  }

 private:
  // One case on one stack while its rows are read.
  struct Acc {
    CaseResult r;
    std::map<std::string, std::int64_t> digests;
    std::string first_digest;  // of the first trial read: the oldest run's trial 0
    std::vector<std::int64_t> times;
    bool any_unsupported = false, any_evidence = false;
    std::string error_detail;  // the latest run's that ended in ERROR
    std::vector<InvarianceEvidence> invariance;  // per run that recorded some
    std::vector<ValueCheck> values;              // likewise
    std::map<std::string, std::pair<std::int64_t, std::set<std::string>>> choices;  // trials, digests
    std::string last_run, last_choice;
  };

  void bind_run(sql::Statement& s) const {
    if (scope_.kind != LoadScope::Kind::store) s.bind(1, scope_.run_id);
  }

  StackInfo& stack_of(const std::string& id, const std::string& canonical) {
    auto it = std::find_if(d_.stacks.begin(), d_.stacks.end(), [&](const StackInfo& x) { return x.id == id; });
    if (it != d_.stacks.end()) return *it;
    // check_fingerprint_ids(), for the fingerprints this report reads; the rest of the store's
    // integrity is `d9m verify`'s.
    if (sha256_hex(canonical) != id) fail_edited_fingerprint(store_, id);
    StackInfo si;
    si.id = id;
    si.label = std::string("S").append(std::to_string(d_.stacks.size() + 1));
    si.fingerprint = parse_stored_json(canonical);
    d_.stacks.push_back(std::move(si));
    return d_.stacks.back();
  }

  void load_runs() {
    sql::Statement s(db_,
                     "SELECT r.fingerprint_id, f.canonical, r.host, r.state, r.catalog_digest, r.d9m_version,"
                     " r.trials_per_case, r.threads, r.id, r.started_at, coalesce(r.finished_at, ''), r.arguments, r.d9m_commit,"
                     " coalesce(r.chain_root, ''), " + std::string(store_.schema_version() >= 2 ? "r.resumes" : "0") +
                         " FROM runs r JOIN fingerprints f ON f.id = r.fingerprint_id" + run_filter_ + " ORDER BY r.started_at, r.id");
    if (!run_filter_.empty()) bind_run(s);
    std::set<std::string> cats, versions;
    std::set<std::int64_t> ns, ts;
    while (s.step()) {
      StackInfo& stack = stack_of(s.text(0), s.text(1));
      ++stack.runs;
      if (std::find(stack.hosts.begin(), stack.hosts.end(), s.text(2)) == stack.hosts.end()) stack.hosts.push_back(s.text(2));
      ++d_.runs;
      // A run still marked running whose process is gone was interrupted; only a write marks
      // it so in the store, but every report says so at once.
      std::string state = s.text(3);
      if (state == "running" && !store_.run_alive(s.text(8))) state = "interrupted";
      if (state == "interrupted") ++d_.interrupted_runs;
      cats.insert(s.text(4));
      versions.insert(s.text(5));
      ns.insert(s.integer(6));
      ts.insert(s.integer(7));
      d_.run_rows.push_back({s.text(8), s.text(0), s.text(2), state, s.text(9), s.text(10), s.text(11), s.text(4), s.text(5),
                             s.text(12), s.text(13), s.integer(6), s.integer(7), s.integer(14)});
    }
    d_.catalog_digests.assign(cats.begin(), cats.end());
    d_.d9m_versions.assign(versions.begin(), versions.end());
    d_.trials_per_case.assign(ns.begin(), ns.end());
    d_.threads.assign(ts.begin(), ts.end());
  }

  // The case rows, oldest run first, so the latest run's claim, role and detail are kept.
  void load_case_rows() {
    sql::Statement s(db_,
                     rows_prefix_ + "SELECT r.fingerprint_id, c.id, c.op, c.variant, c.backend, c.config, c.config_id, c.params,"
                     " c.input_digest, c.output_dtype, c.output_shape, cr.claim_determinism, cr.claim_source,"
                     " cr.claim_reason, cr.status, cr.detail, cr.claim_bit_equal_to, " +
                         std::string(store_.schema_version() >= 3 ? "cr.role" : "''") + ", " +
                         std::string(store_.schema_version() >= 4 ? "c.dtype, c.math" : "'f32', 'default'") + ", " +
                         std::string(store_.schema_version() >= 5 ? "cr.invariance" : "''") + ", " +
                         std::string(store_.schema_version() >= 9 ? "cr.value_check" : "''") + ", cr.run_id" +
                         " FROM case_runs cr JOIN runs r ON r.id = cr.run_id JOIN cases c ON c.id = cr.case_id" + rows_filter_ +
                         " ORDER BY r.started_at, r.id, cr.seq");
    bind_run(s);
    while (s.step()) {
      Acc& a = acc_[{s.text(1), s.text(0)}];
      CaseResult& r = a.r;
      if (r.case_id.empty()) {
        r.stack = s.text(0);
        r.case_id = s.text(1);
        r.op = s.text(2);
        r.variant = s.text(3);
        r.backend = s.text(4);
        r.config = s.text(5);
        r.config_id = s.text(6);
        r.params = s.text(7);
        r.input_digest = s.text(8);
        r.output_dtype = s.text(9);
        r.output_shape = s.text(10);
        r.dtype = s.text(18);
        r.math = s.text(19);
      }
      r.claim_determinism = s.text(11);
      r.claim_source = s.text(12);
      r.claim_reason = s.text(13);
      r.bit_equal_to = s.text(16);
      r.role = role_of_row(s.text(17), r.op, r.variant);
      ++r.runs;
      const Status st = status_from_string(s.text(14));
      if (st == Status::error) {
        ++r.error_runs;
        a.error_detail = s.text(15);
      }
      if (r.is_control() && r.claim_determinism == "nondeterministic" && st == Status::deterministic)
        for (auto& run : d_.run_rows)
          if (run.id == s.text(22) && std::find(run.quiet_controls.begin(), run.quiet_controls.end(), r.variant) == run.quiet_controls.end())
            run.quiet_controls.push_back(r.variant);
      if (st == Status::unsupported) a.any_unsupported = true;
      if (st == Status::deterministic || st == Status::nondeterministic) a.any_evidence = true;
      if (!s.text(15).empty()) r.detail = s.text(15);
      if (!s.text(20).empty()) {
        // The hash chain covers this text, so d9m wrote it; one it cannot read (a store edited
        // by hand, which verify reports) is left out of the report, not fatal to it.
        try {
          a.invariance.push_back(InvarianceEvidence::from_json_text(s.text(20)));
        } catch (const std::invalid_argument&) {
        }
      }
      if (!s.text(21).empty()) {
        // Unlike the invariance evidence, an unreadable check is kept as one that checked nothing:
        // dropping it would read like a case the check never concerned.
        try {
          a.values.push_back(ValueCheck::from_json_text(s.text(21)));
        } catch (const std::invalid_argument& e) {
          ValueCheck unreadable;
          unreadable.reason = std::string("the store's value check could not be read (") + e.what() + ")";
          a.values.push_back(std::move(unreadable));
        }
      }
    }
  }

  void load_trials() {
    sql::Statement s(db_,
                     rows_prefix_ + "SELECT r.fingerprint_id, t.case_id, t.digest, t.elapsed_ns, t.diff_count, t.diff_max_abs,"
                     " t.diff_max_ulp, t.diff_first_index, t.run_id, " +
                         std::string(store_.schema_version() >= 5 ? "t.choice" : "''") +
                         " FROM trials t JOIN runs r ON r.id = t.run_id" + trials_filter_ +
                         // Each run's trials of a case in order, the oldest run first (its trial 0
                         // breaks a tie for the most frequent digest, below).
                         " ORDER BY r.started_at, t.run_id, t.case_id, t.trial");
    bind_run(s);
    while (s.step()) {
      auto it = acc_.find({s.text(1), s.text(0)});
      if (it == acc_.end()) continue;
      Acc& a = it->second;
      if (a.digests.empty()) a.first_digest = s.text(2);
      ++a.digests[s.text(2)];
      a.times.push_back(s.integer(3));
      ++a.r.trials;
      if (!s.is_null(4)) {
        // Each column's worst over the trials (found by an audit of the reports: the stats of the
        // one trial with the most ULPs showed 1 element and 1.9e-6 where another trial had 5 and
        // 0.00195): the most elements, the largest ULP and absolute differences, the first index.
        const DiffStats ds{s.integer(4), s.real(5), s.integer(6), s.integer(7)};
        if (!a.r.worst_diff) {
          a.r.worst_diff = ds;
        } else {
          DiffStats& w = *a.r.worst_diff;
          w.count = std::max(w.count, ds.count);
          // A NaN against a number is stored as inf (diff_element); any NaN read back counts as that.
          const auto widened = [](double x) { return std::isnan(x) ? std::numeric_limits<double>::infinity() : x; };
          w.max_abs = std::max(widened(w.max_abs), widened(ds.max_abs));
          w.max_ulp = std::max(w.max_ulp, ds.max_ulp);
          // -1 is a trial whose difference healed (a pipeline's, count 0): the lowest index any
          // trial differed at, -1 only where none did (found by review: one healed trial set -1
          // beside another's count).
          if (ds.first_index >= 0) w.first_index = w.first_index < 0 ? ds.first_index : std::min(w.first_index, ds.first_index);
        }
      }
      const std::string choice = s.text(9);
      if (!choice.empty()) {
        auto& [n, digests] = a.choices[choice];
        ++n;
        digests.insert(s.text(2));
        if (a.last_run == s.text(8) && a.last_choice != choice) ++a.r.choice_changes;
      }
      a.last_run = s.text(8);
      a.last_choice = choice;
    }
  }

  // The case over all its runs: digests, times and the status by precedence.
  static CaseResult settle(Acc& a) {
    CaseResult& r = a.r;
    r.distinct = static_cast<std::int64_t>(a.digests.size());
    // The most frequent digest; between equally frequent ones, the first trial's (whose values
    // were checked), not the one first in hex order (found by audit: ND 12/12 named an arbitrary one).
    std::int64_t best = 0;
    for (const auto& [dg, n] : a.digests)
      if (n > best || (n == best && dg == a.first_digest)) {
        best = n;
        r.digest = dg;
      }
    if (!a.times.empty()) {
      std::sort(a.times.begin(), a.times.end());
      const std::size_t m = a.times.size();
      r.median_ns = m % 2 ? a.times[m / 2] : (a.times[m / 2 - 1] + a.times[m / 2]) / 2;
      r.min_ns = a.times.front();
    }
    // Evidence of divergence wins: a run that hit the watchdog cannot undo the digests another
    // run stored. Evidence of one digest wins over runs that produced none.
    if (r.distinct > 1)
      r.status = Status::nondeterministic;
    else if (a.any_evidence)
      r.status = Status::deterministic;
    else if (r.error_runs > 0)
      r.status = Status::error;
    else if (a.any_unsupported)
      r.status = Status::unsupported;
    else
      r.status = Status::skipped;
    if (r.error_runs > 0 && r.status != Status::error)
      r.detail = std::to_string(r.error_runs) + " of " + std::to_string(r.runs) + " runs ended in ERROR (the latest: " +
                 a.error_detail + ")";
    else if (r.status == Status::error)
      r.detail = a.error_detail;
    if (!a.invariance.empty()) r.invariance = combine(a.invariance);
    if (!a.values.empty()) r.values = combine(a.values);
    for (const auto& [name, v] : a.choices)
      r.choices.push_back({name, v.first, static_cast<std::int64_t>(v.second.size())});
    std::stable_sort(r.choices.begin(), r.choices.end(),
                     [](const CaseResult::Choice& x, const CaseResult::Choice& y) { return x.trials > y.trials; });
    return std::move(r);
  }

  const Store& store_;
  sqlite3* db_;
  LoadScope scope_;
  std::string run_filter_;   // of the runs read
  std::string rows_prefix_;  // a WITH clause the case-row and trial queries name
  std::string rows_filter_;  // of the case rows read
  std::string trials_filter_;  // of the trials read
  ReportData d_;
  std::map<std::pair<std::string, std::string>, Acc> acc_;  // by (case id, stack)
};

}  // namespace

ReportData load_report_data(const Store& store, const std::optional<std::string>& run_id) {
  const ReadSnapshot snapshot(store);
  return Loader(store, run_id ? LoadScope{LoadScope::Kind::run, *run_id} : LoadScope{}).load();
}

ReportData load_run_evidence(const Store& store, const std::string& run_id) {
  const ReadSnapshot snapshot(store);
  ReportData d = Loader(store, {LoadScope::Kind::run_verdict, run_id}).load();
  std::string stack;
  std::set<std::string> cases;
  try {
    sql::Statement s(store.db(), "SELECT r.fingerprint_id, cr.case_id FROM runs r LEFT JOIN case_runs cr ON cr.run_id = r.id WHERE r.id = ?");
    s.bind(1, run_id);
    while (s.step()) {
      stack = s.text(0);
      if (!s.is_null(1)) cases.insert(s.text(1));
    }
  } catch (const sql::Error& e) {
    fail_environment(store.path() + ": cannot read the store: " + e.what());
  }
  const auto others = std::stable_partition(d.results.begin(), d.results.end(),
                                            [&](const CaseResult& r) { return r.stack == stack && cases.count(r.case_id); });
  d.partners.assign(std::make_move_iterator(others), std::make_move_iterator(d.results.end()));
  d.results.erase(others, d.results.end());
  const auto other_stacks =
      std::stable_partition(d.stacks.begin(), d.stacks.end(), [&](const StackInfo& s) { return s.id == stack; });
  d.partner_stacks.assign(std::make_move_iterator(other_stacks), std::make_move_iterator(d.stacks.end()));
  d.stacks.erase(other_stacks, d.stacks.end());
  d.selection = "the cases of run " + run_id + ", with every run's evidence for them on its stack";
  return d;
}

}  // namespace d9m
