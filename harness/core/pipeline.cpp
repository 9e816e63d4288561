// The catalogue's "pipelines" (catalog.h, CatalogPipeline): training steps written as catalogue
// ops with data flow. Everything a run needs is checked here, before anything runs: every op and
// parameter as in a config, every variant, and every edge of the data flow (dtype and element
// count), so a bad pipeline is a usage error naming the field.
#include <algorithm>
#include <map>
#include <set>

#include "harness/core/catalog.h"
#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/files.h"

namespace d9m {

namespace {

using nlohmann::json;

std::string describe(const TensorDesc& d) {
  return std::string(dtype_short_name(d.dtype)) + " " + shape_string(d.shape) + " (" + std::to_string(d.numel()) + " elements)";
}

// The variant, or nullptr for a GPU variant this build lacks (a CPU-only build: the catalogue is
// shared, and a setting that needs one is simply not in this build, as a config's GPU globs).
const VariantDef* find_variant(const JsonFields& v, const Registry& registry, const std::string& op, const json& name,
                               const std::string& path) {
  if (!name.is_string()) v.fail(path, "expected a variant name, got " + json_type_name(name));
  if (const VariantDef* var = registry.find_variant(op, name.get<std::string>())) return var;
  // Lenient only where this build has no variant of that library at all (a typo of a library the
  // build has is an error).
  for (const char* gpu : {"cuda.", "cudnn.", "cublas.", "cublaslt.", "cub.", "cusparse."})
    if (name.get<std::string>().rfind(gpu, 0) == 0 &&
        std::none_of(registry.variants().begin(), registry.variants().end(),
                     [&](const VariantDef& var) { return var.name.rfind(gpu, 0) == 0; }))
      return nullptr;
  std::string known;
  for (const auto* var : registry.variants_of(op)) known += (known.empty() ? "" : ", ") + var->name;
  v.fail(path, "\"" + name.get<std::string>() + "\" is no variant of " + op + " in this build (known: " + known + ")");
}

void only_fields(const JsonFields& v, const json& obj, const std::string& path, std::initializer_list<const char*> keys) {
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();  // a structured binding cannot be captured (clang 14)
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
      std::string expected;
      for (const char* k : keys) expected += (expected.empty() ? "" : ", ") + std::string(k);
      v.fail(path + "." + key, "unknown field (expected " + expected + ")");
    }
  }
}

CatalogPipeline parse_pipeline(const JsonFields& v, const json& p, const std::string& path, const Registry& registry) {
  v.object(p, path);
  only_fields(v, p, path, {"name", "description", "steps", "dtype", "seed", "quick", "ops", "settings"});
  CatalogPipeline pl;
  pl.name = v.string_field(p, path, "name");
  check_name(v, pl.name, path + ".name");
  if (auto it = p.find("description"); it != p.end()) {
    if (!it->is_string()) v.fail(path + ".description", "expected a string, got " + json_type_name(*it));
    pl.description = it->get<std::string>();
  }
  if (auto it = p.find("steps"); it != p.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > kMaxPipelineSteps)
      v.fail(path + ".steps", "expected an integer in [1, " + std::to_string(kMaxPipelineSteps) + "], got " + json_text(*it));
    pl.steps = it->get<std::int64_t>();
  }
  if (auto it = p.find("seed"); it != p.end()) pl.seed = parse_seed(v, *it, path + ".seed");
  if (auto it = p.find("quick"); it != p.end()) {
    if (!it->is_boolean()) v.fail(path + ".quick", "expected true or false, got " + json_type_name(*it));
    pl.quick = it->get<bool>();
  }
  static const json kF32 = "f32";
  const json* dtype = p.contains("dtype") ? &p.at("dtype") : &kF32;

  const json& ops = v.array_field(p, path, "ops");
  if (ops.empty()) v.fail(path + ".ops", "expected a non-empty array of ops");
  std::map<std::string, std::size_t> state_index;  // state name -> index in pl.state
  std::set<std::string> step_names;
  json definition_ops = json::array();
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const std::string sp = path + ".ops[" + std::to_string(k) + "]";
    const json& o = v.object(ops[k], sp);
    only_fields(v, o, sp, {"name", "op", "params", "math", "inputs", "output", "variant"});
    PipelineStep step;
    step.name = v.string_field(o, sp, "name");
    check_name(v, step.name, sp + ".name");
    if (!step_names.insert(step.name).second) v.fail(sp + ".name", "duplicate op name \"" + step.name + "\" in pipeline " + pl.name);
    // Each op's fill gets a stream of its own: the pipeline's seed and the op's position.
    step.config.seed = pl.seed + k;
    step.config.name = pl.name + "." + step.name;
    parse_op_fields(v, o, sp, registry, step.config, std::make_pair(dtype, path + ".dtype"));
    const Problem& problem = step.config.problem;
    const json& inputs = v.array_field(o, sp, "inputs");
    if (inputs.size() != problem.inputs.size()) {
      std::string names;
      for (const auto& d : problem.inputs) names += (names.empty() ? "" : ", ") + d.name;
      v.fail(sp + ".inputs", step.config.op->name + " takes " + std::to_string(problem.inputs.size()) + " input(s) (" + names +
                                 "), got " + std::to_string(inputs.size()));
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string ip = sp + ".inputs[" + std::to_string(i) + "]";
      if (!inputs[i].is_string()) v.fail(ip, "expected a tensor name, got " + json_type_name(inputs[i]));
      const std::string name = inputs[i].get<std::string>();
      check_name(v, name, ip);
      const TensorDesc& want = problem.inputs[i];
      // The tensor as it stands when this op reads it: the last op of the step before this one to
      // write it, else the state it names.
      const TensorDesc* have = nullptr;
      for (std::size_t j = k; j-- > 0;)
        if (pl.ops[j].output == name) {
          have = &pl.ops[j].config.problem.output;
          break;
        }
      if (!have) {
        if (auto it = state_index.find(name); it != state_index.end()) {
          have = &pl.state[it->second].desc;
        } else {
          state_index[name] = pl.state.size();
          pl.state.push_back({name, k, i, want, false});
          have = &pl.state.back().desc;
        }
      }
      if (have->dtype != want.dtype || have->numel() != want.numel())
        v.fail(ip, "\"" + name + "\" is " + describe(*have) + ", but " + step.config.op->name + "'s input " + want.name + " is " +
                       describe(want));
      // Integer tensors are indices, ids and labels, valid only for the ranges their maker's
      // parameters give (scatter rows, classes, segments, boxes' images): one read by an op of other
      // parameters could index out of bounds. So they are state, made by a fill, and read only by
      // ops of the filling op's family that agree with it on every parameter both have (a loss and
      // its gradient share their labels, crop_and_resize and its gradients their box indices).
      if (want.dtype == DType::i32) {
        const auto st = state_index.find(name);
        if (st == state_index.end())
          v.fail(ip, "\"" + name + "\" is an integer tensor (" + want.name + ") written by an op: integer inputs (indices, ids, labels) "
                     "must be state made by a fill, whose values the filling op's parameters bound");
        const PipelineStep* maker = st->second < pl.state.size() && pl.state[st->second].filled_by < pl.ops.size()
                                        ? &pl.ops[pl.state[st->second].filled_by] : nullptr;
        bool agree = maker && maker->config.op->family == step.config.op->family;
        for (const auto& item : step.config.params_json.items())
          agree = agree && (!maker->config.params_json.contains(item.key()) || maker->config.params_json[item.key()] == item.value());
        if (maker && !agree)
          v.fail(ip, "\"" + name + "\" is an integer tensor made by the fill of " + maker->name + " (" + maker->config.op->name +
                     " " + json_text(maker->config.params_json) + "): its values are valid for those parameters only, and " +
                     step.config.op->name + " here has " + json_text(step.config.params_json) +
                     " (an op of the same family agreeing on the parameters both have may read it)");
      }
      step.inputs.push_back(name);
    }
    step.output = v.string_field(o, sp, "output");
    check_name(v, step.output, sp + ".output");
    if (auto it = state_index.find(step.output); it != state_index.end()) {
      PipelineState& st = pl.state[it->second];
      const TensorDesc& out = problem.output;
      if (st.desc.dtype == DType::i32)
        v.fail(sp + ".output", "writes integer state \"" + st.name + "\" (indices, ids or labels): only a fill makes those");
      if (out.dtype != st.desc.dtype || out.numel() != st.desc.numel())
        v.fail(sp + ".output", "writes state \"" + st.name + "\" (" + describe(st.desc) + ") with " + describe(out) +
                                   ": an update must keep the dtype and the element count");
      st.updated = true;
    } else {
      for (std::size_t j = 0; j < k; ++j)
        if (pl.ops[j].output == step.output)
          v.fail(sp + ".output", "\"" + step.output + "\" is already written by " + pl.ops[j].name +
                                     " in this step (only state may be written again, and only by its update)");
    }
    (void)find_variant(v, registry, step.config.op->name, v.field(o, sp, "variant"), sp + ".variant");
    json def = {{"name", step.name},          {"op", step.config.op->name}, {"params", step.config.params_json},
                {"inputs", step.inputs},      {"output", step.output}};
    if (step.config.math != "default") def["math"] = step.config.math;
    definition_ops.push_back(std::move(def));
    pl.ops.push_back(std::move(step));
  }
  if (std::none_of(pl.state.begin(), pl.state.end(), [](const PipelineState& s) { return s.updated; }))
    v.fail(path + ".ops", "no op writes state: a pipeline's result is the state its ops update (the trained parameters)");

  // The variants as written, then each setting's swaps.
  auto written = [&] {
    PipelineSetting s;
    for (std::size_t k = 0; k < pl.ops.size(); ++k)
      s.variants.push_back(registry.find_variant(pl.ops[k].config.op->name, ops[k].at("variant").get<std::string>()));  // may be null
    return s;
  }();
  if (auto it = p.find("settings"); it != p.end()) {
    v.object(*it, path + ".settings");
    if (it->empty()) v.fail(path + ".settings", "expected at least one setting");
    for (const auto& [name, swaps] : it->items()) {
      const std::string setp = path + ".settings." + name;
      check_name(v, name, setp);
      v.object(swaps, setp);
      PipelineSetting s = written;
      s.name = name;
      for (const auto& swap : swaps.items()) {
        const std::string& op_name = swap.key();
        const json& variant = swap.value();
        const auto at = std::find_if(pl.ops.begin(), pl.ops.end(), [&](const PipelineStep& st) { return st.name == op_name; });
        if (at == pl.ops.end()) v.fail(setp + "." + op_name, "no op of pipeline " + pl.name + " is named \"" + op_name + "\"");
        const auto index = static_cast<std::size_t>(at - pl.ops.begin());
        s.variants[index] = find_variant(v, registry, at->config.op->name, variant, setp + "." + op_name);
      }
      pl.settings.push_back(std::move(s));
    }
  } else {
    written.name = "as_written";
    pl.settings.push_back(std::move(written));
  }
  // Settings that need a GPU variant this build lacks are not in this build.
  for (auto it = pl.settings.begin(); it != pl.settings.end();) {
    if (std::find(it->variants.begin(), it->variants.end(), nullptr) == it->variants.end()) {
      ++it;
      continue;
    }
    pl.unavailable.push_back(it->name);
    it = pl.settings.erase(it);
  }

  pl.definition = {{"pipeline", pl.name}, {"steps", pl.steps}, {"dtype", dtype_short_name(pl.ops.front().config.dtype)},
                   {"seed", pl.seed},     {"ops", std::move(definition_ops)}};
  pl.dtype = pl.ops.front().config.dtype;
  pl.config_id = sha256_hex(json_text(pl.definition)).substr(0, 16);
  return pl;
}

}  // namespace

void CatalogPipeline::set_steps(std::int64_t n) {
  if (n < 1 || n > kMaxPipelineSteps) fail_internal("pipeline " + name + ": " + std::to_string(n) + " steps");
  steps = n;
  definition["steps"] = n;
  config_id = sha256_hex(json_text(definition)).substr(0, 16);
}

std::vector<CatalogPipeline> parse_pipelines(const JsonFields& v, const json& pipelines, const Registry& registry) {
  if (!pipelines.is_array() || pipelines.empty()) v.fail("pipelines", "expected a non-empty array of pipelines");
  std::vector<CatalogPipeline> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < pipelines.size(); ++i) {
    const std::string path = "pipelines[" + std::to_string(i) + "]";
    out.push_back(parse_pipeline(v, pipelines[i], path, registry));
    if (!names.insert(out.back().name).second) v.fail(path + ".name", "duplicate pipeline name \"" + out.back().name + "\"");
  }
  return out;
}

}  // namespace d9m
