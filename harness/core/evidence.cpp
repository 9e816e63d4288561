#include "harness/core/evidence.h"

#include <stdexcept>

namespace d9m {

std::string to_string(Status s) {
  switch (s) {
    case Status::deterministic: return "DETERMINISTIC";
    case Status::nondeterministic: return "NONDETERMINISTIC";
    case Status::error: return "ERROR";
    case Status::unsupported: return "UNSUPPORTED";
    case Status::skipped: return "SKIPPED";
  }
  return "ERROR";
}

Status status_from_string(const std::string& s) {
  for (Status st : {Status::deterministic, Status::nondeterministic, Status::error, Status::unsupported, Status::skipped})
    if (to_string(st) == s) return st;
  throw std::invalid_argument("unknown status " + s);
}

}  // namespace d9m
