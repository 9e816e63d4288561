#include "harness/report/compare.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "harness/core/catalog.h"
#include "harness/core/error.h"
#include "harness/core/fingerprint.h"
#include "harness/core/json_text.h"
#include "harness/report/format.h"
#include "harness/report/model.h"
#include "harness/store/snapshot.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

namespace d9m {

using nlohmann::json;

namespace {

bool is_hex_prefix(const std::string& s) {
  if (s.size() < 6) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string label(const ReportData& d, const CaseResult& r) { return r.label() + " on " + d.stack(r.stack).label; }

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
  // The run-level facts of the selection too (found by audit: the header and JSON counted every
  // run of the store, with their N and threads, and `--audit` failed on a run of a stack left out).
  std::erase_if(data.run_rows, [&](const RunRow& r) {
    return std::none_of(kept.begin(), kept.end(), [&](const StackInfo& k) { return k.id == r.stack; });
  });
  std::set<std::string> cats, versions;
  std::set<std::int64_t> ns, ts;
  data.runs = static_cast<std::int64_t>(data.run_rows.size());
  data.interrupted_runs = 0;
  for (const auto& r : data.run_rows) {
    data.interrupted_runs += r.state == "interrupted";
    cats.insert(r.catalog_digest);
    versions.insert(r.d9m_version);
    ns.insert(r.trials_per_case);
    ts.insert(r.threads);
  }
  data.catalog_digests.assign(cats.begin(), cats.end());
  data.d9m_versions.assign(versions.begin(), versions.end());
  data.trials_per_case.assign(ns.begin(), ns.end());
  data.threads.assign(ts.begin(), ts.end());
  std::string labels;
  for (const auto& k : kept) labels += (labels.empty() ? "" : ", ") + k.label;
  data.selection += (data.selection.empty() ? "stacks " : "; stacks ") + labels;
  data.warn_unpaired_claims = true;
}

ReportData load_operand(const std::string& operand) {
  // A file of that name is a store, whatever '@' it holds (a Jenkins workspace "job@2"), and so is
  // a name whose last '@' is followed by more path (found by review: "node@1/d9m.sqlite" was read
  // as store "node" and selector "1/d9m.sqlite").
  auto at = operand.rfind('@');
  struct stat st {};
  if (at != std::string::npos && (::stat(operand.c_str(), &st) == 0 || operand.find('/', at) != std::string::npos))
    at = std::string::npos;
  const std::string path = at == std::string::npos ? operand : operand.substr(0, at);
  const std::string sel = at == std::string::npos ? "" : operand.substr(at + 1);
  const Store store = Store::open(path, Store::Mode::read_only);
  // A gate reads only sound evidence (found by review: a store edited with sqlite3 was compared
  // without a word, where merge and attest refuse it), and compares what it verified.
  const ReadSnapshot snapshot(store);
  require_sound(store, "compared");
  if (sel.rfind("run:", 0) == 0) {
    return load_report_data(store, store.run_id_with_prefix(sel.substr(4), operand));
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
  for (const auto& s : a.stacks) d.stacks_a.push_back(s.label + ": " + s.summary());
  for (const auto& s : b.stacks) d.stacks_b.push_back(s.label + ": " + s.summary());
  if (across && a.stacks.front().id != b.stacks.front().id) {
    d.across_stacks = true;
    // Leaf by leaf (JSON pointers), in order; a field one side lacks reads "(none)".
    const json fa = a.stacks.front().fingerprint.flatten(), fb = b.stacks.front().fingerprint.flatten();
    auto text = [](const json& v) {
      // One line of Markdown code: no backtick, no control character (a host's name is the user's).
      std::string t = v.is_string() ? v.get<std::string>() : v.dump();
      for (char& c : t)
        if (c == '`' || static_cast<unsigned char>(c) < 0x20) c = '?';
      return t.size() > 160 ? t.substr(0, 157) + "..." : t;
    };
    std::map<std::string, std::pair<std::string, std::string>> fields;
    for (const auto& [k, v] : fa.items()) fields[k].first = text(v);
    for (const auto& [k, v] : fb.items()) fields[k].second = text(v);
    for (const auto& [k, v] : fields)  // compared as JSON values; text() is for display only
      if (!fa.contains(k) || !fb.contains(k) || fa.at(k) != fb.at(k))
        d.stack_fields_differ.push_back(k + ": " + (fa.contains(k) ? v.first : "(none)") + " -> " + (fb.contains(k) ? v.second : "(none)"));
  }
  char buf[160];
  for (const auto& [k, ra] : ma) {
    auto it = mb.find(k);
    if (it == mb.end()) {
      d.only_a.push_back(label(a, *ra));
      continue;
    }
    const CaseResult& rb = *it->second;
    ++d.compared;
    const std::string name = ra->label();
    if (!ra->is_control()) ++d.compared_cases;
    if (rb.claim_broken() && !ra->claim_broken())
      d.regressions.push_back(name + ": claimed deterministic, " + std::to_string(rb.distinct) + " distinct digests in " +
                              std::to_string(rb.trials) + " trials (was " + to_string(ra->status) + ")");
    // On one stack, another digest for the same inputs is a divergence between processes: the
    // claim broke, though each side repeated itself (found by review: listed as a digest change,
    // exit 0, where the merged store's report failed). Between stacks it is a stack difference,
    // which nothing promises against.
    if (ra->stack == rb.stack && rb.claim_determinism == "deterministic" && ra->status == Status::deterministic &&
        rb.status == Status::deterministic && ra->digest != rb.digest)
      d.regressions.push_back(name + ": claimed deterministic, another digest than A's on the same stack (" + ra->digest +
                              " -> " + rb.digest + "): the two runs diverged");
    // Evidence that is gone: a case certified in A that only ended in ERROR in B.
    if (rb.claim_determinism == "deterministic" && ra->status == Status::deterministic && rb.status == Status::error)
      d.regressions.push_back(name + ": claimed deterministic, DETERMINISTIC in A, only ERROR in B (" + rb.detail + ")");
    if (rb.values_wrong() && !ra->values_wrong())
      d.regressions.push_back(name + ": values now wrong (" + format::values_text(rb.values) + "; was " +
                              format::values_text(ra->values) + ")");
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
    if (rb->claim_broken()) d.regressions.push_back(rb->label() + ": new case, claim broken");
    if (rb->values_wrong()) d.regressions.push_back(rb->label() + ": new case, values wrong");
  }
  return d;
}

std::string render_diff(const DiffReport& d, const std::string& a, const std::string& b) {
  std::ostringstream o;
  o << "# d9m diff\n\n```\n# A: " << a << "\n# B: " << b << "\n# cases compared: " << d.compared << "   only in A: " << d.only_a.size()
    << "   only in B: " << d.only_b.size() << "\n";
  for (const auto& s : d.stacks_a) o << "# A's stack " << s << "\n";
  for (const auto& s : d.stacks_b) o << "# B's stack " << s << "\n";
  o << "```\n";
  if (d.across_stacks) {
    // Another digest between two stacks breaks no claim; which fields differ says what changed.
    o << "\nA and B are two stacks: a digest that changed between them is a stack difference, not a divergence. "
      << "Their fingerprints differ in " << d.stack_fields_differ.size() << " field(s):\n\n";
    const std::size_t shown = std::min<std::size_t>(d.stack_fields_differ.size(), 40);
    for (std::size_t i = 0; i < shown; ++i) o << "- `" << d.stack_fields_differ[i] << "`\n";
    if (shown < d.stack_fields_differ.size()) o << "- ... and " << d.stack_fields_differ.size() - shown << " more\n";
  }
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

json pin_baseline(const ReportData& data, std::vector<std::string>* left_out) {
  const Verdict verdict = verdict_of(data);
  json stacks = json::array();
  bool beyond_controls = false;
  for (const auto& s : data.stacks) {
    json cases = json::array();
    for (const auto& r : data.results) {
      // Golden digests are what deterministic claims promise; a nondeterministic variant that
      // happened to repeat itself (one thread, disjoint addresses) promises nothing.
      if (r.stack != s.id || r.status != Status::deterministic || r.claim_determinism != "deterministic") continue;
      // A wrong output's digest is not one to hold a later run to, nor is that of any case the
      // verdict fails (found by review: a claim to cpu.serial's bits that did not hold was pinned).
      if (const auto failures = verdict.failures_of(r); !failures.empty()) {
        if (left_out) left_out->push_back(failures.front()->text);
        continue;
      }
      cases.push_back({{"case_id", r.case_id}, {"op", r.op}, {"config", r.config}, {"variant", r.variant}, {"dtype", r.dtype},
                       {"math", r.math}, {"input_digest", r.input_digest}, {"digest", r.digest}, {"trials", r.trials}});
      beyond_controls |= !is_control_config(r.config);
    }
    stacks.push_back({{"id", s.id}, {"summary", s.summary()}, {"cases", cases}});
  }
  // check_baseline refuses a baseline that checks none of a catalogue's cases; such a baseline
  // is refused here already, before it is written.
  if (!beyond_controls)
    fail_usage(data.store_path + ": no case claimed deterministic gave one digest (d9m's controls aside): a baseline "
               "would pin nothing to check");
  return {{"schema", "d9m.baseline/1"}, {"created_at", data.generated_at}, {"store", data.store_path},
          {"d9m", d9m_version() + " " + d9m_commit()}, {"stacks", stacks}};
}

namespace {

bool lower_hex(const std::string& s, std::size_t digits) {
  return s.size() == digits && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A string field of `digits` lowercase hex digits (ids are SHA-256, digests d9m-digest-v1).
std::string hex_field(const JsonFields& f, const json& obj, const std::string& path, const char* key, std::size_t digits) {
  const json& v = f.field(obj, path, key);
  if (!v.is_string() || !lower_hex(v.get<std::string>(), digits))
    f.fail(path + "." + key, "expected " + std::to_string(digits) + " lowercase hex digits, got " +
                                 (v.is_string() ? json_text(v).substr(0, 80) : json_type_name(v)));
  return v.get<std::string>();
}

}  // namespace

Baseline parse_baseline(const std::string& text, const std::string& source) {
  const json root = parse_json_input(text, source);
  const JsonFields f(source);
  f.object(root, "(root)");
  if (!root.contains("schema") || root["schema"] != "d9m.baseline/1")
    f.fail("schema", "not a d9m baseline (expected \"schema\": \"d9m.baseline/1\", got " +
                         (root.contains("schema") ? json_text(root["schema"]).substr(0, 80) : std::string("none")) + ")");
  Baseline b;
  std::set<std::string> stack_ids;
  std::size_t pinned = 0;
  const json& stacks = f.array_field(root, "(root)", "stacks");
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    const std::string sp = "stacks[" + std::to_string(i) + "]";
    const json& s = f.object(stacks[i], sp);
    BaselineStack bs;
    bs.id = hex_field(f, s, sp, "id", 64);
    if (!stack_ids.insert(bs.id).second) f.fail(sp + ".id", "stack " + bs.id.substr(0, 12) + " is pinned twice");
    if (s.contains("summary")) bs.summary = f.string_field(s, sp, "summary");
    std::set<std::string> case_ids;
    const json& cases = f.array_field(s, sp, "cases");
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const std::string cp = sp + ".cases[" + std::to_string(k) + "]";
      const json& c = f.object(cases[k], cp);
      PinnedCase pc;
      pc.case_id = hex_field(f, c, cp, "case_id", 64);
      if (!case_ids.insert(pc.case_id).second) f.fail(cp + ".case_id", "case " + pc.case_id.substr(0, 12) + " is pinned twice");
      pc.op = f.string_field(c, cp, "op");
      pc.config = f.string_field(c, cp, "config");
      pc.variant = f.string_field(c, cp, "variant");
      if (c.contains("dtype")) pc.dtype = f.string_field(c, cp, "dtype");
      if (c.contains("math")) pc.math = f.string_field(c, cp, "math");
      pc.input_digest = hex_field(f, c, cp, "input_digest", 32);
      pc.digest = hex_field(f, c, cp, "digest", 32);
      const json& trials = f.field(c, cp, "trials");
      if (!trials.is_number_unsigned() || trials.get<std::uint64_t>() < 2 || trials.get<std::uint64_t>() > (1ull << 62))
        f.fail(cp + ".trials", "expected an integer of at least 2, got " + json_text(trials).substr(0, 80));
      pc.trials = trials.get<std::int64_t>();
      bs.cases.push_back(std::move(pc));
    }
    pinned += bs.cases.size();
    b.stacks.push_back(std::move(bs));
  }
  // An empty baseline passed every check: pinned from a store with no deterministic evidence, or
  // edited by hand, it must not stand in for one that checks something.
  if (pinned == 0) f.fail("stacks", "the baseline pins no case, so it could never fail a check");
  return b;
}

BaselineCheck check_baseline(const ReportData& data, const Baseline& baseline, const std::string& source) {
  BaselineCheck c;
  std::int64_t pinned = 0, checked_beyond_controls = 0;
  for (const auto& s : baseline.stacks) {
    pinned += static_cast<std::int64_t>(s.cases.size());
    if (!data.reports_stack(s.id)) {
      // Every case it pins is missing: a stack whose machine did not report, or whose driver or
      // library changed (pin again when that was meant), checked nothing and must not pass.
      c.notes.push_back("baseline stack " + s.id.substr(0, 12) + " (" + s.summary + ") is not in the store: its " +
                        std::to_string(s.cases.size()) + " cases are missing");
      for (const auto& bc : s.cases)
        c.missing.push_back(case_label(bc.op, bc.config, bc.variant, bc.dtype, bc.math) + " on stack " + s.id.substr(0, 12));
      continue;
    }
    std::map<std::string, const CaseResult*> now;
    for (const auto& r : data.results)
      if (r.stack == s.id) now[r.case_id] = &r;
    for (const auto& bc : s.cases) {
      const std::string name = case_label(bc.op, bc.config, bc.variant, bc.dtype, bc.math) + " on " + data.stack(s.id).label;
      auto it = now.find(bc.case_id);
      if (it == now.end()) {
        c.missing.push_back(name);
        continue;
      }
      ++c.checked;
      if (!is_control_config(bc.config)) ++checked_beyond_controls;
      const CaseResult& r = *it->second;
      if (r.status != Status::deterministic)
        c.drifted.push_back(name + ": now " + to_string(r.status) + " (" + std::to_string(r.distinct) + " distinct digests in " +
                            std::to_string(r.trials) + " trials)");
      else if (r.digest != bc.digest)
        c.drifted.push_back(name + ": digest " + bc.digest + " -> " + r.digest);
    }
  }
  // Drift is a failure whatever else; otherwise a check that compared none of the catalogue's
  // cases (the controls are in every store of a stack) proved nothing and must not pass.
  if (c.drifted.empty() && checked_beyond_controls == 0) {
    std::string pinned_stacks, store_stacks;
    for (const auto& s : baseline.stacks) pinned_stacks += (pinned_stacks.empty() ? "" : ", ") + s.id.substr(0, 12);
    for (const auto& s : data.stacks) store_stacks += (store_stacks.empty() ? "" : ", ") + s.label + " " + s.id.substr(0, 12);
    fail_usage(source + ": nothing checked: none of the " + std::to_string(pinned) +
               " cases it pins (d9m's controls aside) is in " + data.store_path +
               " (pinned on stacks " + pinned_stacks + "; the store has " + (store_stacks.empty() ? "none" : store_stacks) +
               "). Was it pinned from another catalogue or on another stack?");
  }
  return c;
}

}  // namespace d9m
