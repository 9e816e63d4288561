#include "harness/core/catalog.h"
#include "harness/core/json_text.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>

#include "harness/core/digest.h"
#include "harness/core/embedded.h"
#include "harness/core/error.h"
#include "harness/core/files.h"

namespace d9m {

bool glob_match(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

bool CatalogConfig::selects(const VariantDef& v) const {
  if (variant_globs.empty()) return true;
  for (const auto& g : variant_globs)
    if (glob_match(g, v.name)) return true;
  return false;
}

void with_precision(Problem& p, DType dtype, const std::string& math) {
  if (is_float(p.output.dtype) && !p.output.keeps_f32) p.output.dtype = dtype;
  for (auto& d : p.inputs)
    if (is_float(d.dtype) && !d.keeps_f32) d.dtype = dtype;
  p.dtype = dtype;
  p.math = math;
}

namespace {

using nlohmann::json;

std::vector<const TensorDesc*> tensors_of(const Problem& p) {
  std::vector<const TensorDesc*> out;
  for (const auto& d : p.inputs) out.push_back(&d);
  out.push_back(&p.output);
  return out;
}

// An op parameter checked against the op's ParamSpec.
ParamValue param_value(const JsonFields& f, const ParamSpec& spec, const json& v, const std::string& path) {
  switch (spec.kind) {
    case ParamKind::integer: {
      static_assert(kMaxIntegerParam == (std::int64_t{1} << 31) - 1, "the message says 2^31-1");
      const std::string expected = "expected an integer in [" + std::to_string(spec.min) + ", 2^31-1], got ";
      if (!v.is_number_integer()) f.fail(path, expected + json_type_name(v));
      // Positive JSON integers parse as unsigned: compare in the unsigned domain first.
      const bool too_big = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxIntegerParam);
      if (too_big || v.get<std::int64_t>() < spec.min) f.fail(path, expected + json_text(v));
      return v.get<std::int64_t>();
    }
    case ParamKind::boolean:
      if (!v.is_boolean()) f.fail(path, "expected true or false, got " + json_type_name(v));
      return v.get<bool>();
    case ParamKind::real:
      if (!v.is_number()) f.fail(path, "expected a number, got " + json_type_name(v));
      return v.get<double>();
    case ParamKind::choice: {
      std::string options;
      for (const auto& c : spec.choices) options += (options.empty() ? "\"" : ", \"") + c + "\"";
      if (!v.is_string()) f.fail(path, "expected one of " + options + ", got " + json_type_name(v));
      const auto s = v.get<std::string>();
      for (const auto& c : spec.choices)
        if (c == s) return s;
      f.fail(path, "expected one of " + options + ", got \"" + s + "\"");
    }
  }
  f.fail(path, "unknown parameter kind");
}

using Validator = JsonFields;

json to_json(const ParamValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

}  // namespace

namespace {
// "batch_invariance": {"sizes": [...]}: the sub-batches, planned now so that a size the op cannot
// run at is a catalogue error before anything runs.
BatchPlan batch_plan(const Validator& v, const json& field, const std::string& path, const CatalogConfig& cc) {
  const std::string& op = cc.op->name;
  if (!cc.op->batch) v.fail(path, op + " has no batch dimension: its output rows are not computed apart, so batch invariance does not apply");
  v.object(field, path);
  for (const auto& [key, _] : field.items())
    if (key != "sizes") v.fail(path + "." + key, "unknown field (expected sizes)");
  const json& sizes = v.field(field, path, "sizes");
  const std::string param = cc.op->batch(cc.params).param;
  const std::int64_t full = cc.params.integer(param);
  if (full < 2)
    v.fail(path, "a batch of " + std::to_string(full) + " (" + param + ") has no smaller sub-batch to compare with: give " + param +
                     " at least 2, or leave batch_invariance out");
  const std::string expected = "expected a non-empty array of distinct sub-batch sizes in [1, " + std::to_string(full - 1) +
                               "] (" + param + " is " + std::to_string(full) + ")";
  if (!sizes.is_array() || sizes.empty()) v.fail(path + ".sizes", expected + ", got " + json_text(sizes));
  std::vector<std::int64_t> list;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const json& s = sizes[k];
    const std::string sp = path + ".sizes[" + std::to_string(k) + "]";
    if (!s.is_number_integer() || s.get<std::int64_t>() < 1 || s.get<std::int64_t>() >= full ||
        std::find(list.begin(), list.end(), s.get<std::int64_t>()) != list.end())
      v.fail(sp, expected + ", got " + json_text(s));
    list.push_back(s.get<std::int64_t>());
  }
  try {
    return plan_sub_batches(*cc.op, cc.params, cc.dtype, cc.math, list);
  } catch (const InvalidConfig& e) {
    v.fail(path + ".sizes", std::string("at a sub-batch size: ") + e.what());
  }
}
}  // namespace

std::uint64_t parse_seed(const JsonFields& v, const json& seed, const std::string& path) {
  if (!seed.is_number_unsigned()) v.fail(path, "expected a non-negative integer, got " + json_text(seed));
  return seed.get<std::uint64_t>();
}

void check_name(const JsonFields& v, const std::string& name, const std::string& path) {
  if (is_path_safe_name(name)) return;
  const std::string shown = name.size() > kMaxNameLength
                                ? json_text(json(name.substr(0, kMaxNameLength) + "...")) + " (" +
                                      std::to_string(name.size()) + " characters)"
                                : json_text(json(name));  // quoted, control characters escaped
  v.fail(path, "expected 1 to " + std::to_string(kMaxNameLength) + " letters, digits and _.+- only, not starting with '.', got " + shown);
}

void parse_op_fields(const JsonFields& v, const json& c, const std::string& path, const Registry& registry, CatalogConfig& cc,
                     std::optional<std::pair<const json*, std::string>> dtype_from) {
  const std::string op_name = v.string_field(c, path, "op");
  cc.op = registry.find_op(op_name);
  if (!cc.op) {
    std::string known;
    for (const auto& o : registry.ops()) known += (known.empty() ? "" : ", ") + o.name;
    v.fail(path + ".op", "unknown op \"" + op_name + "\" (known: " + known + ")");
  }
  const json& params = v.field(c, path, "params");
  v.object(params, path + ".params");
  for (const auto& [key, _] : params.items()) {
    bool known = false;
    for (const auto& spec : cc.op->params) known |= spec.name == key;
    if (!known) {
      std::string expected;
      for (const auto& spec : cc.op->params) expected += (expected.empty() ? "" : ", ") + spec.name;
      v.fail(path + ".params." + key, "unknown parameter of " + op_name + " (expected: " + expected + ")");
    }
  }
  cc.params_json = json::object();
  for (const auto& spec : cc.op->params) {
    auto it = params.find(spec.name);
    ParamValue value;
    if (it != params.end()) {
      value = param_value(v, spec, *it, path + ".params." + spec.name);
    } else if (spec.default_value) {
      value = *spec.default_value;
    } else {
      v.fail(path + ".params", "missing required parameter \"" + spec.name + "\" (" + spec.doc + ")");
    }
    cc.params.set(spec.name, value);
    if (!(spec.added_later && spec.default_value && value == *spec.default_value)) cc.params_json[spec.name] = to_json(value);
  }

  // The precision: a float dtype the op supports and one of its math modes, both defaulted.
  const json* dtype = dtype_from ? dtype_from->first : (c.contains("dtype") ? &c.at("dtype") : nullptr);
  const std::string dtype_path = dtype_from ? dtype_from->second : path + ".dtype";
  if (const json* it = dtype) {
    std::string supported;
    for (DType t : cc.op->dtypes) supported += (supported.empty() ? "\"" : ", \"") + std::string(dtype_short_name(t)) + "\"";
    const auto t = it->is_string() ? float_dtype_from_short_name(it->get<std::string>()) : std::nullopt;
    if (!t || std::find(cc.op->dtypes.begin(), cc.op->dtypes.end(), *t) == cc.op->dtypes.end())
      v.fail(dtype_path, op_name + " runs in " + supported + ", got " + json_text(*it));
    cc.dtype = *t;
  }
  if (auto it = c.find("math"); it != c.end()) {
    std::string supported;
    for (const auto& m : cc.op->math_modes) supported += (supported.empty() ? "\"" : ", \"") + m + "\"";
    const bool known = it->is_string() && std::find(cc.op->math_modes.begin(), cc.op->math_modes.end(),
                                                    it->get<std::string>()) != cc.op->math_modes.end();
    if (!known) v.fail(path + ".math", op_name + " offers the math modes " + supported + ", got " + json_text(*it));
    cc.math = it->get<std::string>();
    // TF32 and strict FP32 are modes of f32 arithmetic: at another dtype the config would be a row
    // of its own that means nothing (found by review: "matmul f64 tf32").
    if (cc.math != "default" && cc.dtype != DType::f32)
      v.fail(path + ".math", "\"" + cc.math + "\" is a mode of f32 arithmetic, and this config's dtype is \"" +
                                 std::string(dtype_short_name(cc.dtype)) + "\"");
  }

  try {
    cc.problem = cc.op->plan(cc.params);
    cc.problem.params = cc.params.values();
  } catch (const InvalidConfig& e) {
    v.fail(path + ".params." + e.param, e.what());
  }
  with_precision(cc.problem, cc.dtype, cc.math);
  long double bytes = 0;
  auto add = [&](const TensorDesc& d) {
    long double n = dtype_size(d.dtype);
    for (auto s : d.shape) n *= static_cast<long double>(s);
    bytes += n;
  };
  for (const auto& d : cc.problem.inputs) add(d);
  add(cc.problem.output);
  if (bytes > kMaxConfigBytes)
    v.fail(path + ".params", "inputs and output would take " + std::to_string(static_cast<double>(bytes / (1 << 20))) +
                                 " MiB, more than the limit of " + std::to_string(static_cast<long long>(kMaxConfigBytes / (1 << 20))) + " MiB");
  if (static_cast<long double>(cc.problem.output.numel()) >= 4294967296.0L)
    v.fail(path + ".params", "output has 2^32 or more elements; d9m indexes outputs with 32 bits");
  for (const auto* d : tensors_of(cc.problem))
    if (static_cast<long double>(d->numel()) > static_cast<long double>(kMaxTensorElements))
      v.fail(path + ".params", d->name + " would have more than 2^30 elements, the limit (cuDNN and CUB count elements in int)");

  // The id of a config at the default precision is what it was before the precision axis, so
  // that stores and baselines of earlier versions still name the same configs.
  json key = {{"op", op_name}, {"params", cc.params_json}, {"seed", cc.seed}};
  if (cc.dtype != DType::f32) key["dtype"] = dtype_short_name(cc.dtype);
  if (cc.math != "default") key["math"] = cc.math;
  cc.config_id = sha256_hex(json_text(key)).substr(0, 16);
}

Catalog parse_catalog(const std::string& text, const std::string& source, const Registry& registry) {
  const json root = parse_json_input(text, source);
  const Validator v(source);
  v.object(root, "(root)");
  for (const auto& [key, _] : root.items())
    if (key != "schema" && key != "configs" && key != "description" && key != "pipelines")
      v.fail(key, "unknown field (expected \"schema\", \"description\", \"configs\" or \"pipelines\")");
  if (v.string_field(root, "(root)", "schema") != "d9m.catalog/1")
    v.fail("schema", "expected \"d9m.catalog/1\", got " + json_text(root["schema"]));
  // A catalogue holds configs, pipelines (harness/core/pipeline.h), or both.
  static const json kNone = json::array();
  const json& configs = root.contains("pipelines") && !root.contains("configs") ? kNone : v.field(root, "(root)", "configs");
  if (!configs.is_array() || (configs.empty() && !root.contains("pipelines"))) v.fail("configs", "expected a non-empty array");

  Catalog cat;
  cat.source = source;
  cat.text = text;
  std::set<std::pair<std::string, std::string>> names;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const std::string path = "configs[" + std::to_string(i) + "]";
    const json& c = configs[i];
    v.object(c, path);
    for (const auto& [key, _] : c.items())
      if (key != "op" && key != "name" && key != "params" && key != "dtype" && key != "math" && key != "seed" &&
          key != "variants" && key != "batch_invariance" && key != "quick" && key != "model")
        v.fail(path + "." + key,
               "unknown field (expected op, name, params, dtype, math, seed, variants, batch_invariance, quick, model)");
    CatalogConfig cc;
    if (auto it = c.find("seed"); it != c.end()) cc.seed = parse_seed(v, *it, path + ".seed");
    parse_op_fields(v, c, path, registry, cc, std::nullopt);
    const std::string& op_name = cc.op->name;
    cc.name = v.string_field(c, path, "name");
    // Names become folder names under --save-outputs (harness/exec/saved_outputs.h): one path
    // component, never "." or "..". A plain character check, not std::regex: libstdc++'s regex
    // recurses once per character and overflowed the stack on a long name (found by fuzz_catalog).
    check_name(v, cc.name, path + ".name");
    if (is_control_config(cc.name) && source != kCanarySource)
      v.fail(path + ".name", "names starting with _ are reserved for d9m's own controls, got \"" + cc.name + "\"");
    if (!names.insert({op_name, cc.name}).second)
      v.fail(path + ".name", "duplicate config name \"" + cc.name + "\" for op " + op_name);

    if (auto it = c.find("model"); it != c.end()) {
      if (!it->is_string() || it->get<std::string>().empty())
        v.fail(path + ".model", "expected a non-empty string naming where the shape comes from, got " + json_text(*it));
      cc.model = it->get<std::string>();
    }
    if (auto it = c.find("quick"); it != c.end()) {
      if (!it->is_boolean()) v.fail(path + ".quick", "expected true or false, got " + json_type_name(*it));
      cc.quick = it->get<bool>();
    }
    if (auto it = c.find("variants"); it != c.end()) {
      if (!it->is_array() || it->empty()) v.fail(path + ".variants", "expected a non-empty array of globs");
      for (std::size_t k = 0; k < it->size(); ++k) {
        const json& g = (*it)[k];
        const std::string gp = path + ".variants[" + std::to_string(k) + "]";
        if (!g.is_string()) v.fail(gp, "expected a string, got " + json_type_name(g));
        const auto glob = g.get<std::string>();
        bool any = false;
        for (const auto* var : registry.variants_of(op_name)) any |= glob_match(glob, var->name);
        // A name for a backend this build lacks is not an error: the catalogue is shared by
        // CPU-only and CUDA builds, and such variants are simply not in this build. GPU variants
        // are d9m's own kernels (cuda.) or a GPU library's (cudnn., cublas., cublaslt., cub.).
        bool other_backend = false;
        for (const char* gpu : {"cuda.", "cudnn.", "cublas.", "cublaslt.", "cub."}) other_backend |= glob.rfind(gpu, 0) == 0;
        if (!any && !other_backend) {
          std::string known;
          for (const auto* var : registry.variants_of(op_name)) known += (known.empty() ? "" : ", ") + var->name;
          v.fail(gp, "\"" + glob + "\" matches no variant of " + op_name + " (known: " + known + ")");
        }
        cc.variant_globs.push_back(glob);
      }
    }

    if (auto it = c.find("batch_invariance"); it != c.end()) cc.batch = batch_plan(v, *it, path + ".batch_invariance", cc);

    cat.configs.push_back(std::move(cc));
  }
  if (auto it = root.find("pipelines"); it != root.end()) cat.pipelines = parse_pipelines(v, *it, registry);
  cat.digest = sha256_hex(json_text(root));
  return cat;
}

Catalog load_catalog_file(const std::string& path, const Registry& registry) {
  return parse_catalog(read_input_file(path, "catalogue"), path, registry);
}

const Catalog& canary_catalog(const Registry& registry) {
  // A heavily colliding scatter: 16384 rows into 4 segments. Its atomic variant diverges almost
  // always when threads really run concurrently; its serial (ordered) variant must never.
  static const Catalog c = parse_catalog(
      R"({"schema": "d9m.catalog/1", "configs": [{"op": "unsorted_segment_sum", "name": "_canary",
          "params": {"rows": 16384, "depth": 8, "num_segments": 4}, "seed": 42}]})",
      kCanarySource, registry);
  return c;
}

const std::string& default_catalog_text() { return embedded::default_catalog_json(); }

Catalog default_catalog(const Registry& registry) {
  return parse_catalog(default_catalog_text(), "<default catalogue>", registry);
}

const std::vector<std::string>& profile_names() {
  static const std::vector<std::string> names = {"quick", "default", "models"};
  return names;
}

Catalog builtin_catalog(const std::string& profile, const Registry& registry) {
  if (profile == "default") return default_catalog(registry);
  if (profile == "models") return parse_catalog(embedded::models_catalog_json(), "<models catalogue>", registry);
  // The default catalogue's configs marked "quick", as a catalogue text of its own, made at build
  // time (core/quick_profile.h): parsing the whole default catalogue on every quick run was three
  // quarters of `d9m run`'s start, and selecting from it at run time another fifth.
  if (profile == "quick") return parse_catalog(embedded::quick_catalog_json(), "<quick catalogue>", registry);
  std::string known;
  for (const auto& n : profile_names()) known += (known.empty() ? "" : ", ") + n;
  fail_usage("--profile: unknown profile \"" + profile + "\" (expected one of " + known + ")");
}

}  // namespace d9m
