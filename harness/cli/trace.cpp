// d9m trace diff: where two runs of a pipeline first diverged (harness/report/trace_diff.h).
// Exit 1 when a source of divergence is found, 0 when the traces agree.
#include <memory>
#include <set>

#include "harness/cli/common.h"
#include "harness/cli/verbs.h"
#include "harness/core/error.h"
#include "harness/core/files.h"
#include "harness/report/trace_diff.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

namespace d9m::cli {
namespace {

struct TraceDiffArgs {
  std::string db = "d9m.sqlite", a, b, format = "md", output, pipeline = "*", setting = "*";
  bool no_verify = false;
};

int trace_diff(const TraceDiffArgs& args) {
  check_output(args.output, {args.db, args.a, args.b});
  const TraceOperand a = parse_trace_operand(args.a.empty() ? args.db : args.a);
  const std::optional<TraceOperand> b = args.b.empty() ? std::nullopt : std::optional<TraceOperand>(parse_trace_operand(args.b));
  // A trace diff names an op to blame from the stored rows: of a store that verifies, unless asked
  // otherwise, as `d9m report` (found by audit: an edited input digest moved the source, and an
  // edited diff count was printed, with no word of the edit).
  std::set<std::string> verified;  // real paths: one store named twice is verified once
  if (!args.no_verify)
    for (const std::string& path : {a.store, b ? b->store : a.store}) {
      if (!verified.insert(real_path_or_self(path)).second) continue;
      const Store store = open_trace_store(path);
      require_sound(store, "compared", "; `d9m trace diff --no-verify` compares it as it is now, edited rows and all");
    }
  const std::vector<TraceDiff> diffs = diff_traces(a, b, args.pipeline, args.setting);
  const std::string text = args.format == "json"   ? render_trace_diff_json(diffs)
                           : args.format == "html" ? render_trace_diff_html(diffs)
                                                   : render_trace_diff_markdown(diffs);
  write_output(args.output, text);
  for (const auto& d : diffs)
    if (d.source) return static_cast<int>(ExitCode::claim_broken);
  return 0;
}

}  // namespace

void add_trace(CLI::App& app, std::vector<Verb>& verbs) {
  auto* trace = app.add_subcommand("trace", "pipeline traces: where two runs of a training step first diverge");
  trace->require_subcommand(1);
  auto o = std::make_shared<TraceDiffArgs>();
  auto* c = trace->add_subcommand(
      "diff", "compare two traces op by op; the first op with bit-equal inputs and a differing output is the source (exit 1)");
  c->add_option("a", o->a,
                "STORE[@run:ID][#TRIAL] (default: --db; the newest run with traces, trial 0 against the first trial whose "
                "trajectory differs)");
  c->add_option("b", o->b, "STORE[@run:ID][#TRIAL]: the other side (default: the same run)");
  c->add_option("--db", o->db, "store file when no operand is given");
  c->add_option("--pipeline", o->pipeline, "only pipelines matching this glob");
  c->add_option("--setting", o->setting, "only settings matching this glob");
  c->add_option("--format", o->format, "md, json or html")->check(CLI::IsMember({"md", "json", "html"}));
  c->add_option("-o,--output", o->output, "file to write (default: standard output)");
  c->add_flag("--no-verify", o->no_verify, "compare a store that does not verify (edited rows and all)");
  verbs.push_back({c, [o] { return trace_diff(*o); }});
}

}  // namespace d9m::cli
