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

struct Catalog {
  std::string source;  // file name, or "<default>"
  std::string text;    // the bytes it was parsed from: worker processes parse these, never the file again
  std::string digest;  // SHA-256 of the canonical JSON
  std::vector<CatalogConfig> configs;
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

// The controls every run includes (the canaries): config names starting with '_' are theirs.
inline constexpr const char* kCanarySource = "<d9m controls>";
inline constexpr const char* kCanaryConfig = "_canary";
inline bool is_control_config(const std::string& config_name) { return !config_name.empty() && config_name[0] == '_'; }
const Catalog& canary_catalog(const Registry& registry);

}  // namespace d9m
