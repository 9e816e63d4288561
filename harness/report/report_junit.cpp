// JUnit XML: one <testsuite> per stack holding, per case, a one-test <testsuite> whose
// <properties> carry the evidence (digest, trials, distinct digests, the 95% bound, the claim)
// and whose <testcase> is skipped for SKIPPED and UNSUPPORTED, a failure for a broken claim and
// an error for ERROR. Nested suites keep the file valid against Jenkins' junit-10.xsd (which
// allows properties on suites only) while every case keeps its own properties.
#include <cstdio>
#include <sstream>

#include "harness/core/escape.h"
#include "harness/report/report.h"

namespace d9m {

namespace {

std::string seconds(std::optional<std::int64_t> ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", ns ? static_cast<double>(*ns) / 1e9 : 0.0);
  return buf;
}

// The failure types of d9m's first JUnit reports, kept for the CI rules that match on them.
const char* junit_type(Failure::Kind k) {
  switch (k) {
    case Failure::Kind::diverged: return "NONDETERMINISTIC";
    case Failure::Kind::control_diverged: return "CONTROL_DIVERGED";
    case Failure::Kind::cross_implementation: return "CROSS_IMPLEMENTATION";
    case Failure::Kind::not_invariant: return "NOT_BATCH_INVARIANT";
    case Failure::Kind::wrong_values: return "WRONG_VALUES";
    case Failure::Kind::error: return "ERROR";
  }
  return "FAILURE";
}

void property(std::ostringstream& o, const char* indent, const std::string& name, const std::string& value) {
  o << indent << "<property name=\"" << xml_escape(name) << "\" value=\"" << xml_escape(value) << "\"/>\n";
}

}  // namespace

std::string render_junit(const ReportData& data, const StatusModel& m) {
  std::ostringstream body;
  std::int64_t all_tests = 0, all_failures = 0, all_errors = 0;
  for (const auto& s : data.stacks) {
    std::int64_t tests = 0, failures = 0, errors = 0, skipped = 0;
    std::ostringstream cases;
    for (const auto& r : data.results) {
      if (r.stack != s.id) continue;
      ++tests;
      const bool failed = m.verdict.claim_failed(r);
      const bool error = r.status == Status::error;
      const bool skip = r.status == Status::skipped || r.status == Status::unsupported;
      failures += failed;
      errors += error;
      skipped += skip;
      cases << "    <testsuite name=\"" << xml_escape(r.label()) << "\" tests=\"1\" failures=\""
            << failed << "\" errors=\"" << error << "\" skipped=\"" << skip << "\" time=\"" << seconds(r.median_ns) << "\">\n"
            << "      <properties>\n";
      property(cases, "        ", "status", to_string(r.status));
      property(cases, "        ", "role", to_string(r.role));
      property(cases, "        ", "digest", r.digest);
      property(cases, "        ", "trials", std::to_string(r.trials));
      property(cases, "        ", "distinct", std::to_string(r.distinct));
      if (r.status == Status::deterministic) {
        char b[32];
        std::snprintf(b, sizeof b, "%.6g", r.bound95());
        property(cases, "        ", "bound95", b);
      }
      property(cases, "        ", "claim", r.claim_determinism + " (" + r.claim_source + "): " + r.claim_reason);
      if (!r.bit_equal_to.empty()) property(cases, "        ", "bit_equal_to", r.bit_equal_to);
      property(cases, "        ", "input_digest", r.input_digest);
      property(cases, "        ", "config_id", r.config_id);
      property(cases, "        ", "params", r.params);
      property(cases, "        ", "dtype", r.dtype);
      property(cases, "        ", "math", r.math);
      if (r.median_ns) property(cases, "        ", "median_ns", std::to_string(*r.median_ns));
      // The precision in the class name where not the default: two configs of one name at two
      // precisions are two test cases (found by review: identical classname and name).
      const std::string precision = r.dtype != "f32" || r.math != "default" ? "." + r.dtype + (r.math != "default" ? "." + r.math : "") : "";
      cases << "      </properties>\n      <testcase classname=\"" << xml_escape("d9m." + s.label + "." + r.op + "." + r.config + precision)
            << "\" name=\"" << xml_escape(r.variant) << "\" time=\"" << seconds(r.median_ns) << "\">\n";
      if (skip) cases << "        <skipped message=\"" << xml_escape(to_string(r.status) + ": " + r.detail) << "\"/>\n";
      for (const Failure* f : m.verdict.failures_of(r))
        cases << "        <" << (f->kind == Failure::Kind::error ? "error" : "failure") << " type=\"" << junit_type(f->kind)
              << "\" message=\"" << xml_escape(f->text) << "\"/>\n";
      cases << "      </testcase>\n    </testsuite>\n";
    }
    body << "  <testsuite name=\"" << xml_escape(s.label + " " + s.id.substr(0, 12)) << "\" tests=\"" << tests << "\" failures=\""
         << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" timestamp=\"" << xml_escape(data.generated_at)
         << "\" hostname=\"" << xml_escape(s.hosts.empty() ? "" : s.hosts.front()) << "\">\n    <properties>\n";
    property(body, "      ", "fingerprint", s.id);
    property(body, "      ", "stack", s.summary());
    property(body, "      ", "runs", std::to_string(s.runs));
    property(body, "      ", "evidence sha256", data.evidence.digest);
    // The store's verdict in words: a suite of skips and passing controls is not a pass when no
    // case was tested (found by review: NO EVIDENCE read green here).
    property(body, "      ", "verdict",
             m.verdict.certifies_nothing() ? "NO EVIDENCE: " + m.verdict.no_evidence() : m.verdict.held() ? "PASS" : "FAIL");
    if (!data.selection.empty()) property(body, "      ", "selection", data.selection);
    body << "    </properties>\n" << cases.str() << "  </testsuite>\n";
    all_tests += tests;
    all_failures += failures;
    all_errors += errors;
  }
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"d9m\" tests=\"" << all_tests << "\" failures=\""
    << all_failures << "\" errors=\"" << all_errors << "\">\n"
    << body.str() << "</testsuites>\n";
  return o.str();
}

}  // namespace d9m
