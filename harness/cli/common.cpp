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
  const auto same = [](const struct stat& a, const std::string& b) {
    struct stat st {};
    return ::stat(b.c_str(), &st) == 0 && st.st_dev == a.st_dev && st.st_ino == a.st_ino;
  };
  struct stat out {};
  const bool out_exists = ::stat(path.c_str(), &out) == 0;
  for (const auto& in : inputs) {
    struct stat in_st {};
    if (in.empty() || ::stat(in.c_str(), &in_st) != 0) continue;
    // The same file by device and inode, whatever its spelling (found by review: `attest -o` the
    // store replaced the store, and `-o` the report the report it attests).
    if (out_exists && same(out, in))
      fail_usage("-o " + path + " is " + in + ", which this command reads: writing it would replace it; name another file");
    // A store's side files are part of its evidence (found by audit: `report -o STORE-wal`
    // replaced an interrupted run's log, and `verify` then said OK of a store without it). They
    // are named after the file the store's path resolves to, and need not exist yet.
    const std::string real = real_path_or_self(in);
    for (const std::string side : {"-wal", "-shm", "-journal", "-runlease"}) {
      const bool named = path.size() > side.size() && path.compare(path.size() - side.size(), side.size(), side) == 0 &&
                         same(in_st, path.substr(0, path.size() - side.size()));
      if (named || (out_exists && (same(out, real + side) || same(out, in + side))))
        fail_usage("-o " + path + " names the side file " + side + " of " + in +
                   " (SQLite's and d9m's own, part of its evidence): writing it would replace it; name another file");
    }
  }
}

}  // namespace d9m::cli
