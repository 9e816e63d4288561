// What several verbs share: the catalogue they read and how they write their output.
#pragma once
#include <string>
#include <vector>

#include "harness/core/catalog.h"
#include "harness/report/model.h"
#include "harness/report/results.h"

namespace d9m::cli {

// The catalogue at `path`, or the built-in one of `profile` when it is empty.
Catalog load_catalog(const std::string& path, const std::string& profile = "default");

// `text` to `path` (replacing it whole, never half-written), or to standard output for "" or "-".
void write_output(const std::string& path, const std::string& text);

// Checks, before a verb reads anything, that write_output(path, ...) can succeed (nothing to
// check for standard output): a missing or unwritable folder fails at once, not after the work;
// and that `path` is none of the files in `inputs`, which the verb reads (Error(usage)).
void check_output(const std::string& path, const std::vector<std::string>& inputs = {});

}  // namespace d9m::cli
