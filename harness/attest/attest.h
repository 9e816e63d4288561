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

// The most an envelope (or a report given to attest) may weigh: they are read whole, and a
// file named by someone else must not exhaust memory.
inline constexpr std::int64_t kMaxEnvelopeBytes = std::int64_t{64} << 20;
inline constexpr std::int64_t kMaxReportBytes = std::int64_t{1} << 30;

// A file the statement covers, by the name it was given and its SHA-256.
struct Subject {
  std::string name, sha256;
};

// The statement of `subjects` (the report, then the store): result PASSED or FAILED by the
// verdict, passedTests / failedTests naming every case ("op/config/variant@S1"), configuration
// the catalogue digests, fingerprints, run roots, the store's evidence digest and manifest heads.
nlohmann::json make_statement(const ReportData& data, const std::vector<Subject>& subjects);

// What `d9m attest` signs, once it has checked what it may sign: the store's content is all in
// its file (no write-ahead log; Error environment otherwise), the store passes `d9m verify`
// (Error store_fault otherwise: a PASSED must never cover a tampered store), and the report was
// rendered from this store as it is now (its evidence digest; Error usage otherwise, and for a
// CSV report, which carries none).
nlohmann::json attest_store(const Store& store, const std::string& report_path);

// The evidence digest a rendered report names: the JSON field `evidence.sha256`, or the
// "evidence sha256" header line (Markdown, HTML) or property (JUnit). nullopt when it names
// none; Error(usage) when it names two different ones.
std::optional<std::string> report_evidence(const std::string& report_text, const std::string& report_path);

// The DSSE envelope of a statement; signed when `private_key_pem` names an Ed25519 PEM key.
nlohmann::json make_envelope(const nlohmann::json& statement, const std::optional<std::string>& private_key_pem);

struct AttestationCheck {
  bool signature_ok = false;
  std::vector<std::string> problems;  // empty: valid
  nlohmann::json statement;           // set only once the signature verified
  std::string result = "?";           // the statement's predicate.result, when it has one
};
// Verifies an envelope: first its shape (Error usage for a malformed one: not a regular file,
// over kMaxEnvelopeBytes, not JSON, wrong types), then its signature with the PEM public key,
// and only when that verifies, the statement's subjects: each must be a regular file (never a
// device or FIFO) whose SHA-256 is the attested one. Paths are relative to `base_dir` when
// given and not absolute.
AttestationCheck verify_attestation(const std::string& envelope_path, const std::string& public_key_pem,
                                    const std::string& base_dir);

// DSSE's pre-authentication encoding: "DSSEv1 <len(type)> <type> <len(body)> <body>".
std::string dsse_pae(const std::string& type, const std::string& body);

// Standard base64 with padding (RFC 4648 section 4), as DSSE carries payloads and signatures.
std::string base64(const std::string& in);

}  // namespace d9m
