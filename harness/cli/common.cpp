#include "harness/cli/common.h"

#include <iostream>

#include "harness/core/error.h"
#include "harness/core/files.h"

namespace d9m::cli {

Catalog load_catalog(const std::string& path, const std::string& profile) {
  return path.empty() ? builtin_catalog(profile, Registry::global()) : load_catalog_file(path, Registry::global());
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  write_file_atomically(path, text);
}

void check_output(const std::string& path) {
  if (!path.empty() && path != "-") check_output_file(path);
}

}  // namespace d9m::cli
