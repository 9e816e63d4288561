// The harness's one error type. Its exit code is the CLI's (DESIGN.md):
//   0 every claim held, 1 a claim was broken, 2 bad usage or bad input, 3 environment problem.
#pragma once
#include <stdexcept>
#include <string>

namespace d9m {

enum class ExitCode : int { ok = 0, claim_broken = 1, usage = 2, environment = 3 };

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

[[noreturn]] inline void fail_usage(const std::string& m) { throw Error(ExitCode::usage, m); }
[[noreturn]] inline void fail_environment(const std::string& m) { throw Error(ExitCode::environment, m); }

}  // namespace d9m
