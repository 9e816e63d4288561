// The Markdown report: the status table in the shape of NVIDIA's framework-reproducibility
// table (rows op and variant, columns stacks, a solution column keyed to footnotes), then the
// cross-implementation checks, stack-to-stack differences, each pipeline's divergence in a line,
// every case, and the verdict.
#include <map>
#include <sstream>
#include <tuple>

#include "harness/report/format.h"
#include "harness/report/report.h"

namespace d9m {

namespace {

using format::md_cell;

void status_table(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  o << "\n## Status by source\n\n| source | variant | claim |";
  // Batch invariance, where some config asked for it, beside each stack's repeatability cell.
  const bool inv = m.any_invariance;
  for (const auto& s : data.stacks) o << " " << s.label << " |" << (inv ? " " + s.label + " batch |" : "");
  o << " solution |\n|---|---|---|";
  for (std::size_t i = 0; i < data.stacks.size(); ++i) o << (inv ? "---|---|" : "---|");
  o << "---|\n";
  for (const auto& row : m.rows) {
    o << "| " << md_cell(row.source) << " | " << md_cell(row.variant) << " | " << format::short_claim(row.claim_determinism, row.claim_source) << " |";
    for (const auto& c : row.cells) {
      o << " " << (c.broken ? "**" + c.text + "** (claim broken)" : c.text) << " |";
      if (inv) o << " " << (c.invariance.empty() ? "-" : c.invariance) << " |";
    }
    std::string solution;
    // A row claimed nondeterministic says so where no fix was measured; a mixed row that diverged
    // shows the fix it has (found by review: JSON named it, the Markdown cell stayed empty).
    if ((row.claim_determinism == "nondeterministic" || row.solution >= 0) && !row.control) {
      if (row.solution < 0) {
        solution = "none measured";
      } else {
        const Solution& s = m.solutions[static_cast<std::size_t>(row.solution)];
        solution = "use " + s.variant + ", " + format::ratio(s.geomean()) + " [" + s.key + "]";
      }
    }
    o << " " << solution << " |\n";
  }
  o << "\nKey: `D` one output digest in every trial of every config; `ND k/N` k distinct digests in N trials "
       "(worst config; \"m of n configs\" when not every config that ran diverged: n counts the configs with evidence, D or ND, "
       "not those that were U, E or skipped); `E` error; `U` the variant does not support the "
       "config; `-` not run (or skipped) on that stack. Claim: what the variant is expected to be and who says so (design, "
       "vendor-doc, vendor-api).";
  if (inv)
    o << " Batch (cuDNN's words, over the configs that name batch_invariance): `Supported` repeatable, and every "
         "sub-batch's rows bit-equal to the full batch's; `Replay only` repeatable, but a sub-batch's rows differ; `Not "
         "guaranteed` not repeatable; `Unverified` no sub-batch could run; `-` not tested.";
  o << "\n\n";
  for (const auto& s : m.solutions)
    o << "- [" << s.key << "] **" << s.source << "** (" << s.backend << "): " << s.variant << " (" << s.reason
      << "). Cost: median time of " << s.variant << " over the median of the fastest nondeterministic variant (" << s.against
      << "), geometric mean " << format::ratio(s.geomean()) << " over " << s.ratios.size()
      << " config-stack pairs, range " << format::ratio(s.lowest()) << "-" << format::ratio(s.highest()) << "."
      << (s.values_unchecked ? " Its values were unchecked on " + std::to_string(s.values_unchecked) + " of them." : "") << "\n";
}

// cuDNN's "Determinism support" view: per library API, stack and dtype, both properties.
void md_api_view(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  if (m.api.rows.empty()) return;
  o << "\n## By library API, stack and dtype\n\nThe view of cuDNN's \"Determinism support\" page, from evidence: each cell is "
       "repeatability (`D`, `ND k/N`, ...) then batch invariance where a config asked for it.\n\n| library | API | claim |";
  std::string rule = "|---|---|---|";
  for (const auto& s : data.stacks)
    for (const auto& d : m.api.dtypes) {
      o << " " << s.label << " " << d << " |";
      rule += "---|";
    }
  o << "\n" << rule << "\n";
  for (const auto& r : m.api.rows) {
    o << "| " << r.library << " | " << r.op << (r.math == "default" ? "" : " " + r.math) << " " << r.variant << " | "
      << (r.claim == "deterministic" ? "D" : r.claim == "nondeterministic" ? "ND" : r.claim) << " |";
    for (std::size_t s = 0; s < data.stacks.size(); ++s)
      for (const auto& d : m.api.dtypes) {
        auto it = r.cells.find({s, d});
        o << " " << (it == r.cells.end() ? "-" : it->second.repeatability + (it->second.invariance.empty() ? "" : " · " + it->second.invariance))
          << " |";
      }
    o << "\n";
  }
}

void cross_implementation(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  if (m.cross.empty()) return;
  // op, variant, partner, and the stacks by their place in the report (S2 before S10, as numbered).
  using Key = std::tuple<std::string, std::string, std::string, std::size_t, std::size_t>;
  // A partner's stack may be outside the reported ones (`d9m run`'s verdict: ReportData::partners).
  auto index = [&](const std::string& id) {
    for (std::size_t i = 0; i < data.stacks.size(); ++i)
      if (data.stacks[i].id == id) return i;
    for (std::size_t j = 0; j < data.partner_stacks.size(); ++j)
      if (data.partner_stacks[j].id == id) return data.stacks.size() + j;
    return data.stacks.size() + data.partner_stacks.size();
  };
  auto label = [&](std::size_t i) {
    return i < data.stacks.size() ? data.stacks[i].label : data.partner_stacks.at(i - data.stacks.size()).label;
  };
  std::map<Key, std::pair<int, int>> agg;  // equal / checked
  for (const auto& c : m.cross) {
    auto& [eq, n] = agg[{c.result->source(), c.result->variant, c.partner, index(c.result->stack), index(c.partner_stack)}];
    eq += c.equal();
    ++n;
  }
  o << "\n## Cross-implementation\n\nVariants that claim the bits of another implementation, checked on the same "
       "config, inputs and stack wherever both were deterministic (\"S1 with S2\": the partner ran on a stack that differs "
       "only in the frameworks a run drove, such as PyTorch's version).\n\n| op | variant | claims the bits of | stack | "
       "configs equal |\n|---|---|---|---|---|\n";
  for (const auto& [k, v] : agg) {
    const bool all = v.first == v.second;
    std::string stacks = label(std::get<3>(k));
    if (std::get<4>(k) != std::get<3>(k)) stacks += " with " + label(std::get<4>(k));
    o << "| " << md_cell(std::get<0>(k)) << " | " << md_cell(std::get<1>(k)) << " | " << md_cell(std::get<2>(k)) << " | " << stacks << " | "
      << (all ? "" : "**") << v.first << " of " << v.second << (all ? "" : "** (claim broken)") << " |\n";
  }
}

void stack_differences(std::ostringstream& o, const ReportData& data, const StatusModel& m) {
  if (m.stack_differences.empty()) return;
  o << "\n## Stack-to-stack differences\n\nDeterministic on each stack, but a different output on the same inputs: "
       "reproducible run to run, not stack to stack.\n\n| op | config | variant | stacks | digests |\n|---|---|---|---|---|\n";
  for (const auto& d : m.stack_differences)
    o << "| " << md_cell(d.source) << " | " << md_cell(d.config) << " | " << md_cell(d.variant) << " | " << data.stack(d.stack_a).label << " vs "
      << data.stack(d.stack_b).label << " | `" << d.digest_a.substr(0, 12) << "` vs `" << d.digest_b.substr(0, 12) << "` |\n";
}

void batch_invariance(std::ostringstream& o, const ReportData& data) {
  std::ostringstream t;
  for (const auto& r : data.results) {
    if (!r.invariance) continue;
    std::string subs;
    for (const auto& s : r.invariance->subs)
      subs += (subs.empty() ? "" : "; ") + std::to_string(s.size) + " at " + std::to_string(s.offset) + ": " +
              (s.error.empty() ? (s.differing == 0 ? "equal" : std::to_string(s.differing) + " of " + std::to_string(s.elements) + " differ")
                               : s.error);
    const std::string st = r.invariance_status();
    const auto& c = r.invariance->claim;
    const std::string claim = !c || c->determinism == Determinism::unknown ? "-"
                              : (c->determinism == Determinism::deterministic ? "invariant (" : "not invariant (") + to_string(c->source) + ")";
    const bool broken = r.invariance->claimed_invariant() && st == "Replay only";
    t << "| " << md_cell(r.source()) << " | " << md_cell(r.config) << " | " << md_cell(r.variant) << " | " << data.stack(r.stack).label << " | "
      << claim << " | " << (broken ? "**" + st + "** (claim broken)" : st.empty() ? to_string(r.status) : st) << " | "
      << r.invariance->param << " = " << r.invariance->full << " | " << md_cell(subs) << " |\n";
  }
  if (t.str().empty()) return;
  o << "\n## Batch invariance\n\nEach sub-batch (its size, at the row it starts from) run once and compared bit for bit "
       "with the same rows of the full batch's first trial.\n\n| op | config | variant | stack | claim | status | full batch | "
       "sub-batches |\n|---|---|---|---|---|---|---|---|\n"
    << t.str();
}

void autotuning(std::ostringstream& o, const ReportData& data) {
  std::ostringstream t;
  for (const auto& r : data.results) {
    if (r.choices.empty()) continue;
    std::string chose;
    for (const auto& c : r.choices)
      chose += (chose.empty() ? "" : ", ") + c.name + " in " + std::to_string(c.trials) + " (" + std::to_string(c.distinct) +
               (c.distinct == 1 ? " digest)" : " digests)");
    t << "| " << md_cell(r.source()) << " | " << md_cell(r.config) << " | " << md_cell(r.variant) << " | " << data.stack(r.stack).label << " | "
      << md_cell(chose) << " | " << r.choice_changes << " | " << r.distinct << " |\n";
  }
  if (t.str().empty()) return;
  o << "\n## Autotuning\n\nWhat an autotuning variant chose afresh in each trial, as a new framework process does: "
       "how often each choice won, how often the choice changed from one trial to the next, and whether the bits did.\n\n"
       "| op | config | variant | stack | chose (trials, digests) | changes | distinct digests |\n|---|---|---|---|---|---|---|\n"
    << t.str();
}

void cases(std::ostringstream& o, const ReportData& data) {
  o << "\n## Cases\n\n| op | config | variant | stack | status | trials | distinct | 95% bound | median | min | worst diff | values |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : data.results) {
    std::string diff = "-";
    if (r.worst_diff)
      diff = std::to_string(r.worst_diff->count) + " elems, " + std::to_string(r.worst_diff->max_ulp) + " ULP, " +
             format::num("%.3g", r.worst_diff->max_abs) + " abs";
    const std::string st = to_string(r.status) + (r.detail.empty() ? "" : " (" + r.detail + ")");
    o << "| " << md_cell(r.source()) << " | " << md_cell(r.config) << " | " << md_cell(r.variant) << " | " << data.stack(r.stack).label << " | "
      << md_cell(st) << " | " << r.trials << " | " << r.distinct << " | "
      << (r.status == Status::deterministic ? format::num("< %.3g", r.bound95()) : "-") << " | "
      << format::duration(r.median_ns) << " | " << format::duration(r.min_ns) << " | " << diff << " | "
      << (r.values_wrong() ? "**" + md_cell(format::values_text(r.values)) + "**" : md_cell(format::values_text(r.values))) << " |\n";
  }
  o << "\nValues: the first trial's output against the op's serial reference on the same inputs, within what the "
       "variant is allowed (`agrees`, `**differs**`, or `unchecked` and why; at f16 and bf16 against the op computed in "
       "f64 where it holds to that; a pipeline's by the op of its first step nearest its allowance, named); `-` where "
       "nothing was checked: the reference itself, a case that did not run all its trials, a pipeline of reference "
       "variants only, a result stored before the check.\n";
}

// One line per pipeline case; where it diverged, its source (`d9m trace diff` has the steps).
void md_pipelines(std::ostringstream& o, const ReportData& data) {
  if (data.pipelines.empty()) return;
  o << "\n## Pipelines and traced programs\n\n";
  for (const auto& p : data.pipelines) {
    o << "- " << md_cell(pipeline_summary(data, p));
    if (p.diff && p.diff->source) {
      const TraceOpRow& r = p.diff->source->row;
      o << "; trial " << p.diff->a.trial << " against trial " << p.diff->b.trial << ": source step " << r.step << ", op " << r.position
        << " `" << md_cell(r.name) << "` (" << md_cell(r.variant_b.empty() ? r.op : r.op + ", " + r.variant_b) << ")" << (p.diff->source->outside ? ", outside the traced ops" : "")
        << ", claim " << md_cell(p.diff->source->claim_determinism);
    } else if (p.distinct > 1) {
      o << "; the traces do not compare: " << md_cell(p.problem.empty() ? "no op's output differs" : p.problem);
    }
    o << "\n";
  }
  o << "\n`d9m trace diff STORE@run:RUN_ID --setting SETTING` prints the divergence step by step.\n";
}

}  // namespace

std::string render_markdown(const ReportData& data, const StatusModel& model, bool audit) {
  std::ostringstream o;
  o << "# d9m determinism " << (audit ? "audit report" : "status") << "\n\n```\n" << report_header(data) << "```\n\n";
  if (audit) o << audit_sections_md(data, model);
  o << "## Stacks\n\n| stack | fingerprint | runs | hosts | stack contents |\n|---|---|---|---|---|\n";
  for (const auto& s : data.stacks)
    o << "| " << s.label << " | `" << s.id.substr(0, 12) << "` | " << s.runs << " | " << md_cell(format::join(s.hosts, ", "))
      << " | " << md_cell(s.summary()) << " |\n";
  status_table(o, data, model);
  md_api_view(o, data, model);
  cross_implementation(o, data, model);
  stack_differences(o, data, model);
  batch_invariance(o, data);
  autotuning(o, data);
  md_pipelines(o, data);
  cases(o, data);
  o << "\n## Verdict\n\n```\n";
  for (const auto& line : model.verdict.lines()) o << "# " << line << "\n";
  o << "```\n";
  return o.str();
}

}  // namespace d9m
