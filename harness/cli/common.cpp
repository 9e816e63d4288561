#include "harness/cli/common.h"

#include <sys/stat.h>

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

void check_output(const std::string& path, const std::vector<std::string>& inputs) {
  if (path.empty() || path == "-") return;
  check_output_file(path);
  // The same file by device and inode, whatever its spelling (found by review: `attest -o` the
  // store replaced the store, and `-o` the report the report it attests).
  struct stat out {};
  if (::stat(path.c_str(), &out) != 0) return;  // not there yet: nothing to replace
  for (const auto& in : inputs) {
    struct stat st {};
    if (::stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
      fail_usage("-o " + path + " is " + in + ", which this command reads: writing it would replace it; name another file");
  }
}

}  // namespace d9m::cli
