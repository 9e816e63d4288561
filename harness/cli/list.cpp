// d9m list: the catalogue as built (ops, variants, claims, configs), as text, JSON, or one case
// per line for CTest's registration.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "harness/cli/common.h"
#include "harness/cli/verbs.h"
#include "harness/core/json_text.h"
#include "harness/exec/pipeline_exec.h"
#include "harness/exec/runner.h"

namespace d9m::cli {
namespace {

using nlohmann::json;

struct ListOptions {
  std::string catalog, profile = "default", backend = "all";
  std::vector<std::string> ops;
  bool json = false, cases = false;
};

std::string claim_text(const Claim& c) { return to_string(c.determinism) + " (" + to_string(c.source) + "): " + c.reason; }

int list(const ListOptions& o) {
  const Catalog cat = load_catalog(o.catalog, o.profile);
  Selection sel;
  sel.backend = o.backend;
  sel.op_globs = o.ops;
  const auto cases = plan_cases(cat, Registry::global(), sel);
  const auto pipelines = plan_pipelines(cat, sel);
  if (o.cases) {  // one case per line, for CTest registration
    for (const auto& c : cases)
      std::cout << c.config->op->name << "/" << c.config->name << "/" << c.variant->name << " "
                << to_string(c.variant->backend) << "\n";
    // A pipeline is certified per backend (`run --pipeline NAME --backend B`: its settings of that
    // backend), so a machine without a GPU still certifies the CPU settings.
    for (const auto& pl : cat.pipelines)
      for (Backend b : {Backend::cpu, Backend::cuda, Backend::torch})
        if (std::any_of(pipelines.begin(), pipelines.end(),
                        [&](const PlannedPipeline& pp) { return pp.pipeline == &pl && pipeline_backend(*pp.setting) == b; }))
          std::cout << "pipeline:" << pl.name << "/" << pl.steps << "_steps/" << to_string(b) << " " << to_string(b) << "\n";
    return 0;
  }
  auto selected = [&](const OpDef& op) {
    for (const auto& c : cases)
      if (c.config->op == &op) return true;
    return false;
  };
  if (o.json) {
    json out = {{"schema", "d9m.list/1"}, {"catalog", cat.source}, {"catalog_digest", cat.digest}, {"ops", json::array()}};
    for (const auto& op : Registry::global().ops()) {
      if (!selected(op)) continue;
      json params = json::array();
      for (const auto& p : op.params) params.push_back({{"name", p.name}, {"doc", p.doc}, {"required", !p.default_value}});
      json variants = json::array();
      for (const auto* v : Registry::global().variants_of(op.name))
        variants.push_back({{"name", v->name}, {"backend", to_string(v->backend)}, {"role", to_string(v->role)},
                            {"claim", {{"determinism", to_string(v->claim.determinism)}, {"source", to_string(v->claim.source)}, {"reason", v->claim.reason}}}});
      json configs = json::array();
      for (const auto& cc : cat.configs)
        if (cc.op == &op)
          configs.push_back({{"name", cc.name}, {"config_id", cc.config_id}, {"params", cc.params_json},
                             {"dtype", dtype_short_name(cc.dtype)}, {"math", cc.math}, {"seed", cc.seed}});
      json dtypes = json::array();
      for (DType t : op.dtypes) dtypes.push_back(dtype_short_name(t));
      const auto batch = batch_param(op);
      out["ops"].push_back({{"name", op.name}, {"family", op.family}, {"summary", op.summary}, {"params", params},
                            {"dtypes", dtypes}, {"math_modes", op.math_modes},
                            {"batch", batch ? json(*batch) : json(nullptr)},  // the parameter batch_invariance varies
                            {"variants", variants}, {"configs", configs}});
    }
    out["pipelines"] = json::array();
    for (const auto& pl : cat.pipelines) {
      json settings = json::array();
      for (const auto& pp : pipelines) {
        if (pp.pipeline != &pl) continue;
        const Claim c = pipeline_claim(pl, *pp.setting);
        json variants = json::object();
        for (std::size_t k = 0; k < pl.ops.size(); ++k) variants[pl.ops[k].name] = pp.setting->variants[k]->name;
        settings.push_back({{"name", pp.setting->name}, {"backend", to_string(pipeline_backend(*pp.setting))},
                            {"role", to_string(pipeline_role(*pp.setting))}, {"variants", variants},
                            {"claim", {{"determinism", to_string(c.determinism)}, {"source", to_string(c.source)}, {"reason", c.reason}}}});
      }
      if (settings.empty()) continue;
      json state = json::array();
      for (const auto& st : pl.state)
        state.push_back({{"name", st.name}, {"dtype", dtype_short_name(st.desc.dtype)}, {"shape", st.desc.shape}, {"updated", st.updated}});
      out["pipelines"].push_back({{"name", pl.name}, {"description", pl.description}, {"config_id", pl.config_id},
                                  {"definition", pl.definition}, {"state", state}, {"settings", settings}});
    }
    std::cout << json_text(out, 2) << "\n";
    return 0;
  }
  std::printf("# catalogue %s (sha256 %.12s), %zu cases, %zu pipeline cases\n", cat.source.c_str(), cat.digest.c_str(), cases.size(),
              pipelines.size());
  for (const auto& op : Registry::global().ops()) {
    if (!selected(op)) continue;
    std::string dtypes;
    for (DType t : op.dtypes) dtypes += (dtypes.empty() ? "" : " ") + std::string(dtype_short_name(t));
    const auto batch = batch_param(op);
    std::printf("\n%s  [%s]  %s\n  dtypes: %s%s\n  configs:", op.name.c_str(), op.family.c_str(), op.summary.c_str(), dtypes.c_str(),
                batch ? ("; batch: " + *batch).c_str() : "");
    for (const auto& cc : cat.configs)
      if (cc.op == &op) {
        std::printf(" %s", cc.name.c_str());
        if (cc.dtype != DType::f32 || cc.math != "default")
          std::printf(" (%s%s)", std::string(dtype_short_name(cc.dtype)).c_str(), cc.math != "default" ? (" " + cc.math).c_str() : "");
      }
    std::printf("\n");
    // Names in a column as wide as the op's longest (cudnn.sdpa_deterministic), at least 22.
    int width = 22;
    for (const auto* v : Registry::global().variants_of(op.name)) width = std::max(width, static_cast<int>(v->name.size()));
    for (const auto* v : Registry::global().variants_of(op.name))
      std::printf("  %-*s %-5s %s\n", width, v->name.c_str(), to_string(v->backend).c_str(), claim_text(v->claim).c_str());
  }
  for (const auto& pl : cat.pipelines) {
    std::string state;
    for (const auto& st : pl.state)
      state += (state.empty() ? "" : ", ") + st.name + " " + shape_string(st.desc.shape) + (st.updated ? " (updated)" : "");
    std::printf("\npipeline %s  %lld steps of %zu ops, %s, seed %llu%s\n  state: %s\n  ops:", pl.name.c_str(),
                static_cast<long long>(pl.steps), pl.ops.size(), std::string(dtype_short_name(pl.dtype)).c_str(),
                static_cast<unsigned long long>(pl.seed), pl.description.empty() ? "" : ("  " + pl.description).c_str(), state.c_str());
    for (const auto& st : pl.ops) std::printf(" %s=%s", st.name.c_str(), st.config.op->name.c_str());
    std::printf("\n");
    for (const auto& pp : pipelines)
      if (pp.pipeline == &pl)
        std::printf("  setting %-18s %-5s %s\n", pp.setting->name.c_str(), to_string(pipeline_backend(*pp.setting)).c_str(),
                    claim_text(pipeline_claim(pl, *pp.setting)).c_str());
    for (const auto& name : pl.unavailable) std::printf("  setting %-18s (needs GPU variants this build lacks)\n", name.c_str());
  }
  return 0;
}

}  // namespace

void add_list(CLI::App& app, std::vector<Verb>& verbs) {
  auto o = std::make_shared<ListOptions>();
  auto* c = app.add_subcommand("list", "the catalogue as built: ops, variants, claims, configs");
  c->add_option("--backend", o->backend, "cpu, cuda, torch or all (cpu and cuda), or a comma-separated list")
      ->check(CLI::Validator(backend_list_error, "BACKENDS"));
  c->add_option("--op", o->ops, "only ops matching these globs");
  auto* catalog = c->add_option("--catalog", o->catalog, "catalogue JSON replacing the built-in one");
  c->add_option("--profile", o->profile, "built-in catalogue profile: quick, default or models")->excludes(catalog);
  c->add_flag("--json", o->json, "machine-readable");
  c->add_flag("--cases", o->cases, "one case per line: op/config/variant backend");
  verbs.push_back({c, [o] { return list(*o); }});
}

}  // namespace d9m::cli
