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

void property(std::ostringstream& o, const char* indent, const std::string& name, const std::string& value) {
  o << indent << "<property name=\"" << xml_escape(name) << "\" value=\"" << xml_escape(value) << "\"/>\n";
}

}  // namespace

std::string render_junit(const ReportData& data) {
  const auto cross = cross_checks(data);
  std::ostringstream body;
  std::int64_t all_tests = 0, all_failures = 0, all_errors = 0;
  for (const auto& s : data.stacks) {
    std::int64_t tests = 0, failures = 0, errors = 0, skipped = 0;
    std::ostringstream cases;
    for (const auto& r : data.results) {
      if (r.stack != s.id) continue;
      ++tests;
      std::string cross_failure;
      for (const auto& c : cross)
        if (c.stack == r.stack && c.op == r.op && c.config == r.config && c.variant == r.variant && !c.equal())
          cross_failure = "claims the bits of " + c.partner + " but the digests differ (" + c.digest + " vs " + c.partner_digest + ")";
      const bool failed = r.claim_broken() || !cross_failure.empty();
      const bool error = r.status == Status::error;
      const bool skip = r.status == Status::skipped || r.status == Status::unsupported;
      failures += failed;
      errors += error;
      skipped += skip;
      cases << "    <testsuite name=\"" << xml_escape(r.op + "/" + r.config + "/" + r.variant) << "\" tests=\"1\" failures=\""
            << failed << "\" errors=\"" << error << "\" skipped=\"" << skip << "\" time=\"" << seconds(r.median_ns) << "\">\n"
            << "      <properties>\n";
      property(cases, "        ", "status", to_string(r.status));
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
      if (r.median_ns) property(cases, "        ", "median_ns", std::to_string(*r.median_ns));
      cases << "      </properties>\n      <testcase classname=\"" << xml_escape("d9m." + s.label + "." + r.op + "." + r.config)
            << "\" name=\"" << xml_escape(r.variant) << "\" time=\"" << seconds(r.median_ns) << "\">\n";
      if (skip) cases << "        <skipped message=\"" << xml_escape(to_string(r.status) + ": " + r.detail) << "\"/>\n";
      if (error) cases << "        <error type=\"ERROR\" message=\"" << xml_escape(r.detail) << "\"/>\n";
      if (r.claim_broken())
        cases << "        <failure type=\"NONDETERMINISTIC\" message=\""
              << xml_escape("claimed deterministic (" + r.claim_source + "), " + std::to_string(r.distinct) + " distinct digests in " +
                            std::to_string(r.trials) + " trials")
              << "\"/>\n";
      if (!cross_failure.empty()) cases << "        <failure type=\"CROSS_IMPLEMENTATION\" message=\"" << xml_escape(cross_failure) << "\"/>\n";
      cases << "      </testcase>\n    </testsuite>\n";
    }
    body << "  <testsuite name=\"" << xml_escape(s.label + " " + s.id.substr(0, 12)) << "\" tests=\"" << tests << "\" failures=\""
         << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" timestamp=\"" << xml_escape(data.generated_at)
         << "\" hostname=\"" << xml_escape(s.hosts.empty() ? "" : s.hosts.front()) << "\">\n    <properties>\n";
    property(body, "      ", "fingerprint", s.id);
    property(body, "      ", "stack", s.summary());
    property(body, "      ", "runs", std::to_string(s.runs));
    property(body, "      ", "evidence sha256", data.evidence.digest);
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

std::string render_csv(const ReportData& data) {
  std::ostringstream o;
  o << "stack,fingerprint,op,config,config_id,variant,backend,status,trials,distinct,digest,input_digest,"
       "claim_determinism,claim_source,claim_reason,claim_broken,bound95,median_ns,min_ns,worst_diff_count,worst_diff_max_ulp,"
       "worst_diff_max_abs,detail\r\n";
  for (const auto& r : data.results) {
    const auto& s = data.stack(r.stack);
    char bound[32] = "", abs[32] = "";
    if (r.status == Status::deterministic) std::snprintf(bound, sizeof bound, "%.6g", r.bound95());
    if (r.worst_diff) std::snprintf(abs, sizeof abs, "%.6g", r.worst_diff->max_abs);
    const std::string fields[] = {
        s.label, s.id, r.op, r.config, r.config_id, r.variant, r.backend, to_string(r.status), std::to_string(r.trials),
        std::to_string(r.distinct), r.digest, r.input_digest, r.claim_determinism, r.claim_source, r.claim_reason,
        r.claim_broken() ? "true" : "false", bound, r.median_ns ? std::to_string(*r.median_ns) : "",
        r.min_ns ? std::to_string(*r.min_ns) : "", r.worst_diff ? std::to_string(r.worst_diff->count) : "",
        r.worst_diff ? std::to_string(r.worst_diff->max_ulp) : "", abs, r.detail};
    bool first = true;
    for (const auto& f : fields) {
      o << (first ? "" : ",") << csv_field(f);
      first = false;
    }
    o << "\r\n";
  }
  return o.str();
}

}  // namespace d9m
