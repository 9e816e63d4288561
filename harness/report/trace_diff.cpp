#include "harness/report/trace_diff.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "harness/core/digest.h"
#include "harness/core/catalog.h"
#include "harness/core/error.h"
#include "harness/core/escape.h"
#include "harness/core/files.h"
#include "harness/core/json_text.h"
#include "harness/store/manifest.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"

namespace d9m {

namespace {

using nlohmann::json;

}  // namespace

Store open_trace_store(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail_usage(path + ": a folder, not a store");
  return Store::open(path, Store::Mode::read_only);
}

TraceOperand parse_trace_operand(const std::string& text) {
  TraceOperand o;
  std::string rest = text;
  if (!path_exists(text)) {
    if (const auto hash = rest.rfind('#'); hash != std::string::npos) {
      const std::string n = rest.substr(hash + 1);
      if (n.empty() || n.size() > 12 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
        fail_usage(text + ": expected STORE[@run:ID][#TRIAL] with TRIAL a trial number, got \"#" + n + "\"");
      o.trial = std::stoll(n);
      rest = rest.substr(0, hash);
    }
    const auto slash = rest.rfind('/');
    if (const auto at = rest.rfind("@run:"); at != std::string::npos && (slash == std::string::npos || at > slash)) {
      o.run_prefix = rest.substr(at + 5);
      if (o.run_prefix.empty()) fail_usage(text + ": expected a run id prefix after @run:");
      rest = rest.substr(0, at);
    }
  }
  if (rest.empty()) fail_usage("\"" + text + "\": expected STORE[@run:ID][#TRIAL], with a store before '@' or '#'");
  o.store = rest;
  return o;
}

namespace {

struct CaseRow {
  std::string case_id, op, variant, config, config_id, params, input_digest;
};

struct TraceRow {
  std::int64_t step = 0, position = 0;
  std::string name, op, variant, inputs, digest;
  std::optional<DiffStats> diff;
};

// One operand's store, run and the pipeline cases in it. The store is the side's own (an
// operand of `d9m trace diff`) or the caller's, already open (`d9m report`: one connection, so
// what it reads is inside whatever read transaction the caller holds).
struct Side {
  TraceOperand operand;
  std::optional<Store> owned;
  const Store& store;
  std::string run_id, started_at;

  Side(const Store& s, std::string run, std::string started)
      : operand{s.path(), run, std::nullopt}, store(s), run_id(std::move(run)), started_at(std::move(started)) {}
  Side(const Side&) = delete;

  // Without a run id: the newest run with a trace that `wanted` takes (--pipeline, --setting),
  // else the newest with any trace. Newest by start time, and among runs started in the same
  // second by the order they were stored (found by review: a random id decided the tie).
  Side(const TraceOperand& o, const std::function<bool(const CaseRow&)>& wanted) : operand(o), owned(open_trace_store(o.store)), store(*owned) {
    if (!has_column(store.db(), "trace", "chain"))
      fail_usage(o.store + ": no pipeline traces: the store is of schema " + std::to_string(store.schema_version()) +
                 ", before traces (run a pipeline with this d9m to make some)");
    if (o.run_prefix.empty()) {
      std::vector<std::pair<std::string, std::string>> runs;
      {
        sql::Statement s(store.db(), "SELECT r.id, r.started_at FROM runs r WHERE EXISTS (SELECT 1 FROM trace t WHERE t.run_id = r.id)"
                                     " ORDER BY r.started_at DESC, r.rowid DESC");
        while (s.step()) runs.emplace_back(s.text(0), s.text(1));
      }
      if (runs.empty()) fail_usage(o.store + ": no run in the store has a pipeline trace (`d9m run --pipeline ...` makes one)");
      std::tie(run_id, started_at) = runs.front();
      for (const auto& [id, started] : runs) {
        run_id = id;
        const std::vector<CaseRow> cases = pipeline_cases();
        if (std::any_of(cases.begin(), cases.end(), wanted)) {
          started_at = started;
          return;
        }
      }
      std::tie(run_id, started_at) = runs.front();
    } else {
      run_id = store.run_id_with_prefix(o.run_prefix, o.store + "@run:" + o.run_prefix);
      sql::Statement s(store.db(), "SELECT started_at FROM runs WHERE id = ?");
      s.bind(1, run_id);
      if (s.step()) started_at = s.text(0);
    }
  }

  std::vector<CaseRow> pipeline_cases() const {
    sql::Statement s(store.db(), "SELECT c.id, c.op, c.variant, c.config, c.config_id, c.params, c.input_digest FROM case_runs cr"
                                 " JOIN cases c ON c.id = cr.case_id WHERE cr.run_id = ? AND (substr(c.op, 1, 9) = 'pipeline:' OR substr(c.op, 1, 5) = 'exec:')"
                                 " AND EXISTS (SELECT 1 FROM trace t WHERE t.run_id = cr.run_id AND t.case_id = cr.case_id)"
                                 " ORDER BY cr.seq");
    s.bind(1, run_id);
    std::vector<CaseRow> out;
    while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6)});
    return out;
  }

  std::vector<std::string> trial_digests(const std::string& case_id) const {
    sql::Statement s(store.db(), "SELECT digest FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial");
    s.bind(1, run_id).bind(2, case_id);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    return out;
  }

  // What the trial's autotuning ops chose (trials.choice: schema 5, before traces).
  std::string trial_choice(const std::string& case_id, std::int64_t trial) const {
    sql::Statement s(store.db(), "SELECT choice FROM trials WHERE run_id = ? AND case_id = ? AND trial = ?");
    s.bind(1, run_id).bind(2, case_id).bind(3, trial);
    return s.step() ? s.text(0) : "";
  }

  std::vector<TraceRow> trace(const std::string& case_id, std::int64_t trial) const {
    sql::Statement s(store.db(), "SELECT step, position, name, op, variant, inputs, digest, diff_count, diff_max_abs, diff_max_ulp,"
                                 " diff_first_index FROM trace WHERE run_id = ? AND case_id = ? AND trial = ? ORDER BY step, position");
    s.bind(1, run_id).bind(2, case_id).bind(3, trial);
    std::vector<TraceRow> out;
    while (s.step()) {
      TraceRow r{s.integer(0), s.integer(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6), std::nullopt};
      if (!s.is_null(7)) r.diff = DiffStats{s.integer(7), s.real(8), s.integer(9), s.integer(10)};
      out.push_back(std::move(r));
    }
    return out;
  }
};

// The names of the parameters a pipeline definition updates: state (first used as an input)
// that an op writes.
std::set<std::string> updated_state(const json& definition) {
  std::set<std::string> seen, state, updated;
  if (!definition.is_object() || !definition.contains("ops") || !definition["ops"].is_array()) return updated;
  for (const auto& op : definition["ops"]) {
    if (!op.is_object()) continue;
    if (op.contains("inputs") && op["inputs"].is_array())
      for (const auto& in : op["inputs"])
        if (in.is_string() && seen.insert(in.get<std::string>()).second) state.insert(in.get<std::string>());
    if (op.contains("output") && op["output"].is_string()) {
      const auto out = op["output"].get<std::string>();
      if (state.count(out)) updated.insert(out);
      seen.insert(out);
    }
  }
  return updated;
}

std::string short_id(const std::string& id) { return id.substr(0, 12); }

// "pipeline:cnn" -> "cnn"; a program's trace ("exec:train.py") keeps its prefix.
std::string pipeline_name(const std::string& op) { return op.rfind("pipeline:", 0) == 0 ? op.substr(9) : op; }

TraceDiff diff_one(const Side& sa, const CaseRow& ca, std::int64_t ta, const Side& sb, const CaseRow& cb, std::int64_t tb) {
  TraceDiff d;
  d.pipeline = pipeline_name(ca.op);
  d.setting_a = ca.variant;
  d.setting_b = cb.variant;
  d.config = ca.config;
  const std::vector<std::string> da = sa.trial_digests(ca.case_id), db = sb.trial_digests(cb.case_id);
  auto side = [](const Side& s, const CaseRow& c, std::int64_t t, const std::vector<std::string>& digests) {
    if (t < 0 || t >= static_cast<std::int64_t>(digests.size()))
      fail_usage(s.operand.store + ": run " + short_id(s.run_id) + " has no trial " + std::to_string(t) + " of " + c.op + "/" + c.variant +
                 " (it has " + std::to_string(digests.size()) + ")");
    return TraceSideInfo{s.operand.store, s.run_id, c.case_id, s.started_at, t, digests[static_cast<std::size_t>(t)]};
  };
  d.a = side(sa, ca, ta, da);
  d.b = side(sb, cb, tb, db);
  d.a.choice = sa.trial_choice(ca.case_id, ta);
  d.b.choice = sb.trial_choice(cb.case_id, tb);
  const std::vector<TraceRow> ra = sa.trace(ca.case_id, ta), rb = sb.trace(cb.case_id, tb);
  // A trial's digest is its trajectory (harness/exec/pipeline_exec.h): a trace that does not give
  // it back is not that trial's.
  for (const auto& [rows, who] : {std::pair{&ra, &d.a}, std::pair{&rb, &d.b}}) {
    std::string all;
    for (const auto& r : *rows) all += r.digest + "\n";
    if (digest_v1(all.data(), all.size()).hex() != who->trial_digest)
      fail_usage(who->store + ": the trace of trial " + std::to_string(who->trial) + " of run " + short_id(who->run_id) +
                 " does not give its trial digest " + short_id(who->trial_digest) + " (edited? `d9m verify` says where)");
  }
  // Where the two traces stop running the same ops. A pipeline's ops are fixed by its definition,
  // so there that means another pipeline (refused). A program's depend on its own control flow
  // (found by audit: a racing op that sent one trial down another branch, or a trial that ran one
  // op more, was refused instead of named): the rows before the split are compared as usual, and
  // what comes after it differs.
  const bool program = ca.op.rfind("exec:", 0) == 0;
  const auto same_op = [](const TraceRow& x, const TraceRow& y) {
    return x.step == y.step && x.position == y.position && x.name == y.name && x.op == y.op;
  };
  std::size_t split = 0;
  while (split < std::min(ra.size(), rb.size()) && same_op(ra[split], rb[split])) ++split;
  const bool parted = split < std::max(ra.size(), rb.size());
  if (parted && !program) {
    if (split == std::min(ra.size(), rb.size()))
      fail_usage("the traces of " + ca.op + " differ in length (" + std::to_string(ra.size()) + " and " + std::to_string(rb.size()) +
                 " op rows): not the same pipeline run");
    fail_usage("the traces of " + ca.op + " differ at row " + std::to_string(split) + " (step " + std::to_string(ra[split].step) + " op " +
               ra[split].name + " against step " + std::to_string(rb[split].step) + " op " + rb[split].name + "): not the same pipeline");
  }
  // Element counts are stored against trial 0 of the same run: they describe b against a
  // exactly when a is that trial 0.
  d.stats_known = ca.op.rfind("pipeline:", 0) == 0 && ta == 0 && sa.run_id == sb.run_id && ca.case_id == cb.case_id &&
                  real_path_or_self(sa.operand.store) == real_path_or_self(sb.operand.store);
  const json definition = parse_stored_json(ca.params);
  const std::set<std::string> params = updated_state(definition);
  std::map<std::string, std::string> output_of;  // op name -> the tensor it writes
  if (definition.is_object() && definition.contains("ops") && definition["ops"].is_array())
    for (const auto& op : definition["ops"])
      if (op.is_object() && op.contains("name") && op.contains("output") && op["name"].is_string() && op["output"].is_string())
        output_of[op["name"].get<std::string>()] = op["output"].get<std::string>();
  std::set<std::string> swapped;
  std::map<std::int64_t, StepDivergence> steps;
  for (std::size_t i = 0; i < split; ++i) {
    const TraceRow& x = ra[i];
    const TraceRow& y = rb[i];
    TraceOpRow row{x.step, x.position, x.name, x.op, x.variant, y.variant, x.inputs == y.inputs, x.digest == y.digest, std::nullopt,
                   params.count(output_of[x.name]) > 0};
    if (d.stats_known && !row.output_equal) row.diff = y.diff;
    if (x.variant != y.variant) swapped.insert(x.name + " (" + x.variant + " / " + y.variant + ")");
    StepDivergence& s = steps[x.step];
    s.step = x.step;
    ++s.outputs;
    s.differing_outputs += !row.output_equal;
    if (row.updates_state) {
      ++s.parameters;
      s.differing_parameters += !row.output_equal;
      if (d.stats_known) {
        const std::int64_t n = row.diff ? row.diff->count : 0, u = row.diff ? row.diff->max_ulp : 0;
        s.parameter_elements = s.parameter_elements.value_or(0) + n;
        s.parameter_max_ulp = std::max(s.parameter_max_ulp.value_or(0), u);
      }
    }
    if (d.source) {
      d.propagated += !row.output_equal;
    } else if (row.inputs_equal && !row.output_equal) {
      TraceSource src;
      src.row = row;
      // The claim of the side whose variant is not claimed deterministic, where the two differ
      // (b's otherwise): that is the one the evidence speaks against or for.
      auto claim_of = [&](const std::string& variant) {
        const VariantDef* v = Registry::global().find_variant(x.op, variant);
        if (v) return v->claim;
        return Claim{Determinism::unknown, ClaimSource::design,
                     ca.op.rfind("exec:", 0) == 0 ? "an op of the program's own framework: d9m makes no claim about it"
                                                   : "variant not in this build"};
      };
      const Claim cb_claim = claim_of(y.variant), ca_claim = claim_of(x.variant);
      const Claim& c = cb_claim.determinism == Determinism::deterministic && ca_claim.determinism != Determinism::deterministic
                           ? ca_claim : cb_claim;
      src.claim_variant = &c == &ca_claim ? x.variant : y.variant;
      src.claim_determinism = to_string(c.determinism);
      src.claim_source = to_string(c.source);
      src.claim_reason = c.reason;
      d.source = std::move(src);
    } else if (!row.inputs_equal && !row.output_equal && program) {
      // A program's untraced code (or another process's data) changed an input: the divergence
      // entered outside the traced ops, before this one. (Where the output is equal all the same,
      // nothing traced diverged there: found by audit, a source was named for traces whose every
      // output agreed.)
      TraceSource src;
      src.row = row;
      src.outside = true;
      src.claim_determinism = "unknown";
      src.claim_reason = "its inputs already differ and no traced op before it does (untraced code, or data from outside the "
                         "program, diverged)";
      d.source = std::move(src);
    } else if (!row.inputs_equal && !program) {
      fail_usage("the traces of " + ca.op + " disagree with themselves: op " + x.name + " at step " + std::to_string(x.step) +
                 " has other inputs, yet no op before it differs (`d9m verify` checks whether the store was edited)");
    }
  }
  if (parted) {
    // Past the split every op of either side counts as a differing output, in the step of a's row
    // (b's where a has ended).
    const auto where = [](const std::vector<TraceRow>& rows, std::size_t i) {
      return i < rows.size() ? "`" + rows[i].name + "` (step " + std::to_string(rows[i].step) + ", op " + std::to_string(rows[i].position) + ")"
                             : std::string("nothing (its trace ends)");
    };
    d.notes.push_back("the two traces part after " + std::to_string(split) + " op(s): a runs " + where(ra, split) + ", b runs " +
                      where(rb, split) + "; every op from there on is counted as differing");
    for (std::size_t i = split; i < std::max(ra.size(), rb.size()); ++i) {
      const TraceRow& r = i < ra.size() ? ra[i] : rb[i];
      StepDivergence& s = steps[r.step];
      s.step = r.step;
      ++s.outputs;
      ++s.differing_outputs;
    }
    if (d.source) {
      d.propagated += static_cast<std::int64_t>(std::max(ra.size(), rb.size()) - split);
    } else {
      // Every traced output before the split agreed: the program chose another path on something
      // no traced op computed.
      const TraceRow& r = split < ra.size() ? ra[split] : rb[split];
      TraceSource src;
      src.row = TraceOpRow{r.step, r.position, r.name, r.op, split < ra.size() ? ra[split].variant : "", split < rb.size() ? rb[split].variant : "",
                           false, false, std::nullopt, false};
      src.outside = true;
      src.claim_determinism = "unknown";
      src.claim_reason = std::string(split < std::min(ra.size(), rb.size()) ? "the two traces run other ops from here"
                                                                              : "one trace ends here and the other goes on") +
                         ", and every traced op's output before agrees: the program's own code chose another path on something "
                         "no traced op computed";
      d.source = std::move(src);
      d.propagated = static_cast<std::int64_t>(std::max(ra.size(), rb.size()) - split) - 1;
    }
  }
  for (auto& [_, s] : steps) d.by_step.push_back(s);
  d.steps = static_cast<std::int64_t>(d.by_step.size());
  d.ops_per_step = d.steps ? static_cast<std::int64_t>(std::max(ra.size(), rb.size())) / d.steps : 0;
  if (!swapped.empty()) {
    std::string list;
    for (const auto& s : swapped) list += (list.empty() ? "" : ", ") + s;
    d.notes.push_back("the two sides run other variants at " + list +
                      ": a difference there may be the variants', not a race");
  }
  // An autotuning op searches once a trial (harness/exec/pipeline_exec.h): where the searches
  // chose otherwise, that op's outputs differ by the choice, not by a race.
  if (d.a.choice != d.b.choice)
    d.notes.push_back("the autotuning ops chose otherwise (a: " + (d.a.choice.empty() ? std::string("nothing") : d.a.choice) +
                      "; b: " + (d.b.choice.empty() ? std::string("nothing") : d.b.choice) +
                      "): a difference there follows the choice, which the timing made");
  if (ca.op.rfind("exec:", 0) == 0)
    d.notes.push_back("a program's trace (d9m exec, the PyTorch hook) holds digests, not values: the chart counts differing outputs");
  else if (!d.stats_known)
    d.notes.push_back("element counts and ULPs are stored against trial 0 of the same run only: here the chart counts differing "
                      "outputs");
  return d;
}

// The first trial whose trajectory differs from trial ta's, if any.
std::optional<std::int64_t> first_differing_trial(const std::vector<std::string>& digests, std::int64_t ta) {
  if (ta < 0 || ta >= static_cast<std::int64_t>(digests.size())) return std::nullopt;
  for (std::size_t t = 0; t < digests.size(); ++t)
    if (digests[t] != digests[static_cast<std::size_t>(ta)]) return static_cast<std::int64_t>(t);
  return std::nullopt;
}

}  // namespace

std::vector<TraceDiff> diff_traces(const TraceOperand& a, const std::optional<TraceOperand>& b, const std::string& pipeline_glob,
                                   const std::string& setting_glob) {
  const auto wanted = [&](const CaseRow& c) { return glob_match(pipeline_glob, pipeline_name(c.op)) && glob_match(setting_glob, c.variant); };
  const Side sa(a, wanted);
  const std::optional<Side> sb_own = b ? std::optional<Side>(std::in_place, *b, wanted) : std::nullopt;
  const Side& sb = sb_own ? *sb_own : sa;
  std::vector<TraceDiff> out;
  const std::vector<CaseRow> cases_b = sb.pipeline_cases();
  for (const CaseRow& ca : sa.pipeline_cases()) {
    if (!glob_match(pipeline_glob, pipeline_name(ca.op)) || !glob_match(setting_glob, ca.variant)) continue;
    // The same pipeline case on the other side: the same setting, else the same pipeline
    // definition under another setting when the operands name one of each.
    const CaseRow* cb = nullptr;
    for (const CaseRow& c : cases_b)
      if (c.op == ca.op && c.config_id == ca.config_id && c.variant == ca.variant) cb = &c;
    if (!cb && b) {
      for (const CaseRow& c : cases_b)
        if (c.op == ca.op && c.config_id == ca.config_id && glob_match(setting_glob, c.variant) && !cb) cb = &c;
      if (!cb) {
        for (const CaseRow& c : cases_b)
          if (c.op == ca.op)
            fail_usage(b->store + ": " + ca.op + " there is another pipeline (definition " + c.config_id + ", here " + ca.config_id +
                       "): its trace cannot be compared op by op");
        continue;
      }
    }
    if (!cb) continue;
    if (cb->input_digest != ca.input_digest)
      fail_usage(ca.op + ": the two sides start from other inputs (input digests " + short_id(ca.input_digest) + " and " +
                 short_id(cb->input_digest) + "): a trace diff compares runs of the same inputs");
    std::int64_t ta = a.trial.value_or(0), tb = 0;
    if (b && b->trial) {
      tb = *b->trial;
    } else if (!b || (sb.run_id == sa.run_id && cb->case_id == ca.case_id &&
                      real_path_or_self(a.store) == real_path_or_self(b->store))) {
      // (Two stores that hold the same run, a copy or a merge, are two stores: trial 0 of each,
      // as the operands say. Found by audit: they were taken for one run.)
      // One run: trial ta against the first trial whose trajectory differs from it, else the next one.
      tb = first_differing_trial(sa.trial_digests(ca.case_id), ta).value_or(ta == 0 ? 1 : 0);
    }
    out.push_back(diff_one(sa, ca, ta, sb, *cb, tb));
  }
  if (out.empty())
    fail_usage(a.store + ": run " + short_id(sa.run_id) + " has no pipeline trace" +
               (pipeline_glob != "*" || setting_glob != "*" ? " matching --pipeline " + pipeline_glob + " --setting " + setting_glob : "") +
               (b ? " that " + b->store + " also holds" : ""));
  return out;
}

std::vector<PipelineTrace> pipeline_traces(const Store& store, const std::vector<std::string>& run_ids) {
  std::vector<PipelineTrace> out;
  if (!has_column(store.db(), "trace", "chain")) return out;  // a store before traces (schema < 6)
  try {
    for (const std::string& run_id : run_ids) {
      sql::Statement s(store.db(), "SELECT started_at FROM runs WHERE id = ?");
      s.bind(1, run_id);
      if (!s.step()) continue;
      const Side side(store, run_id, s.text(0));
      for (const CaseRow& c : side.pipeline_cases()) {  // pipelines, and programs traced by d9m exec
        PipelineTrace p{run_id, pipeline_name(c.op), c.variant, c.config, 0, 0, std::nullopt, ""};
        const std::vector<std::string> digests = side.trial_digests(c.case_id);
        p.trials = static_cast<std::int64_t>(digests.size());
        p.distinct = static_cast<std::int64_t>(std::set<std::string>(digests.begin(), digests.end()).size());
        if (const auto tb = first_differing_trial(digests, 0)) {
          try {
            p.diff = diff_one(side, c, 0, side, c, *tb);
          } catch (const Error& e) {
            p.problem = e.what();
          }
        }
        out.push_back(std::move(p));
      }
    }
  } catch (const sql::Error& e) {
    fail_environment(store.path() + ": cannot read the pipeline traces: " + e.what());
  }
  return out;
}

namespace {

std::string side_text(const TraceSideInfo& s) {
  return s.store + " run " + short_id(s.run_id) + " trial " + std::to_string(s.trial) + (s.choice.empty() ? "" : " (chose " + s.choice + ")");
}

std::string stats_text(const std::optional<DiffStats>& d) {
  if (!d) return "";
  char buf[128];
  std::snprintf(buf, sizeof buf, " in %lld elements (max |a-b| %.3g, max %lld ULP, first at %lld)", static_cast<long long>(d->count),
                d->max_abs, static_cast<long long>(d->max_ulp), static_cast<long long>(d->first_index));
  return buf;
}

std::string opt_text(const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : "?"; }

// "cpu.atomic", or "cpu.ordered on a, test.flip_at_call on b" where the sides run other variants.
std::string variants_text(const TraceOpRow& r) {
  return r.variant_a == r.variant_b ? r.variant_b : r.variant_a + " on a, " + r.variant_b + " on b";
}

}  // namespace

std::string render_trace_diff_markdown(const std::vector<TraceDiff>& diffs) {
  std::string m = "# d9m trace diff\n";
  for (const TraceDiff& d : diffs) {
    m += std::string("\n## ") + (d.pipeline.rfind("exec:", 0) == 0 ? "program " : "pipeline ") + d.pipeline + " (setting " + d.setting_a + (d.setting_b != d.setting_a ? " / " + d.setting_b : "") + ", " +
         d.config + ", " + std::to_string(d.ops_per_step) + " ops per step)\n\n";
    m += "# a: " + side_text(d.a) + "   trial digest " + short_id(d.a.trial_digest) + "\n";
    m += "# b: " + side_text(d.b) + "   trial digest " + short_id(d.b.trial_digest) + "\n\n";
    if (d.source) {
      const TraceOpRow& r = d.source->row;
      if (d.source->outside)
        m += "**Source: outside the traced ops**, before step " + std::to_string(r.step) + ", op " + std::to_string(r.position) + " `" +
             r.name + "` (" + r.op + "): " + d.source->claim_reason + ".\n\n";
      else
        m += "**Source:** step " + std::to_string(r.step) + ", op " + std::to_string(r.position) + " `" + r.name + "` (" + r.op + ", " +
             variants_text(r) + "): its inputs are bit-equal on both sides and its output differs" + stats_text(r.diff) + ".\n\n";
      if (d.source->outside)
        m += "No traced op is to blame, so no claim is checked.\n\n";
      else
        m += "Claim of " + d.source->claim_variant + ": " + d.source->claim_determinism +
             (d.source->claim_source.empty() ? "" : " (" + d.source->claim_source + ")") + ": " + d.source->claim_reason + "\n\n";
      m += "Propagated: " + std::to_string(d.propagated) + " differing op output(s) after it.\n\n";
    } else {
      m += "**No divergence:** every op's output is bit-equal on both sides.\n\n";
    }
    m += "| step | outputs differing | parameters differing | parameter elements differing | max ULP (parameters) |\n";
    m += "| ---: | ---: | ---: | ---: | ---: |\n";
    for (const auto& s : d.by_step)
      m += "| " + std::to_string(s.step) + " | " + std::to_string(s.differing_outputs) + "/" + std::to_string(s.outputs) + " | " +
           std::to_string(s.differing_parameters) + "/" + std::to_string(s.parameters) + " | " + opt_text(s.parameter_elements) +
           " | " + opt_text(s.parameter_max_ulp) + " |\n";
    for (const auto& n : d.notes) m += "\nNote: " + n + ".\n";
  }
  const auto sources = std::count_if(diffs.begin(), diffs.end(), [](const TraceDiff& d) { return d.source.has_value(); });
  m += "\n# " + std::to_string(diffs.size()) + " trace(s) compared, " + std::to_string(sources) + " with a source of divergence\n";
  return m;
}

namespace {

json diff_json(const std::optional<DiffStats>& d) {
  if (!d) return nullptr;
  return {{"count", d->count}, {"max_abs", d->max_abs}, {"max_ulp", d->max_ulp}, {"first_index", d->first_index}};
}

json opt_json(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); }

json side_json(const TraceSideInfo& s) {
  return {{"store", s.store}, {"run", s.run_id}, {"case_id", s.case_id}, {"trial", s.trial}, {"trial_digest", s.trial_digest},
          {"choice", s.choice}};
}

}  // namespace

json trace_diff_json(const TraceDiff& d) {
  json j = {{"pipeline", d.pipeline}, {"setting", d.setting_a}, {"setting_b", d.setting_b}, {"config", d.config},
            {"a", side_json(d.a)},    {"b", side_json(d.b)},   {"ops_per_step", d.ops_per_step}, {"stats_known", d.stats_known},
            {"propagated", d.propagated}, {"notes", d.notes}, {"source", nullptr}, {"steps", json::array()}};
  if (d.source) {
    const TraceOpRow& r = d.source->row;
    j["source"] = {{"step", r.step},          {"position", r.position}, {"name", r.name}, {"op", r.op}, {"outside", d.source->outside},
                   {"variant", r.variant_b}, {"variant_a", r.variant_a}, {"diff", diff_json(r.diff)},
                   {"claim", {{"variant", d.source->claim_variant}, {"determinism", d.source->claim_determinism}, {"source", d.source->claim_source},
                              {"reason", d.source->claim_reason}}}};
  }
  for (const auto& s : d.by_step)
    j["steps"].push_back({{"step", s.step}, {"outputs", s.outputs}, {"differing_outputs", s.differing_outputs},
                          {"parameters", s.parameters}, {"differing_parameters", s.differing_parameters},
                          {"parameter_elements", opt_json(s.parameter_elements)}, {"parameter_max_ulp", opt_json(s.parameter_max_ulp)}});
  return j;
}

std::string render_trace_diff_json(const std::vector<TraceDiff>& diffs) {
  json all = json::array();
  for (const TraceDiff& d : diffs) all.push_back(trace_diff_json(d));
  return json_text(json{{"schema", "d9m.trace-diff/1"}, {"diffs", all}}, 1) + "\n";
}

// The divergence chart: per step, the differing parameter elements and their max ULP (log scale,
// where known), else the differing op outputs, as an inline SVG.
std::string trace_chart_svg(const TraceDiff& d) {
  const double w = 640, h = 240, left = 56, right = 16, top = 16, bottom = 36;
  const bool elements = d.stats_known;
  struct Series {
    std::string name, colour;
    std::vector<double> y;
  };
  std::vector<Series> series;
  if (elements) {
    Series e{"parameter elements differing", "#c0392b", {}}, u{"max ULP (parameters)", "#2e86c1", {}};
    for (const auto& s : d.by_step) {
      e.y.push_back(static_cast<double>(s.parameter_elements.value_or(0)));
      u.y.push_back(static_cast<double>(s.parameter_max_ulp.value_or(0)));
    }
    series = {e, u};
  } else {
    Series o{"op outputs differing", "#c0392b", {}};
    for (const auto& s : d.by_step) o.y.push_back(static_cast<double>(s.differing_outputs));
    series = {o};
  }
  double ymax = 1;
  for (const auto& s : series)
    for (double y : s.y) ymax = std::max(ymax, y);
  const double decades = std::max(1.0, std::ceil(std::log10(ymax + 1)));
  const std::size_t n = d.by_step.size();
  auto px = [&](std::size_t i) { return left + (n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.5) * (w - left - right); };
  auto py = [&](double y) { return top + (1 - std::log10(y + 1) / decades) * (h - top - bottom); };
  char buf[256];
  // Inline in HTML, so no xmlns: the page names no URL at all.
  std::string svg = "<svg width=\"640\" height=\"240\" role=\"img\" aria-label=\"divergence by step\">";
  svg += "<rect x=\"0\" y=\"0\" width=\"640\" height=\"240\" fill=\"#fff\"/>";
  for (int k = 0; k <= static_cast<int>(decades); ++k) {
    const double y = py(std::pow(10.0, k) - 1);
    std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%s</text>",
                  left, y, w - right, y, left - 4, y + 3, k == 0 ? "0" : ("1e" + std::to_string(k)).c_str());
    svg += buf;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (n > 12 && i % ((n + 11) / 12) != 0 && i + 1 != n) continue;
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%lld</text>", px(i), h - bottom + 14,
                  static_cast<long long>(d.by_step[i].step));
    svg += buf;
  }
  std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">step</text>", (left + w - right) / 2, h - 4);
  svg += buf;
  for (std::size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    std::string points;
    for (std::size_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "%s%.1f,%.1f", points.empty() ? "" : " ", px(i), py(s.y[i]));
      points += buf;
    }
    svg += "<polyline fill=\"none\" stroke=\"" + s.colour + "\" stroke-width=\"2\" points=\"" + points + "\"/>";
    for (std::size_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>step %lld: %.0f</title></circle>", px(i),
                    py(s.y[i]), s.colour.c_str(), static_cast<long long>(d.by_step[i].step), s.y[i]);
      svg += buf;
    }
    std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">",
                  left + 8, top + 4 + 14.0 * static_cast<double>(k), s.colour.c_str(), left + 22, top + 13 + 14.0 * static_cast<double>(k));
    svg += buf + xml_escape(s.name) + "</text>";
  }
  if (d.source) {
    for (std::size_t i = 0; i < n; ++i)
      if (d.by_step[i].step == d.source->row.step) {
        std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>", px(i), top,
                      px(i), h - bottom);
        svg += buf;
      }
  }
  return svg + "</svg>";
}

std::string trace_source_html(const TraceDiff& d) {
  if (!d.source) return "<b>No divergence:</b> every op's output is bit-equal on both sides.";
  const TraceOpRow& r = d.source->row;
  const std::string propagated = ". Propagated: " + std::to_string(d.propagated) + " differing output(s) after it.";
  // The same words as the Markdown (found by audit: an outside source read "inputs bit-equal").
  if (d.source->outside)
    return "<b>Source: outside the traced ops</b>, before step " + std::to_string(r.step) + ", op " + std::to_string(r.position) + " <code>" +
           xml_escape(r.name) + "</code> (" + xml_escape(r.op) + "): " + xml_escape(d.source->claim_reason) +
           ". No traced op is to blame, so no claim is checked" + propagated;
  return "<b>Source:</b> step " + std::to_string(r.step) + ", op " + std::to_string(r.position) + " <code>" + xml_escape(r.name) +
         "</code> (" + xml_escape(r.op) + ", " + xml_escape(variants_text(r)) + "): inputs bit-equal, output differs" +
         xml_escape(stats_text(r.diff)) + ". Claim of " + xml_escape(d.source->claim_variant) + ": " + xml_escape(d.source->claim_determinism) +
         ": " + xml_escape(d.source->claim_reason) + propagated;
}

std::string render_trace_diff_html(const std::vector<TraceDiff>& diffs) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>d9m trace diff</title>"
                  "<style>body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}"
                  "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}.src{background:#fdecea;padding:.5em}"
                  ".none{background:#eafaf1;padding:.5em}code{background:#f4f4f4}</style></head><body>\n<h1>d9m trace diff</h1>\n";
  for (const TraceDiff& d : diffs) {
    h += std::string("<section class=\"trace\"><h2>") + (d.pipeline.rfind("exec:", 0) == 0 ? "program " : "pipeline ") + xml_escape(d.pipeline) + " <small>(setting " + xml_escape(d.setting_a) +
         (d.setting_b != d.setting_a ? " / " + xml_escape(d.setting_b) : "") + ", " + xml_escape(d.config) + ")</small></h2>\n";
    h += "<p>a: " + xml_escape(side_text(d.a)) + "<br>b: " + xml_escape(side_text(d.b)) + "</p>\n";
    h += std::string(d.source ? "<p class=\"src\" id=\"source\">" : "<p class=\"none\">") + trace_source_html(d) + "</p>\n";
    h += "<figure>" + trace_chart_svg(d) + "<figcaption>Divergence by step (log scale)</figcaption></figure>\n";
    h += "<table><tr><th>step</th><th>outputs differing</th><th>parameters differing</th><th>parameter elements differing</th>"
         "<th>max ULP (parameters)</th></tr>\n";
    for (const auto& s : d.by_step)
      h += "<tr><td>" + std::to_string(s.step) + "</td><td>" + std::to_string(s.differing_outputs) + "/" + std::to_string(s.outputs) +
           "</td><td>" + std::to_string(s.differing_parameters) + "/" + std::to_string(s.parameters) + "</td><td>" +
           opt_text(s.parameter_elements) + "</td><td>" + opt_text(s.parameter_max_ulp) + "</td></tr>\n";
    h += "</table>\n";
    for (const auto& n : d.notes) h += "<p><i>Note: " + xml_escape(n) + ".</i></p>\n";
    h += "</section>\n";
  }
  return h + "</body></html>\n";
}

}  // namespace d9m
