// Attestations (in-toto Statement v1, predicate https://in-toto.io/attestation/test-result/v0.1)
// in a DSSE envelope, signed with Ed25519 through OpenSSL. The subjects are the report and the
// store, by SHA-256, so changing any byte of either breaks verification.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/report/results.h"

namespace d9m {

// The statement for `report_path` and `store_path`: result PASSED or FAILED by the verdict,
// passedTests / failedTests naming every case ("op/config/variant@S1"), configuration the
// catalogue digests and fingerprints.
nlohmann::json make_statement(const ReportData& data, const std::string& report_path, const std::string& store_path);

// The DSSE envelope of a statement; signed when `private_key_pem` names an Ed25519 PEM key.
nlohmann::json make_envelope(const nlohmann::json& statement, const std::optional<std::string>& private_key_pem);

struct AttestationCheck {
  bool signature_ok = false;
  std::vector<std::string> problems;  // empty: valid
  nlohmann::json statement;
};
// Verifies the envelope's signature with the PEM public key, then every subject's SHA-256 against
// the file it names (relative to `base_dir` when not absolute).
AttestationCheck verify_attestation(const std::string& envelope_path, const std::string& public_key_pem,
                                    const std::string& base_dir);

// DSSE's pre-authentication encoding: "DSSEv1 <len(type)> <type> <len(body)> <body>".
std::string dsse_pae(const std::string& type, const std::string& body);

}  // namespace d9m
