// CSV: one row per case and stack (RFC 4180, CRLF), for spreadsheets and scripts. Columns are
// only ever appended.
#include <cstdio>
#include <sstream>

#include "harness/core/escape.h"
#include "harness/report/report.h"

namespace d9m {

std::string render_csv(const ReportData& data, const StatusModel& m) {
  std::ostringstream o;
  o << "stack,fingerprint,op,config,config_id,variant,backend,status,trials,distinct,digest,input_digest,"
       "claim_determinism,claim_source,claim_reason,claim_broken,bound95,median_ns,min_ns,worst_diff_count,worst_diff_max_ulp,"
       "worst_diff_max_abs,detail,role,failures,dtype,math,values,values_max_abs,values_allowed,invariance\r\n";
  for (const auto& r : data.results) {
    const auto& s = data.stack(r.stack);
    std::string failures;
    for (const Failure* f : m.verdict.failures_of(r)) failures += (failures.empty() ? "" : " ") + id_of(f->kind);
    char bound[32] = "", abs[32] = "";
    if (r.status == Status::deterministic) std::snprintf(bound, sizeof bound, "%.6g", r.bound95());
    if (r.worst_diff) std::snprintf(abs, sizeof abs, "%.6g", r.worst_diff->max_abs);
    // The value check: its outcome, and for a checked one the largest difference and the allowance.
    char values_abs[32] = "", values_allowed[32] = "";
    if (r.values && r.values->outcome != ValueCheck::Outcome::unchecked) {
      std::snprintf(values_abs, sizeof values_abs, "%.6g", r.values->max_abs);
      std::snprintf(values_allowed, sizeof values_allowed, "%.6g", r.values->allowed);
    }
    const std::string fields[] = {
        s.label, s.id, r.op, r.config, r.config_id, r.variant, r.backend, to_string(r.status), std::to_string(r.trials),
        std::to_string(r.distinct), r.digest, r.input_digest, r.claim_determinism, r.claim_source, r.claim_reason,
        r.claim_broken() ? "true" : "false", bound, r.median_ns ? std::to_string(*r.median_ns) : "",
        r.min_ns ? std::to_string(*r.min_ns) : "", r.worst_diff ? std::to_string(r.worst_diff->count) : "",
        r.worst_diff ? std::to_string(r.worst_diff->max_ulp) : "", abs, r.detail, to_string(r.role), failures, r.dtype, r.math,
        r.values ? to_string(r.values->outcome) : "", values_abs, values_allowed,
        r.invariance_status()};  // batch invariance in cuDNN's words; empty where the config did not ask
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
