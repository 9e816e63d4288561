#include "harness/report/results.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "harness/core/error.h"
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

double CaseResult::bound95() const {
  if (trials < 2) return 1.0;
  return 1.0 - std::pow(0.05, 1.0 / static_cast<double>(trials - 1));
}

const StackInfo& ReportData::stack(const std::string& id) const {
  for (const auto& s : stacks)
    if (s.id == id) return s;
  throw std::out_of_range("unknown stack " + id);
}

ReportData load_report_data(const Store& store, const std::optional<std::string>& run_id) {
  ReportData d;
  d.store_path = store.path();
  d.generated_at = utc_now();
  sqlite3* db = store.db();
  const std::string run_filter = run_id ? " WHERE r.id = ?1" : "";
  try {
    d.evidence = evidence_of(db);
    {
      sql::Statement s(db,
                       "SELECT r.fingerprint_id, f.canonical, r.host, r.state, r.catalog_digest, r.d9m_version,"
                       " r.trials_per_case, r.threads, r.id, r.started_at, coalesce(r.finished_at, ''), r.arguments, r.d9m_commit,"
                       " coalesce(r.chain_root, ''), " + std::string(store.schema_version() >= 2 ? "r.resumes" : "0") +
                           " FROM runs r JOIN fingerprints f ON f.id = r.fingerprint_id" +
                           run_filter + " ORDER BY r.started_at, r.id");
      if (run_id) s.bind(1, *run_id);
      std::set<std::string> cats, versions;
      std::set<std::int64_t> ns, ts;
      while (s.step()) {
        const std::string id = s.text(0);
        auto it = std::find_if(d.stacks.begin(), d.stacks.end(), [&](const StackInfo& x) { return x.id == id; });
        if (it == d.stacks.end()) {
          StackInfo si;
          si.id = id;
          si.label = std::string("S").append(std::to_string(d.stacks.size() + 1));
          si.fingerprint = json::parse(s.text(1), nullptr, false);
          d.stacks.push_back(std::move(si));
          it = d.stacks.end() - 1;
        }
        ++it->runs;
        if (std::find(it->hosts.begin(), it->hosts.end(), s.text(2)) == it->hosts.end()) it->hosts.push_back(s.text(2));
        ++d.runs;
        // A run still marked running whose process is gone was interrupted; only a write marks
        // it so in the store, but every report says so at once.
        std::string state = s.text(3);
        if (state == "running" && !store.run_alive(s.text(8))) state = "interrupted";
        if (state == "interrupted") ++d.interrupted_runs;
        cats.insert(s.text(4));
        versions.insert(s.text(5));
        ns.insert(s.integer(6));
        ts.insert(s.integer(7));
        d.run_rows.push_back({s.text(8), id, s.text(2), state, s.text(9), s.text(10), s.text(11), s.text(4), s.text(5),
                              s.text(12), s.text(13), s.integer(6), s.integer(7), s.integer(14)});
      }
      d.catalog_digests.assign(cats.begin(), cats.end());
      d.d9m_versions.assign(versions.begin(), versions.end());
      d.trials_per_case.assign(ns.begin(), ns.end());
      d.threads.assign(ts.begin(), ts.end());
    }

    // Per case and stack: the case_runs rows, then the trials for digests, times and diffs.
    struct Acc {
      CaseResult r;
      std::map<std::string, std::int64_t> digests;
      std::vector<std::int64_t> times;
      bool any_error = false, any_skipped = false, any_unsupported = false, any_evidence = false;
    };
    std::map<std::pair<std::string, std::string>, Acc> acc;
    {
      sql::Statement s(db,
                       "SELECT r.fingerprint_id, c.id, c.op, c.variant, c.backend, c.config, c.config_id, c.params,"
                       " c.input_digest, c.output_dtype, c.output_shape, cr.claim_determinism, cr.claim_source,"
                       " cr.claim_reason, cr.status, cr.detail, cr.claim_bit_equal_to FROM case_runs cr JOIN runs r ON r.id = cr.run_id"
                       " JOIN cases c ON c.id = cr.case_id" + run_filter);
      if (run_id) s.bind(1, *run_id);
      while (s.step()) {
        Acc& a = acc[{s.text(1), s.text(0)}];
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
        }
        // The latest run's claim wins (claims may be refined between d9m versions).
        r.claim_determinism = s.text(11);
        r.claim_source = s.text(12);
        r.claim_reason = s.text(13);
        r.bit_equal_to = s.text(16);
        ++r.runs;
        const Status st = status_from_string(s.text(14));
        if (st == Status::error) a.any_error = true;
        if (st == Status::skipped) a.any_skipped = true;
        if (st == Status::unsupported) a.any_unsupported = true;
        if (st == Status::deterministic || st == Status::nondeterministic) a.any_evidence = true;
        if (!s.text(15).empty()) r.detail = s.text(15);
      }
    }
    {
      sql::Statement s(db,
                       "SELECT r.fingerprint_id, t.case_id, t.digest, t.elapsed_ns, t.diff_count, t.diff_max_abs,"
                       " t.diff_max_ulp, t.diff_first_index FROM trials t JOIN runs r ON r.id = t.run_id" + run_filter);
      if (run_id) s.bind(1, *run_id);
      while (s.step()) {
        auto it = acc.find({s.text(1), s.text(0)});
        if (it == acc.end()) continue;
        Acc& a = it->second;
        ++a.digests[s.text(2)];
        a.times.push_back(s.integer(3));
        ++a.r.trials;
        if (!s.is_null(4)) {
          DiffStats ds{s.integer(4), s.real(5), s.integer(6), s.integer(7)};
          if (!a.r.worst_diff || ds.max_ulp > a.r.worst_diff->max_ulp) a.r.worst_diff = ds;
        }
      }
    }
    for (auto& [key, a] : acc) {
      CaseResult& r = a.r;
      r.distinct = static_cast<std::int64_t>(a.digests.size());
      std::int64_t best = 0;
      for (const auto& [dg, n] : a.digests)
        if (n > best) {
          best = n;
          r.digest = dg;
        }
      if (!a.times.empty()) {
        std::sort(a.times.begin(), a.times.end());
        const std::size_t m = a.times.size();
        r.median_ns = m % 2 ? a.times[m / 2] : (a.times[m / 2 - 1] + a.times[m / 2]) / 2;
        r.min_ns = a.times.front();
      }
      if (a.any_error)
        r.status = Status::error;
      else if (r.distinct > 1)
        r.status = Status::nondeterministic;
      else if (a.any_evidence)
        r.status = Status::deterministic;
      else if (a.any_unsupported)
        r.status = Status::unsupported;
      else
        r.status = Status::skipped;
      d.results.push_back(std::move(r));
    }
  } catch (const sql::Error& e) {
    fail_environment(store.path() + ": cannot read the store: " + e.what());
  } catch (const std::invalid_argument& e) {
    fail_environment(store.path() + ": the store holds a value d9m does not know (" + e.what() + "); `d9m verify` lists the faults");
  }
  // A store whose rows do not hang together (found by fuzzing: a run whose fingerprint row is
  // missing) is refused with a message, not rendered half.
  for (const auto& r : d.results)
    if (std::none_of(d.stacks.begin(), d.stacks.end(), [&](const StackInfo& s) { return s.id == r.stack; }))
      fail_environment(store.path() + ": the store is inconsistent: results refer to stack " + r.stack.substr(0, 12) +
                       ", which has no fingerprint row; `d9m verify` lists the faults");
  std::sort(d.results.begin(), d.results.end(), [&](const CaseResult& a, const CaseResult& b) {
    return std::tie(a.op, a.config, a.variant, a.stack) < std::tie(b.op, b.config, b.variant, b.stack);
  });
  return d;
}

std::vector<CrossCheck> cross_checks(const ReportData& data) {
  std::vector<CrossCheck> out;
  for (const auto& r : data.results) {
    if (r.bit_equal_to.empty() || r.status != Status::deterministic) continue;
    for (const auto& p : data.results)
      if (p.variant == r.bit_equal_to && p.op == r.op && p.config_id == r.config_id && p.stack == r.stack &&
          p.input_digest == r.input_digest && p.status == Status::deterministic)
        out.push_back({r.op, r.config, r.stack, r.variant, p.variant, r.digest, p.digest});
  }
  return out;
}

std::vector<Cost> determinism_costs(const ReportData& data) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<const CaseResult*>> groups;
  for (const auto& r : data.results)
    if (r.median_ns) groups[{r.op, r.config, r.stack, r.backend}].push_back(&r);
  std::vector<Cost> out;
  for (const auto& [key, rs] : groups) {
    const CaseResult *det = nullptr, *nd = nullptr;
    for (const auto* r : rs) {
      // The serial reference is single-threaded by definition: it is not offered as a fix.
      const bool reference = r->variant.size() >= 7 && r->variant.compare(r->variant.size() - 7, 7, ".serial") == 0;
      if (r->claim_determinism == "deterministic" && r->status == Status::deterministic && !reference &&
          (!det || *r->median_ns < *det->median_ns))
        det = r;
      if (r->claim_determinism == "nondeterministic" && (!nd || *r->median_ns < *nd->median_ns)) nd = r;
    }
    if (det && nd && *nd->median_ns > 0)
      out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), det->variant, nd->variant,
                     static_cast<double>(*det->median_ns) / static_cast<double>(*nd->median_ns)});
  }
  return out;
}

}  // namespace d9m
