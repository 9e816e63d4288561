#include "harness/report/compare.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "harness/core/error.h"
#include "harness/core/fingerprint.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"

namespace d9m {

using nlohmann::json;

namespace {

bool is_hex_prefix(const std::string& s) {
  if (s.size() < 6) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string label(const ReportData& d, const CaseResult& r) { return r.op + "/" + r.config + "/" + r.variant + " on " + d.stack(r.stack).label; }

}  // namespace

void select_stacks(ReportData& data, const std::vector<std::string>& selectors) {
  if (selectors.empty()) return;
  std::vector<StackInfo> kept;
  for (const auto& sel : selectors) {
    bool any = false;
    for (const auto& s : data.stacks) {
      const bool host = std::find(s.hosts.begin(), s.hosts.end(), sel) != s.hosts.end();
      if (s.label == sel || (is_hex_prefix(sel) && s.id.rfind(sel, 0) == 0) || host) {
        any = true;
        if (std::none_of(kept.begin(), kept.end(), [&](const StackInfo& k) { return k.id == s.id; })) kept.push_back(s);
      }
    }
    if (!any) {
      std::string known;
      for (const auto& s : data.stacks) known += (known.empty() ? "" : ", ") + s.label + " (" + s.id.substr(0, 12) + ")";
      fail_usage("stack '" + sel + "' is not in " + data.store_path + " (stacks: " + known + ")");
    }
  }
  std::erase_if(data.results, [&](const CaseResult& r) {
    return std::none_of(kept.begin(), kept.end(), [&](const StackInfo& k) { return k.id == r.stack; });
  });
  data.stacks = kept;
}

ReportData load_operand(const std::string& operand) {
  const auto at = operand.rfind('@');
  const std::string path = at == std::string::npos ? operand : operand.substr(0, at);
  const std::string sel = at == std::string::npos ? "" : operand.substr(at + 1);
  const Store store = Store::open(path, Store::Mode::read_only);
  if (sel.rfind("run:", 0) == 0) {
    const std::string prefix = sel.substr(4);
    std::vector<std::string> ids;
    sql::Statement s(store.db(), "SELECT id FROM runs WHERE substr(id, 1, length(?1)) = ?1");
    s.bind(1, prefix);
    while (s.step()) ids.push_back(s.text(0));
    if (ids.size() != 1)
      fail_usage(operand + ": " + (ids.empty() ? "no run" : "more than one run") + " with id prefix '" + prefix + "'");
    return load_report_data(store, ids[0]);
  }
  ReportData d = load_report_data(store);
  if (!sel.empty()) select_stacks(d, {sel});
  return d;
}

DiffReport diff_reports(const ReportData& a, const ReportData& b, double tol) {
  // Two single stacks compare across stacks (stack-to-stack); otherwise cases pair on the stack.
  const bool across = a.stacks.size() == 1 && b.stacks.size() == 1;
  auto key = [&](const CaseResult& r) { return r.case_id + (across ? "" : "|" + r.stack); };
  std::map<std::string, const CaseResult*> ma, mb;
  for (const auto& r : a.results) ma[key(r)] = &r;
  for (const auto& r : b.results) mb[key(r)] = &r;
  DiffReport d;
  char buf[160];
  for (const auto& [k, ra] : ma) {
    auto it = mb.find(k);
    if (it == mb.end()) {
      d.only_a.push_back(label(a, *ra));
      continue;
    }
    const CaseResult& rb = *it->second;
    ++d.compared;
    const std::string name = ra->op + "/" + ra->config + "/" + ra->variant;
    if (rb.claim_broken() && !ra->claim_broken())
      d.regressions.push_back(name + ": claimed deterministic, " + std::to_string(rb.distinct) + " distinct digests in " +
                              std::to_string(rb.trials) + " trials (was " + to_string(ra->status) + ")");
    if (ra->status != rb.status) d.status_changes.push_back(name + ": " + to_string(ra->status) + " -> " + to_string(rb.status));
    if (ra->status == Status::deterministic && rb.status == Status::deterministic && ra->digest != rb.digest)
      d.digest_changes.push_back(name + ": " + ra->digest + " -> " + rb.digest);
    if (ra->median_ns && rb.median_ns && rb.min_ns && ra->min_ns && *ra->median_ns > 0) {
      const double ratio = static_cast<double>(*rb.median_ns) / static_cast<double>(*ra->median_ns);
      const bool slower = ratio > 1 + tol && *rb.min_ns > *ra->median_ns;
      const bool faster = ratio < 1 / (1 + tol) && *rb.median_ns < *ra->min_ns;
      if (slower || faster) {
        std::snprintf(buf, sizeof buf, ": median %.3g us -> %.3g us (%.2fx, %s)", static_cast<double>(*ra->median_ns) / 1e3,
                      static_cast<double>(*rb.median_ns) / 1e3, ratio, slower ? "slower" : "faster");
        d.timing_changes.push_back(name + buf);
      }
    }
  }
  for (const auto& [k, rb] : mb) {
    if (ma.count(k)) continue;
    d.only_b.push_back(label(b, *rb));
    if (rb->claim_broken()) d.regressions.push_back(rb->op + "/" + rb->config + "/" + rb->variant + ": new case, claim broken");
  }
  return d;
}

std::string render_diff(const DiffReport& d, const std::string& a, const std::string& b) {
  std::ostringstream o;
  o << "# d9m diff\n\n```\n# A: " << a << "\n# B: " << b << "\n# cases compared: " << d.compared << "   only in A: " << d.only_a.size()
    << "   only in B: " << d.only_b.size() << "\n```\n";
  auto section = [&](const char* title, const std::vector<std::string>& v) {
    if (v.empty()) return;
    o << "\n## " << title << " (" << v.size() << ")\n\n";
    for (const auto& x : v) o << "- " << x << "\n";
  };
  section("Regressions: deterministic claims broken in B", d.regressions);
  section("Status changes", d.status_changes);
  section("Digest changes of deterministic cases", d.digest_changes);
  section("Timing changes beyond noise", d.timing_changes);
  section("Only in A", d.only_a);
  section("Only in B", d.only_b);
  o << "\n" << (d.regressions.empty() ? "No deterministic claim regressed.\n" : "REGRESSED: a deterministic claim broke.\n");
  return o.str();
}

json pin_baseline(const ReportData& data) {
  json stacks = json::array();
  for (const auto& s : data.stacks) {
    json cases = json::array();
    for (const auto& r : data.results)
      // Golden digests are what deterministic claims promise; a nondeterministic variant that
      // happened to repeat itself (one thread, disjoint addresses) promises nothing.
      if (r.stack == s.id && r.status == Status::deterministic && r.claim_determinism == "deterministic")
        cases.push_back({{"case_id", r.case_id}, {"op", r.op}, {"config", r.config}, {"variant", r.variant},
                         {"input_digest", r.input_digest}, {"digest", r.digest}, {"trials", r.trials}});
    stacks.push_back({{"id", s.id}, {"summary", s.summary()}, {"cases", cases}});
  }
  return {{"schema", "d9m.baseline/1"}, {"created_at", data.generated_at}, {"store", data.store_path},
          {"d9m", d9m_version() + " " + d9m_commit()}, {"stacks", stacks}};
}

BaselineCheck check_baseline(const ReportData& data, const json& baseline, const std::string& source) {
  if (!baseline.is_object() || baseline.value("schema", "") != "d9m.baseline/1" || !baseline.contains("stacks") ||
      !baseline["stacks"].is_array())
    fail_usage(source + ": not a d9m baseline (expected an object with \"schema\": \"d9m.baseline/1\" and \"stacks\")");
  BaselineCheck c;
  for (const auto& s : baseline["stacks"]) {
    const std::string id = s.value("id", "");
    const bool present = std::any_of(data.stacks.begin(), data.stacks.end(), [&](const StackInfo& x) { return x.id == id; });
    if (!present) {
      c.notes.push_back("baseline stack " + id.substr(0, 12) + " (" + s.value("summary", "") + ") is not in the store: not checked");
      continue;
    }
    std::map<std::string, const CaseResult*> now;
    for (const auto& r : data.results)
      if (r.stack == id) now[r.case_id] = &r;
    for (const auto& bc : s.value("cases", json::array())) {
      const std::string name = bc.value("op", "?") + "/" + bc.value("config", "?") + "/" + bc.value("variant", "?") + " on " +
                               data.stack(id).label;
      auto it = now.find(bc.value("case_id", ""));
      if (it == now.end()) {
        c.missing.push_back(name);
        continue;
      }
      ++c.checked;
      const CaseResult& r = *it->second;
      if (r.status != Status::deterministic)
        c.drifted.push_back(name + ": now " + to_string(r.status) + " (" + std::to_string(r.distinct) + " distinct digests in " +
                            std::to_string(r.trials) + " trials)");
      else if (r.digest != bc.value("digest", ""))
        c.drifted.push_back(name + ": digest " + bc.value("digest", "") + " -> " + r.digest);
    }
  }
  return c;
}

}  // namespace d9m
