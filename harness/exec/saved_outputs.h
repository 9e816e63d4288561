// What `d9m run --save-outputs ROOT` writes, and where (README "The CLI"):
//
//   ROOT/<op>/<config>/config.json        the config, its input digest, the inputs' and output's shapes
//   ROOT/<op>/<config>/inputs/<arg>.npy   each input, named after the TensorFlow op's argument
//   ROOT/<op>/<config>/<variant>.npy      each variant's first output
//
// Each name is exactly one path component (is_path_safe_name, harness/core/files.h): config names
// because the catalogue accepts no other, op, variant and argument names because the registry's
// are asserted to be here. So "." or ".." can never make two cases share, or escape, a folder.
#pragma once
#include <string>
#include <vector>

#include "harness/core/inputs.h"
#include "harness/exec/runner.h"

namespace d9m {

// Every folder and file the cases would write under `root`, checked before the run opens its
// store: the folders can be made and written into, no file's place is taken by a folder.
// Throws Error(environment) naming the place; writes nothing that stays.
void check_saved_outputs(const std::string& root, const std::vector<PlannedCase>& cases);

// A config's config.json and inputs.
void save_inputs(const std::string& root, const CatalogConfig& cc, const std::vector<HostTensor>& inputs,
                 const std::string& input_digest);

// A variant's first output.
void save_output(const std::string& root, const CatalogConfig& cc, const VariantDef& v, const void* data);

// Removes the variant's output file of an earlier run of the same config, if there is one: called
// before the case's trials start, so that a case that then ends without an output (ERROR, a
// crash, prepare() refusing) leaves none behind that this run's config.json and store would seem
// to vouch for. Throws Error(environment) where the file is there and cannot be removed.
void remove_saved_output(const std::string& root, const CatalogConfig& cc, const VariantDef& v);

}  // namespace d9m
