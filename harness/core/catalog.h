// The catalogue: which ops run on which configs. JSON, schema "d9m.catalog/1":
//   {"schema": "d9m.catalog/1",
//    "configs": [{"op": "bias_add_grad", "name": "small", "params": {...},
//                 "dtype": "f16", "math": "default", "seed": 1, "variants": ["cpu.*"],
//                 "batch_invariance": {"sizes": [1, 7]}, "quick": true, "model": "ResNet-50 ..."}, ...]}
// `dtype` (default "f32"; "f16", "bf16", "f64" where the op supports them) is the float type of
// every float tensor (but those the framework types float32 at every precision,
// TensorDesc::keeps_f32) and `math` (default "default") a library op's math mode; `seed` (default 1)
// seeds the inputs; `variants` (default all) are globs over the op's variant names;
// `batch_invariance` (ops with a batch dimension only) also runs sub-batches of the sizes named
// and compares their rows with the full batch's (harness/core/batch_invariance.h); `quick`
// (default false) puts a built-in config into the quick profile too (builtin_catalog); `model`
// says where a shape comes from (the models profile: the network, layer and batch). Every field
// is validated against the registry before anything runs: a bad catalogue is a usage error
// (exit 2) naming the file and the line and column (syntax) or the field path.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/batch_invariance.h"
#include "harness/core/json_text.h"
#include "kernels/registry.h"

namespace d9m {

struct CatalogConfig {
  const OpDef* op = nullptr;
  std::string name;
  Params params;
  nlohmann::json params_json;  // with defaults filled in: the canonical parameters
  DType dtype = DType::f32;    // "dtype": the float type of every float tensor (problem.dtype)
  std::string math = "default";  // "math": the library's math mode (problem.math)
  std::uint64_t seed = 1;
  std::vector<std::string> variant_globs;
  Problem problem;
  std::optional<BatchPlan> batch;  // "batch_invariance": the sub-batches to compare (not part of the id)
  bool quick = false;              // "quick": also in the quick profile (not part of the id)
  std::string model;               // "model": where the shape comes from, or empty (not part of the id)
  std::string config_id;  // stable id: SHA-256 of {op, params, seed} (+ dtype, math unless default), 16 hex digits

  bool selects(const VariantDef& v) const;
};

// A pipeline (DESIGN.md "Pipelines and traces"): a training step written as catalogue ops with data
// flow, run for `steps` steps per trial. Every tensor has a name. A name whose first use is as an
// input is *state*: made once per trial by the fill of the op that first reads it (the op's own
// input generator, seeded with the pipeline's seed and that op's position), kept across steps, and
// rebound when an op writes that name (a parameter update: the next op and the next step read the
// new value). Any other name is written by exactly one op of the step and read only after it.
// Tensors pass between ops as bytes: the producer's dtype and element count must match the
// consumer's input, the shape may differ (a flatten). Format (catalogue field "pipelines"):
//   {"name": "cnn", "steps": 3, "dtype": "f32", "seed": 1, "quick": true, "description": "...",
//    "ops": [{"name": "conv1", "op": "conv2d", "params": {...}, "math": "default",
//             "inputs": ["x", "w1"], "output": "z1", "variant": "cpu.ordered"}, ...],
//    "settings": {"deterministic": {}, "framework_default": {"conv1": "cpu.atomic"}}}
// Each setting (default: one named "as_written") swaps the variants of the ops it names; a
// (pipeline, setting) pair is one case, its trial digest that of its trajectory. A setting that
// needs a GPU variant a CPU-only build lacks is not in that build (CatalogPipeline::unavailable).
struct PipelineStep {
  std::string name;              // unique within the pipeline
  CatalogConfig config;          // the op on its params at the pipeline's dtype; its seed fills state
  std::vector<std::string> inputs;  // one tensor name per config.problem.inputs entry
  std::string output;
};

struct PipelineState {
  std::string name;
  std::size_t filled_by = 0;  // the step whose op's fill makes it...
  std::size_t input = 0;      // ...as that op's input number `input`
  TensorDesc desc;            // as that op reads it
  bool updated = false;       // some op writes it (a parameter); otherwise data
};

struct PipelineSetting {
  std::string name;
  std::vector<const VariantDef*> variants;  // one per step
};

struct CatalogPipeline {
  std::string name, description;
  DType dtype = DType::f32;
  std::uint64_t seed = 1;
  std::int64_t steps = 1;
  bool quick = false;
  std::vector<PipelineStep> ops;
  std::vector<PipelineState> state;  // in order of first use
  std::vector<PipelineSetting> settings;
  std::vector<std::string> unavailable;  // settings that need GPU variants this build lacks
  nlohmann::json definition;  // canonical: name, steps, dtype, seed, and the ops (without variants)
  std::string config_id;      // SHA-256 of the definition, 16 hex digits

  // Another step count than the catalogue's (`d9m run --steps`), with the definition and its id:
  // a pipeline of other length is another case (config "N_steps"), and its traces another
  // pipeline's. `steps` in [1, kMaxPipelineSteps].
  void set_steps(std::int64_t steps);
};

inline constexpr std::int64_t kMaxPipelineSteps = 100000;

struct Catalog {
  std::string source;  // file name, or "<default>"
  std::string text;    // the bytes it was parsed from: worker processes parse these, never the file again
  std::string digest;  // SHA-256 of the canonical JSON
  std::vector<CatalogConfig> configs;
  std::vector<CatalogPipeline> pipelines;
};

// Largest input + output size of one config, refused before anything is allocated.
inline constexpr double kMaxConfigBytes = 4.0 * 1024 * 1024 * 1024;
// Most elements of one tensor: cuDNN's descriptors and CUB count elements in int. (With 4-byte
// dtypes the byte limit alone kept tensors below this; 2-byte ones need the check.)
inline constexpr std::int64_t kMaxTensorElements = std::int64_t{1} << 30;

// Gives every float tensor of `p` the config's dtype (but those that keep f32, TensorDesc::keeps_f32)
// and records dtype and math mode in it.
void with_precision(Problem& p, DType dtype, const std::string& math);

Catalog parse_catalog(const std::string& text, const std::string& source, const Registry& registry);
Catalog load_catalog_file(const std::string& path, const Registry& registry);
Catalog default_catalog(const Registry& registry);
// The built-in catalogue of a profile (DESIGN.md "Profiles"): "default" (suites/catalog/default.json),
// "quick" (its configs marked "quick": at least one per op, covering every variant, what CI
// certifies on every change) or "models" (suites/catalog/models.json: the layer shapes of real
// networks, each config naming its `model`). An unknown name is a usage error listing the profiles.
Catalog builtin_catalog(const std::string& profile, const Registry& registry);
const std::vector<std::string>& profile_names();
const std::string& default_catalog_text();

bool glob_match(const std::string& pattern, const std::string& text);

// The pieces of the catalogue parser the pipeline parser (pipeline.cpp) shares. Each fails with
// Error(usage) "SOURCE: PATH: what".
std::uint64_t parse_seed(const JsonFields& v, const nlohmann::json& seed, const std::string& path);
void check_name(const JsonFields& v, const std::string& name, const std::string& path);
// The op of a catalogue object with its params, math and dtype (from `dtype_from`, a value and its
// path, where given; else the object's own "dtype"), validated and planned into `cc`, whose seed
// the caller has set; config_id from all of them.
void parse_op_fields(const JsonFields& v, const nlohmann::json& c, const std::string& path, const Registry& registry,
                     CatalogConfig& cc, std::optional<std::pair<const nlohmann::json*, std::string>> dtype_from);
std::vector<CatalogPipeline> parse_pipelines(const JsonFields& v, const nlohmann::json& pipelines, const Registry& registry);

// The controls every run includes (the canaries): config names starting with '_' are theirs.
inline constexpr const char* kCanarySource = "<d9m controls>";
inline constexpr const char* kCanaryConfig = "_canary";
inline bool is_control_config(const std::string& config_name) { return !config_name.empty() && config_name[0] == '_'; }
const Catalog& canary_catalog(const Registry& registry);

}  // namespace d9m
