// The harness's one exception family. Every failure the harness raises on purpose is an Error
// with a category, and the category alone decides the CLI's exit code (DESIGN.md):
//
//   usage        bad arguments or bad input files (catalogue, baseline, attestation)   exit 2
//   environment  the machine or a file around us failed: unreadable, foreign or newer
//                store, missing folder, full disk, lost device                          exit 3
//   store_fault  a d9m store that opened but whose evidence does not hold together:
//                edited, deleted or inserted rows, a broken hash chain                  exit 1
//   internal     a bug in d9m (an invariant that did not hold)                          exit 3
//
// Exit code 1 is also what a broken claim gives: both mean "this evidence does not pass".
#pragma once
#include <stdexcept>
#include <string>

namespace d9m {

enum class ExitCode : int { ok = 0, claim_broken = 1, usage = 2, environment = 3 };

enum class ErrorCategory { usage, environment, store_fault, internal };

constexpr ExitCode exit_code_of(ErrorCategory c) {
  switch (c) {
    case ErrorCategory::usage: return ExitCode::usage;
    case ErrorCategory::store_fault: return ExitCode::claim_broken;
    case ErrorCategory::environment:
    case ErrorCategory::internal: return ExitCode::environment;
  }
  return ExitCode::environment;
}

// How the CLI words the category in front of the message.
constexpr const char* prefix_of(ErrorCategory c) {
  switch (c) {
    case ErrorCategory::store_fault: return "store fault: ";
    case ErrorCategory::internal: return "internal error: ";
    case ErrorCategory::usage:
    case ErrorCategory::environment: return "";
  }
  return "";
}

class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, const std::string& message) : std::runtime_error(message), category_(category) {}
  ErrorCategory category() const { return category_; }
  ExitCode code() const { return exit_code_of(category_); }

 private:
  ErrorCategory category_;
};

[[noreturn]] inline void fail_usage(const std::string& m) { throw Error(ErrorCategory::usage, m); }
[[noreturn]] inline void fail_environment(const std::string& m) { throw Error(ErrorCategory::environment, m); }
[[noreturn]] inline void fail_store_fault(const std::string& m) { throw Error(ErrorCategory::store_fault, m); }
[[noreturn]] inline void fail_internal(const std::string& m) { throw Error(ErrorCategory::internal, m); }

// The category's name as worker processes send it across their pipe, and back.
constexpr const char* to_string(ErrorCategory c) {
  switch (c) {
    case ErrorCategory::usage: return "usage";
    case ErrorCategory::environment: return "environment";
    case ErrorCategory::store_fault: return "store_fault";
    case ErrorCategory::internal: return "internal";
  }
  return "internal";
}
inline ErrorCategory error_category_from_string(const std::string& s) {
  for (ErrorCategory c : {ErrorCategory::usage, ErrorCategory::environment, ErrorCategory::store_fault, ErrorCategory::internal})
    if (s == to_string(c)) return c;
  return ErrorCategory::internal;
}

}  // namespace d9m
