// Where the tests find the fixtures they read from the source tree (digest vectors, report
// goldens, the schema-1 store). The path compiled in is the configuring machine's; a build
// carried to another machine (ci/gpu-audit.sh on a lent GPU) names the tree there through the
// environment variable D9M_SOURCE_DIR.
#pragma once

#include <cstdlib>
#include <string>

namespace d9m::test {

inline std::string source_path(const std::string& relative) {
  const char* env = std::getenv("D9M_SOURCE_DIR");
  const std::string root = env && *env ? env : D9M_SOURCE_DIR;
  return root + "/" + relative;
}

}  // namespace d9m::test
