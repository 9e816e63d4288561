// d9m merge: the union of stores from many machines (idempotent, order-independent).
#include <cstdio>
#include <memory>

#include "harness/cli/verbs.h"
#include "harness/store/merge.h"

namespace d9m::cli {
namespace {

struct MergeArgs {
  std::string output;
  std::vector<std::string> inputs;
};

int merge(const MergeArgs& a) {
  const MergeSummary m = merge_stores(a.output, a.inputs);
  std::printf("%s: %lld rows added, %lld already present", a.output.c_str(), static_cast<long long>(m.added),
              static_cast<long long>(m.present));
  if (m.advanced) std::printf(", %lld run(s) advanced to a later state", static_cast<long long>(m.advanced));
  if (m.adopted) std::printf(", %lld run(s) of stores without a manifest recorded in its manifest", static_cast<long long>(m.adopted));
  if (m.unchanged) std::printf("; the file is left as it was");
  std::printf("\n");
  return 0;
}

}  // namespace

void add_merge(CLI::App& app, std::vector<Verb>& verbs) {
  auto o = std::make_shared<MergeArgs>();
  auto* c = app.add_subcommand("merge", "combine stores (idempotent, order-independent)");
  c->add_option("-o,--output", o->output, "the merged store (created, or merged into)")->required();
  c->add_option("inputs", o->inputs, "stores to merge")->required();
  verbs.push_back({c, [o] { return merge(*o); }});
}

}  // namespace d9m::cli
