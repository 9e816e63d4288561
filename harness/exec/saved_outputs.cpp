#include "harness/exec/saved_outputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "harness/core/error.h"
#include "harness/core/files.h"
#include "harness/core/json_text.h"
#include "harness/core/npy.h"

namespace d9m {

namespace {

// A name from the registry or the catalogue that becomes a path component. The catalogue
// refuses unsafe config names with a usage error; an unsafe name here is a bug in d9m.
const std::string& component(const std::string& name, const char* what) {
  if (!is_path_safe_name(name)) fail_internal(std::string(what) + " name \"" + name + "\" cannot be a file name under --save-outputs");
  return name;
}

// The config's folder below the root, and the whole path.
std::string config_relative(const CatalogConfig& cc) { return component(cc.op->name, "op") + "/" + component(cc.name, "config"); }
std::string config_folder(const std::string& root, const CatalogConfig& cc) { return root + "/" + config_relative(cc); }
std::string input_file(const std::string& root, const CatalogConfig& cc, const TensorDesc& input) {
  return config_folder(root, cc) + "/inputs/" + component(input.name, "input") + ".npy";
}
std::string output_file(const std::string& root, const CatalogConfig& cc, const VariantDef& v) {
  return config_folder(root, cc) + "/" + component(v.name, "variant") + ".npy";
}

// A config folder that holds another config's saved files (another catalogue's config of the
// same op and name, or the same name at another precision) is refused: this run's files would
// overwrite some of them and sit beside the rest, under a config.json that describes only this
// run's (found by review: a stale cpu.ordered.npy of another shape beside the new config.json).
void check_same_config(const std::string& root, const CatalogConfig& cc) {
  const std::string path = config_folder(root, cc) + "/config.json";
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_input_file(path, "saved config", std::size_t{1} << 20));
  } catch (const nlohmann::json::exception&) {
  }
  const auto text = [&](const char* key) { return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : ""; };
  if (text("config_id") == cc.config_id) return;  // the id covers the params, seed, dtype and math
  fail_usage(path + ": the saved outputs there are of another config (" +
             (j.is_object() ? "config_id " + text("config_id") + ", " + text("dtype") : std::string("not a d9m config.json")) +
             "; this run's is " + cc.config_id + ", " + std::string(dtype_short_name(cc.problem.dtype)) +
             "): this run's files would be mixed with them. Save into another folder, or remove " + config_folder(root, cc));
}

}  // namespace

void check_saved_outputs(const std::string& root, const std::vector<PlannedCase>& cases) {
  check_output_folder(root);
  std::set<const CatalogConfig*> configs;
  for (const auto& pc : cases) {
    const CatalogConfig& cc = *pc.config;
    if (configs.insert(&cc).second) {
      check_no_links_within(root, config_relative(cc) + "/inputs");
      check_output_folder(config_folder(root, cc) + "/inputs");  // and, on the way, the config's folder
      check_not_a_folder(config_folder(root, cc) + "/config.json");
      check_same_config(root, cc);
      for (const auto& in : cc.problem.inputs) check_not_a_folder(input_file(root, cc, in));
    }
    check_not_a_folder(output_file(root, cc, *pc.variant));
  }
}

void save_inputs(const std::string& root, const CatalogConfig& cc, const std::vector<HostTensor>& inputs,
                 const std::string& input_digest) {
  make_dirs_within(root, config_relative(cc) + "/inputs");
  nlohmann::json in = nlohmann::json::array();
  for (const auto& t : inputs) {
    write_npy(input_file(root, cc, t.desc()), t.desc(), t.data());
    in.push_back({{"name", t.desc().name}, {"dtype", dtype_name(t.desc().dtype)}, {"shape", t.desc().shape}});
  }
  const nlohmann::json j = {{"op", cc.op->name},   {"config", cc.name},        {"config_id", cc.config_id},
                            {"params", cc.params_json}, {"dtype", dtype_short_name(cc.problem.dtype)},
                            {"math", cc.problem.math},  {"seed", cc.seed},     {"input_digest", input_digest},
                            {"inputs", in},
                            {"output", {{"name", cc.problem.output.name}, {"dtype", dtype_name(cc.problem.output.dtype)},
                                        {"shape", cc.problem.output.shape}}}};
  write_file_atomically(config_folder(root, cc) + "/config.json", json_text(j, 2) + "\n");
}

void save_output(const std::string& root, const CatalogConfig& cc, const VariantDef& v, const void* data) {
  check_no_links_within(root, config_relative(cc));
  write_npy(output_file(root, cc, v), cc.problem.output, data);
}

void remove_saved_output(const std::string& root, const CatalogConfig& cc, const VariantDef& v) {
  check_no_links_within(root, config_relative(cc));
  const std::string path = output_file(root, cc, v);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    fail_environment(path + ": cannot remove the output an earlier run saved there: " + std::strerror(errno));
}

}  // namespace d9m
