// What several verbs share: the catalogue they read and how they write their output.
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
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

// A number of seconds that is a number: CLI11's Range lets NaN through (found by audit: `run
// --timeout nan` made every case an ERROR).
inline CLI::Validator finite_seconds() {
  return CLI::Validator([](std::string& v) { return std::isfinite(std::strtod(v.c_str(), nullptr)) ? "" : "not a number: " + v; },
                        "FINITE");
}

}  // namespace d9m::cli
