#include "harness/report/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace d9m {

namespace {

std::string where(const ReportData& data, const CaseResult& r) {
  return r.label() + " on " + data.stack(r.stack).label;
}

std::string in_trials(const CaseResult& r) {
  return std::to_string(r.distinct) + " distinct digests in " + std::to_string(r.trials) + " trials";
}

// The order in which one status outweighs another where configs are summed up in one cell.
int weight(Status s) {
  switch (s) {
    case Status::nondeterministic: return 4;
    case Status::error: return 3;
    case Status::deterministic: return 2;
    case Status::unsupported: return 1;
    case Status::skipped: return 0;
  }
  return 0;
}

// Who may be offered as the deterministic fix: not the serial reference (one thread by
// definition), not a control, not a variant whose role this d9m does not know.
bool may_be_a_solution(Role r) { return r != Role::reference && r != Role::control && r != Role::program && r != Role::unset; }

// a, b, ..., z, aa, ab, ...
std::string footnote_key(std::size_t i) {
  std::string k;
  for (++i; i > 0; i = (i - 1) / 26) k.insert(k.begin(), static_cast<char>('a' + (i - 1) % 26));
  return k;
}

// Each stack's fingerprint without the frameworks a run drove. A run with PyTorch's cases records
// PyTorch in its fingerprint (its cases ran on that too), so the same machine and build make two
// stacks, one with and one without. d9m's own variants do not depend on PyTorch, so a claim
// between two of them is checked across such stacks: a GPU run beside PyTorch's kernels and a CPU
// run on the same machine check each other's bits (the H200 audit had them on S1 and S2).
std::map<std::string, std::string> stacks_without_frameworks(const ReportData& data) {
  std::map<std::string, std::string> out;
  for (const auto* list : {&data.stacks, &data.partner_stacks})
    for (const auto& s : *list) {
      nlohmann::json fp = s.fingerprint;
      if (!fp.is_object()) {
        out[s.id] = s.id;  // nothing to compare: a stack of its own
        continue;
      }
      fp.erase("torch");
      out[s.id] = fp.dump();
    }
  return out;
}

std::vector<CrossCheck> cross_checks(const ReportData& data) {
  using Key = std::tuple<std::string, std::string, std::string, std::string, std::string>;  // op, config id, stack, inputs, variant
  const auto stack_key = stacks_without_frameworks(data);
  auto key_of = [&](const CaseResult& r) {
    const auto it = stack_key.find(r.stack);
    return it == stack_key.end() ? r.stack : it->second;
  };
  // Where the partner is deterministic on several such stacks, a claimant is checked against the
  // one on its own stack if there is one, else against each of them.
  // Results outside the selection (ReportData::partners) take part only where a check pairs them
  // with a selected one.
  std::vector<const CaseResult*> pool;
  std::set<const CaseResult*> selected;
  for (const auto& r : data.results) {
    pool.push_back(&r);
    selected.insert(&r);
  }
  for (const auto& r : data.partners) pool.push_back(&r);
  std::map<Key, std::vector<const CaseResult*>> deterministic;
  for (const auto* r : pool)
    if (r->status == Status::deterministic) deterministic[{r->op, r->config_id, key_of(*r), r->input_digest, r->variant}].push_back(r);
  std::vector<CrossCheck> out;
  const auto check = [&](const CaseResult* r, const CaseResult* p) {
    if (selected.count(r) || selected.count(p)) out.push_back({r, p->variant, p->digest, p->stack});
  };
  for (const auto* r : pool) {
    if (r->bit_equal_to.empty() || r->status != Status::deterministic) continue;
    auto it = deterministic.find({r->op, r->config_id, key_of(*r), r->input_digest, r->bit_equal_to});
    if (it == deterministic.end()) continue;
    const auto own = std::find_if(it->second.begin(), it->second.end(), [&](const CaseResult* p) { return p->stack == r->stack; });
    if (own != it->second.end()) {
      check(r, *own);
      continue;
    }
    // Across stacks only to a partner that is not a framework's kernel: those stacks differ in the
    // framework's version, which a framework's own kernels (PyTorch's) depend on. (A framework
    // kernel's claim to d9m's own bits is checked: its digest is from its own stack, and the
    // partner's bits do not depend on the framework.)
    for (const auto* p : it->second)
      if (p->role != Role::framework) check(r, p);
  }
  return out;
}

std::vector<StackDifference> stack_differences_of(const ReportData& data) {
  std::vector<StackDifference> out;
  std::map<std::string, std::vector<const CaseResult*>> by_case;  // the case id includes the input digest
  for (const auto& r : data.results)
    if (r.status == Status::deterministic) by_case[r.case_id].push_back(&r);
  for (const auto& [id, rs] : by_case)
    for (std::size_t i = 0; i < rs.size(); ++i)
      for (std::size_t j = i + 1; j < rs.size(); ++j)
        if (rs[i]->digest != rs[j]->digest)
          out.push_back({rs[i]->op, rs[i]->config, rs[i]->variant, rs[i]->stack, rs[j]->stack, rs[i]->digest, rs[j]->digest,
                         rs[i]->label(), rs[i]->source(), rs[i]->dtype, rs[i]->math});
  return out;
}

// The timed results of each problem on each stack and backend: one op at one precision (source),
// one config by its id and inputs (a config name may stand for other shapes in another catalogue,
// found by review: a cost of 953x between a 128x128 and a 4x4 matmul both named "same"). d9m's
// controls are not the user's problems.
using TimedGroups = std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, std::vector<const CaseResult*>>;
TimedGroups timed_groups(const ReportData& data) {
  TimedGroups groups;
  for (const auto& r : data.results)
    if (r.median_ns && !r.is_control()) groups[{r.source(), r.config_id, r.input_digest, r.stack, r.backend}].push_back(&r);
  return groups;
}

// A variant that may stand in for a nondeterministic one: claimed and seen deterministic, a role
// that may be a fix, and neither wrong in its values nor diverged on any config of its op's source
// and backend (found by review: a variant whose claim broke on one config was offered as the fix
// on the others, in the same report that failed it).
class IsFix {
 public:
  explicit IsFix(const ReportData& data) {
    for (const auto& r : data.results)
      if (r.values_wrong() || r.claim_broken() || r.status == Status::nondeterministic)
        wrong_.insert({r.source(), r.backend, r.variant});
  }
  bool operator()(const CaseResult& r) const {
    return r.claim_determinism == "deterministic" && r.status == Status::deterministic && may_be_a_solution(r.role) &&
           !wrong_.count({r.source(), r.backend, r.variant});
  }

 private:
  std::set<std::tuple<std::string, std::string, std::string>> wrong_;
};
// What a fix replaces: a variant claimed nondeterministic, d9m's fault controls aside.
bool is_replaceable(const CaseResult& r) { return r.claim_determinism == "nondeterministic" && r.role != Role::control; }

template <class Keep>
const CaseResult* fastest(const std::vector<const CaseResult*>& rs, const Keep& keep) {
  const CaseResult* best = nullptr;
  for (const auto* r : rs)
    if (keep(*r) && (!best || *r->median_ns < *best->median_ns)) best = r;
  return best;
}

std::vector<Cost> costs_of(const ReportData& data) {
  const IsFix is_fix(data);
  std::vector<Cost> out;
  for (const auto& [key, rs] : timed_groups(data)) {
    const CaseResult* det = fastest(rs, is_fix);
    const CaseResult* nd = fastest(rs, is_replaceable);
    if (det && nd && *nd->median_ns > 0)
      out.push_back({det->source(), det->op, det->config, det->stack, det->backend, det->variant, nd->variant,
                     static_cast<double>(*det->median_ns) / static_cast<double>(*nd->median_ns)});
  }
  return out;
}

// Where each fix ran beside a nondeterministic variant: per op at one precision (source),
// backend and fix, one pair per config and stack, its time over the fastest variant claimed
// nondeterministic there.
struct FixPair {
  std::pair<std::string, std::string> problem;  // config id and inputs: the same problem under any name and stack
  std::string stack;
  double ratio = 0;
  bool values_unchecked = false;
  std::string against;
};
using FixPairs = std::map<std::tuple<std::string, std::string, std::string>, std::vector<FixPair>>;

FixPairs fix_pairs_of(const ReportData& data) {
  const IsFix is_fix(data);
  FixPairs out;
  for (const auto& [key, rs] : timed_groups(data)) {
    const CaseResult* nd = fastest(rs, is_replaceable);
    if (!nd || *nd->median_ns <= 0) continue;
    for (const auto* r : rs)
      if (is_fix(*r))
        out[{r->source(), r->backend, r->variant}].push_back(
            {{r->config_id, r->input_digest}, r->stack,
             static_cast<double>(*r->median_ns) / static_cast<double>(*nd->median_ns),
             r->values && r->values->outcome == ValueCheck::Outcome::unchecked,
             nd->variant});
  }
  return out;
}

// A row's fix: of the deterministic variants of its op at its precision and backend, the one that
// ran on the most of the problems the row's own variant ran on (distinct configs by id and inputs,
// whatever their names and however many stacks ran them), then the cheapest (geometric mean of its
// pairs there), then by name; costed on the configs and stacks the row ran on only. Found by review: a variant
// chosen by votes of "fastest on this config" was costed on the configs it won only (1.11x where it
// cost 2.86x and 2.37x on the two it lost), and a tie of votes went to the first name. Found by an
// audit of the reports: chosen and costed over every config of the op, a row that ran on 7 of 8
// (cuDNN's filter gradient, interrupted before one) read "use cuda.gather, 7.05x", its 8th pair one
// where the row never ran; on the row's 7, cudnn.algo1 ran too and costs 1.64x (cuda.gather 14.6x).
std::optional<Solution> solution_for(const FixPairs& pairs, const std::string& source, const std::string& backend, const std::string& row_variant,
                                     const std::set<std::tuple<std::string, std::string, std::string>>& row_ran) {
  std::optional<Solution> best;
  std::size_t best_problems = 0;
  for (auto it = pairs.lower_bound({source, backend, ""}); it != pairs.end(); ++it) {
    const auto& [s_, b_, variant] = it->first;
    if (s_ != source || b_ != backend) break;
    if (variant == row_variant) continue;  // never a row's own fix
    Solution candidate;
    candidate.source = source;
    candidate.backend = backend;
    candidate.variant = variant;
    std::set<std::pair<std::string, std::string>> problems;
    std::map<std::string, int> against;
    for (const auto& p : it->second) {
      if (!row_ran.count({p.problem.first, p.problem.second, p.stack})) continue;
      candidate.ratios.push_back(p.ratio);
      candidate.values_unchecked += p.values_unchecked;
      problems.insert(p.problem);
      ++against[p.against];
    }
    if (problems.empty()) continue;
    candidate.against = std::max_element(against.begin(), against.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
    const bool better = !best || problems.size() > best_problems ||
                        (problems.size() == best_problems &&
                         (candidate.geomean() < best->geomean() || (candidate.geomean() == best->geomean() && variant < best->variant)));
    if (better) {
      best = std::move(candidate);
      best_problems = problems.size();
    }
  }
  return best;
}

// "9.14.0" -> {9, 14, 0}; empty when the text is not a dotted version.
std::vector<long> version_parts(const nlohmann::json& v) {
  std::vector<long> parts;
  if (!v.is_string()) return parts;
  const std::string text = v.get<std::string>();
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t dot = std::min(text.find('.', at), text.size());
    const std::string part = text.substr(at, dot - at);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 9) return {};
    parts.push_back(std::stol(part));
    at = dot + 1;
  }
  return parts;
}

// cuDNN's compatibility rule: a library runs programs built against the same major version and
// the same or an older minor one; anything else is not guaranteed to work ("Compatibility" in
// cuDNN's developer guide). A stack outside it still ran, and its results are what it gave.
std::optional<std::string> cudnn_mismatch(const StackInfo& s) {
  if (!s.fingerprint.is_object() || !s.fingerprint.contains("cuda") || !s.fingerprint["cuda"].is_object()) return std::nullopt;
  const auto& cuda = s.fingerprint["cuda"];
  const auto loaded = version_parts(cuda.value("cudnn_loaded", nlohmann::json()));
  const auto compiled = version_parts(cuda.value("cudnn_compiled", nlohmann::json()));
  if (loaded.size() < 2 || compiled.size() < 2) return std::nullopt;
  if (loaded[0] == compiled[0] && loaded[1] >= compiled[1]) return std::nullopt;
  return "cuDNN " + cuda["cudnn_loaded"].get<std::string>() + " was loaded on " + s.label + " by a d9m built against " +
         cuda["cudnn_compiled"].get<std::string>() +
         ": cuDNN guarantees only the same major and the same or a newer minor version, so its cuDNN cases ran on an "
         "unsupported combination";
}

// A difference as people read it: "3e-05", "inf".
std::string format_difference(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

Verdict verdict_over(const ReportData& data, const std::vector<CrossCheck>& cross) {
  Verdict v;
  std::map<std::string, Verdict::Seen> seen;
  for (const auto& r : data.results) {
    ++v.cases;
    ++v.by_status[static_cast<int>(r.status)];
    v.certified += !r.is_control() && (r.status == Status::deterministic || r.status == Status::nondeterministic);
    const std::string w = where(data, r);
    if (r.claim_broken()) {
      if (r.is_control())
        v.failures.push_back({Failure::Kind::control_diverged, &r,
                              "the deterministic control (" + r.variant + " on " + data.stack(r.stack).label + ") diverged, " +
                                  in_trials(r) + ": this stack does not reproduce even a serial sum"});
      else
        v.failures.push_back({Failure::Kind::diverged, &r, w + ": claimed deterministic, " + in_trials(r)});
    }
    if (r.status == Status::error) v.failures.push_back({Failure::Kind::error, &r, w + ": " + r.detail});
    // A variant claimed batch-invariant whose sub-batches' rows differ from the full batch's,
    // while repeatable (otherwise the divergence is its failure).
    if (r.invariance && r.invariance->claimed_invariant() && r.status == Status::deterministic && !r.invariance->invariant()) {
      std::string sizes;
      const auto differing = r.invariance->differing();
      for (std::size_t i = 0; i < differing.size(); ++i)
        if (differing[i]) sizes += (sizes.empty() ? "" : ", ") + std::to_string(r.invariance->sizes()[i]);
      v.failures.push_back({Failure::Kind::not_invariant, &r,
                            w + ": claimed batch-invariant, but sub-batches of " + r.invariance->param + " = " + sizes +
                                " give other bits than the same rows of the full batch (" + r.invariance->param + " = " +
                                std::to_string(r.invariance->full) + ")"});
    }
    if (r.values_wrong()) {
      const ValueCheck& c = *r.values;
      v.failures.push_back({Failure::Kind::wrong_values, &r,
                            w + ": " + std::to_string(c.beyond) + " of " + std::to_string(c.elements) +
                                " output elements farther from the serial reference (" + c.reference + ") than the " +
                                format_difference(c.allowed) + " allowed, up to " + format_difference(c.max_abs) +
                                " (the first at element " + std::to_string(c.first_beyond) + ")"});
    }
    if (r.error_runs > 0 && r.status != Status::error) v.warnings.push_back(w + ": " + r.detail);
    if (r.claim_determinism == "nondeterministic" && !r.is_control() &&
        (r.status == Status::deterministic || r.status == Status::nondeterministic)) {
      auto& s = seen[r.variant];
      s.variant = r.variant;
      s.diverged += r.status == Status::nondeterministic;
      ++s.cases;
    }
  }
  for (const auto& c : cross)
    if (!c.equal())
      v.failures.push_back({Failure::Kind::cross_implementation, c.result,
                            where(data, *c.result) + ": claims the bits of " + c.partner +
                                (c.partner_stack == c.result->stack ? "" : " (on " + data.stack(c.partner_stack).label + ")") +
                                ", digests differ (" +
                                c.result->digest + " vs " + c.partner_digest + ")"});
  // A claim to another implementation's bits is checked only against a partner in the results: a
  // report of part of a store leaves out partners on other stacks (one that differs only in
  // PyTorch, say), and a run of some variants (`--variant cpu.ordered`, `--backend cuda`) may have
  // none. The verdict must not read as if such a claim had been checked (found by review: "each
  // claim to another implementation's bits held" with no partner in the store).
  // Where the partner computed the value check's reference on the same inputs, the check compared
  // the bits too (ValueCheck::claimed_bits): that settles a claim with no partner case.
  std::set<const CaseResult*> paired;
  for (const auto& c : cross) paired.insert(c.result);
  for (const auto& r : data.results) {
    if (r.bit_equal_to.empty() || r.status != Status::deterministic || paired.count(&r)) continue;
    if (!r.values || !r.values->claimed_bits) {
      ++v.unpaired_claims;
    } else if (!*r.values->claimed_bits) {
      v.failures.push_back({Failure::Kind::cross_implementation, &r,
                            where(data, r) + ": claims the bits of " + r.bit_equal_to + ", and its first output's bits differ from " +
                                r.bit_equal_to + "'s on the same inputs (computed for the value check; no deterministic case of " +
                                r.bit_equal_to + " to pair it with)"});
    }
  }
  // Found by review: a bf16 output 2.4x off the op's value was unchecked (16-bit sums in any order
  // may stray as far from the reference as the tolerance allows), so its plain D read as certified.
  std::int64_t unchecked = 0;
  for (const auto& r : data.results)
    unchecked += !r.is_control() && r.values && r.values->outcome == ValueCheck::Outcome::unchecked &&
                 (r.status == Status::deterministic || r.status == Status::nondeterministic);
  if (unchecked > 0)
    v.warnings.push_back(std::to_string(unchecked) + " case(s) had their values unchecked (the per-case table says why: at f16 "
                         "and bf16, mostly a tolerance too wide to tell a wrong output from a right one): their cells certify "
                         "repeatability, not values");
  if (v.unpaired_claims > 0)
    v.warnings.push_back(std::to_string(v.unpaired_claims) + " claim(s) to another implementation's bits had no partner in " +
                         (data.warn_unpaired_claims ? "this selection (" + data.selection + ") and were not checked: report the whole store to check them"
                                                    : "the results and were not checked: run the variants they name into the same store to check them"));
  // A nondeterministic control that never diverged in a run means that run could not have seen
  // nondeterminism on that backend (one thread, a quiet machine, a scheduler that serialised), and
  // its cases' D says little. Judged run by run: found by review, a 1-thread run's D cases were
  // reported without a warning because another run's control, at 2 threads, had diverged.
  std::map<std::pair<std::string, std::string>, std::string> quiet;  // (stack, control) -> its runs
  for (const auto& run : data.run_rows)
    if (data.reports_stack(run.stack))
      for (const auto& c : run.quiet_controls)
        quiet[{run.stack, c}] += (quiet[{run.stack, c}].empty() ? "" : ", ") + run.id.substr(0, 12) + " (" +
                                 std::to_string(run.threads) + " thread(s), " + std::to_string(run.trials_per_case) + " trials)";
  for (const auto& [key, runs] : quiet)
    v.warnings.push_back("the nondeterministic control (" + key.second + " on " + data.stack(key.first).label +
                         ") never diverged in run(s) " + runs +
                         ": those runs could not have seen nondeterminism on that backend (one thread?)");
  for (const auto& s : data.stacks)
    if (auto why = cudnn_mismatch(s)) v.warnings.push_back(*why);
  for (auto& [name, s] : seen) v.nondeterministic_seen.push_back(s);
  return v;
}

ApiView api_view_of(const std::vector<StatusRow>& rows) {
  ApiView v;
  std::map<std::tuple<std::string, std::string, std::string>, std::size_t> index;  // (op, math, variant) -> row
  for (const auto& r : rows) {
    if (r.library == "d9m") continue;
    if (std::find(v.dtypes.begin(), v.dtypes.end(), r.dtype) == v.dtypes.end()) v.dtypes.push_back(r.dtype);
    auto [it, fresh] = index.try_emplace({r.op, r.math, r.variant}, v.rows.size());
    if (fresh) v.rows.push_back({r.library, r.op, r.math, r.variant, r.claim_determinism, {}});
    ApiView::Row& row = v.rows[it->second];
    if (row.claim != r.claim_determinism) row.claim = "mixed";
    for (std::size_t s = 0; s < r.cells.size(); ++s)
      if (r.cells[s].configs) row.cells[{s, r.dtype}] = {r.cells[s].text, r.cells[s].invariance};
  }
  // f32 first, then the others in the order of kFloatDTypes (f16, bf16, f64).
  std::vector<std::string> ordered;
  for (DType t : kFloatDTypes)
    if (std::find(v.dtypes.begin(), v.dtypes.end(), dtype_short_name(t)) != v.dtypes.end()) ordered.emplace_back(dtype_short_name(t));
  v.dtypes = ordered;
  std::sort(v.rows.begin(), v.rows.end(), [](const ApiView::Row& a, const ApiView::Row& b) {
    return std::tie(a.library, a.op, a.math, a.variant) < std::tie(b.library, b.op, b.math, b.variant);
  });
  return v;
}

// The order in which one config's invariance outweighs another's in a cell.
int invariance_weight(const std::string& s) {
  if (s == "Not guaranteed") return 4;
  if (s == "Replay only") return 3;
  if (s == "Unverified") return 2;
  return s.empty() ? 0 : 1;
}

std::vector<StatusRow> rows_of(const ReportData& data, std::vector<Solution>& solutions, const Verdict& verdict) {
  const FixPairs pairs = fix_pairs_of(data);
  // The claim reason of each (source, variant), the last result's: a solution's footnote quotes it.
  std::map<std::pair<std::string, std::string>, std::string> reasons;
  if (!pairs.empty())
    for (const auto& r : data.results) reasons[{r.source(), r.variant}] = r.claim_reason;
  // d9m's controls are rows of their own (found by review: a control's ND made the user's own
  // unsorted_segment_sum row read "ND 2/10 (1 of 2 configs)" where its only config was D).
  std::map<std::pair<std::string, std::string>, std::vector<const CaseResult*>> by_row;
  for (const auto& r : data.results) by_row[{r.is_control() ? r.source() + " (d9m control)" : r.source(), r.variant}].push_back(&r);
  std::vector<StatusRow> rows;
  for (const auto& [key, rs] : by_row) {
    StatusRow row;
    row.source = key.first;
    row.variant = key.second;
    const CaseResult& last = *rs.back();
    row.op = last.op;
    row.dtype = last.dtype;
    row.math = last.math;
    row.backend = last.backend;
    row.library = library_of(row.variant);
    row.role = last.role;
    row.claim_source = last.claim_source;
    row.claim_reason = last.claim_reason;
    row.claim_determinism = last.claim_determinism;
    row.control = last.is_control();
    // A vendor's API may claim per config (cuDNN does): different claims show as mixed.
    for (const auto* r : rs)
      if (r->claim_determinism != last.claim_determinism) row.claim_determinism = "mixed";
    for (const auto& s : data.stacks) {
      StatusCell cell;
      const CaseResult* worst_nd = nullptr;
      for (const auto* r : rs) {
        if (r->stack != s.id) continue;
        ++cell.configs;
        if (cell.configs == 1 || weight(r->status) > weight(cell.status)) cell.status = r->status;
        if (r->status == Status::deterministic || r->status == Status::nondeterministic) ++cell.ran_configs;
        if (r->status == Status::nondeterministic) {
          ++cell.nd_configs;
          if (!worst_nd || r->distinct > worst_nd->distinct) worst_nd = r;
        }
        cell.broken |= verdict.claim_failed(*r);
        cell.wrong_configs += r->values_wrong();
        const std::string inv = r->invariance_status();
        if (invariance_weight(inv) > invariance_weight(cell.invariance)) cell.invariance = inv;
      }
      // cuDNN's words are for the API as a whole: one that diverged on any config is not
      // repeatable, so not "Supported" for the configs that tested invariance (found by review).
      if (cell.nd_configs > 0 && !cell.invariance.empty()) cell.invariance = "Not guaranteed";
      switch (cell.configs ? cell.status : Status::skipped) {
        case Status::nondeterministic:
          cell.text = "ND " + std::to_string(worst_nd->distinct) + "/" + std::to_string(worst_nd->trials);
          // Of the configs that could show it (found by an audit of the reports: a config that was
          // UNSUPPORTED counted, so "2 of 4 configs" read as two deterministic ones that never ran).
          if (cell.nd_configs < cell.ran_configs)
            cell.text += " (" + std::to_string(cell.nd_configs) + " of " + std::to_string(cell.ran_configs) + " configs)";
          break;
        case Status::error: cell.text = "E"; break;
        case Status::deterministic: cell.text = "D"; break;
        case Status::unsupported: cell.text = "U"; break;
        case Status::skipped: cell.text = "-"; break;
      }
      if (cell.wrong_configs)
        cell.text += ", values wrong" + (cell.wrong_configs < cell.ran_configs ? " (" + std::to_string(cell.wrong_configs) + " of " +
                                                                                    std::to_string(cell.ran_configs) + " configs)"
                                                                          : std::string());
      row.cells.push_back(std::move(cell));
    }
    // A row whose vendor claimed per config (mixed) and that diverged gets its op's fix too (found
    // by an audit of the reports: cuSPARSE's SpMV CSR_ALG2, claimed ND on its transposed config,
    // diverged there with cuda.ordered deterministic beside it, and showed no fix).
    const bool diverged = std::any_of(row.cells.begin(), row.cells.end(), [](const StatusCell& c) { return c.nd_configs > 0; });
    if (row.claim_determinism == "nondeterministic" || (row.claim_determinism == "mixed" && diverged)) {
      std::set<std::tuple<std::string, std::string, std::string>> ran;  // problems and stacks the row's variant ran on
      // A mixed row needs a fix where it was claimed nondeterministic or diverged only (found by
      // review: costed on the configs where it was claimed and seen deterministic).
      for (const auto* r : rs)
        if (r->median_ns && (row.claim_determinism != "mixed" || r->claim_determinism == "nondeterministic" ||
                             r->status == Status::nondeterministic))
          ran.insert({r->config_id, r->input_digest, r->stack});
      if (std::optional<Solution> fix = solution_for(pairs, row.source, row.backend, row.variant, ran)) {
        // Rows whose fix is the same variant on the same pairs share one footnote.
        const auto same = std::find_if(solutions.begin(), solutions.end(), [&](const Solution& x) {
          return x.source == fix->source && x.backend == fix->backend && x.variant == fix->variant && x.ratios == fix->ratios;
        });
        if (same != solutions.end()) {
          row.solution = static_cast<int>(same - solutions.begin());
        } else {
          fix->key = footnote_key(solutions.size());
          if (auto it = reasons.find({fix->source, fix->variant}); it != reasons.end()) fix->reason = it->second;
          row.solution = static_cast<int>(solutions.size());
          solutions.push_back(std::move(*fix));
        }
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::string library_of(const std::string& variant) {
  static const char* const kLibraries[] = {"cublas", "cublaslt", "cudnn", "cub", "cusparse", "torch"};
  const std::string prefix = variant.substr(0, variant.find('.'));
  for (const char* lib : kLibraries)
    if (prefix == lib) return prefix;
  return "d9m";
}

std::string to_string(Failure::Kind k) {
  switch (k) {
    case Failure::Kind::diverged: return "claim broken";
    case Failure::Kind::control_diverged: return "control diverged";
    case Failure::Kind::cross_implementation: return "cross-implementation claim broken";
    case Failure::Kind::not_invariant: return "batch-invariance claim broken";
    case Failure::Kind::wrong_values: return "values wrong";
    case Failure::Kind::error: return "not certified (ERROR)";
  }
  return "failure";
}

std::string id_of(Failure::Kind k) {
  switch (k) {
    case Failure::Kind::diverged: return "diverged";
    case Failure::Kind::control_diverged: return "control_diverged";
    case Failure::Kind::cross_implementation: return "cross_implementation";
    case Failure::Kind::not_invariant: return "not_invariant";
    case Failure::Kind::wrong_values: return "wrong_values";
    case Failure::Kind::error: return "error";
  }
  return "failure";
}

double Solution::geomean() const {
  double s = 0;
  for (double r : ratios) s += std::log(r);
  return ratios.empty() ? 0 : std::exp(s / static_cast<double>(ratios.size()));
}
double Solution::lowest() const { return ratios.empty() ? 0 : *std::min_element(ratios.begin(), ratios.end()); }
double Solution::highest() const { return ratios.empty() ? 0 : *std::max_element(ratios.begin(), ratios.end()); }

std::vector<const Failure*> Verdict::failures_of(const CaseResult& r) const {
  std::vector<const Failure*> out;
  for (const auto& f : failures)
    if (f.result == &r) out.push_back(&f);
  return out;
}

bool Verdict::claim_failed(const CaseResult& r) const {
  return std::any_of(failures.begin(), failures.end(), [&](const Failure& f) { return f.result == &r && f.kind != Failure::Kind::error; });
}

std::string Verdict::no_evidence() const {
  const std::int64_t not_run = by_status[static_cast<int>(Status::skipped)] + by_status[static_cast<int>(Status::unsupported)];
  const std::string which = not_run == cases ? "none ran" : "none but d9m's controls ran";
  return (cases == 0 ? std::string("no case was recorded")
                     : "of " + std::to_string(cases) + " case(s), " + which + " (" + std::to_string(not_run) + " SKIPPED or UNSUPPORTED)") +
         ": no claim was tested, so none broke, and this certifies nothing.";
}

std::vector<std::string> Verdict::lines() const {
  std::vector<std::string> out;
  out.push_back("cases: " + std::to_string(cases) + "   DETERMINISTIC " + std::to_string(by_status[0]) + "   NONDETERMINISTIC " +
                std::to_string(by_status[1]) + "   ERROR " + std::to_string(by_status[2]) + "   UNSUPPORTED " +
                std::to_string(by_status[3]) + "   SKIPPED " + std::to_string(by_status[4]));
  for (const auto& s : nondeterministic_seen)
    out.push_back(s.variant + " (claimed nondeterministic) diverged in " + std::to_string(s.diverged) + " of " +
                  std::to_string(s.cases) + " cases");
  if (certifies_nothing()) {
    // Found by an auditor: a store with no case (an interrupted run copied before its first one),
    // or only SKIPPED ones (GPU cases on a machine without a GPU), read PASS and was attested.
    out.push_back("NO EVIDENCE: " + no_evidence());
  } else if (held()) {
    // SKIPPED and UNSUPPORTED cases pass without evidence (GPU cases on a machine without one):
    // the line must not say that every case has evidence, and says how many certify nothing.
    const std::int64_t not_run = by_status[static_cast<int>(Status::skipped)] + by_status[static_cast<int>(Status::unsupported)];
    out.push_back("PASS: every claim held: each variant claimed deterministic gave one digest in all its trials, each claim "
                  "to another implementation's bits " +
                  (unpaired_claims ? "that had its partner (" + std::to_string(unpaired_claims) + " had none: not checked) " : std::string()) +
                  "held, no output checked against the serial reference was wrong, and no case ended in ERROR only." +
                  (not_run ? " " + std::to_string(not_run) + " case(s) SKIPPED or UNSUPPORTED were not run and certify nothing."
                           : std::string()));
  } else {
    std::map<Failure::Kind, int> by_kind;
    for (const auto& f : failures) ++by_kind[f.kind];
    std::string counts;
    for (const auto& [k, n] : by_kind) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + to_string(k);
    out.push_back("FAIL: " + std::to_string(failures.size()) + " failure(s): " + counts);
    for (const auto& f : failures) out.push_back("  " + to_string(f.kind) + ": " + f.text);
  }
  for (const auto& w : warnings) out.push_back("WARNING: " + w);
  return out;
}

StatusModel build_status_model(const ReportData& data) {
  StatusModel m;
  m.cross = cross_checks(data);
  m.stack_differences = stack_differences_of(data);
  m.costs = costs_of(data);
  m.verdict = verdict_over(data, m.cross);
  m.rows = rows_of(data, m.solutions, m.verdict);
  m.api = api_view_of(m.rows);
  for (const auto& r : data.results) m.any_invariance |= r.invariance.has_value();
  return m;
}

Verdict verdict_of(const ReportData& data) { return verdict_over(data, cross_checks(data)); }

}  // namespace d9m
