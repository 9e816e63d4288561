#include "harness/attest/attest.h"
#include "harness/core/json_text.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/fingerprint.h"
#include "harness/report/model.h"

namespace d9m {

using nlohmann::json;

namespace {

constexpr const char* kPayloadType = "application/vnd.in-toto+json";

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> unbase64(const std::string& in) {
  if (in.size() % 4) return std::nullopt;
  std::string out(3 * in.size() / 4 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  std::size_t len = static_cast<std::size_t>(n);
  for (std::size_t i = in.size(); i > 0 && in[i - 1] == '='; --i) --len;  // EVP_DecodeBlock counts padding
  out.resize(len);
  return out;
}

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

Pkey read_key(const std::string& path, bool is_private) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) fail_usage(path + ": cannot read the key");
  EVP_PKEY* k = is_private ? PEM_read_PrivateKey(f, nullptr, nullptr, nullptr) : PEM_read_PUBKEY(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (!k) fail_usage(path + ": not a PEM " + std::string(is_private ? "private" : "public") + " key");
  if (EVP_PKEY_id(k) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(k);
    fail_usage(path + ": not an Ed25519 key (make one with: openssl genpkey -algorithm ed25519 -out key.pem)");
  }
  return Pkey(k);
}

// keyid: SHA-256 of the DER-encoded public key.
std::string key_id(EVP_PKEY* k) {
  unsigned char* der = nullptr;
  const int n = i2d_PUBKEY(k, &der);
  std::string id = n > 0 ? sha256_hex(std::string(reinterpret_cast<char*>(der), static_cast<std::size_t>(n))) : "";
  OPENSSL_free(der);
  return id;
}

std::string file_sha256_or_fail(const std::string& path) {
  const std::string h = sha256_file(path);
  if (h.empty()) fail_usage(path + ": cannot read");
  return h;
}

}  // namespace

std::string dsse_pae(const std::string& type, const std::string& body) {
  return "DSSEv1 " + std::to_string(type.size()) + " " + type + " " + std::to_string(body.size()) + " " + body;
}

json make_statement(const ReportData& data, const std::string& report_path, const std::string& store_path) {
  // The verdict of `d9m report` on the same store (report/model.h): a case fails with any of its
  // failures; one with evidence and none passed.
  const Verdict v = verdict_of(data);
  json passed = json::array(), failed = json::array();
  for (const auto& r : data.results) {
    const std::string name = r.op + "/" + r.config + "/" + r.variant + "@" + data.stack(r.stack).label;
    if (!v.failures_of(r).empty()) failed.push_back(name);
    else if (r.status == Status::deterministic || r.status == Status::nondeterministic) passed.push_back(name);
  }
  json configuration = json::array();
  for (const auto& c : data.catalog_digests) configuration.push_back({{"name", "catalogue"}, {"digest", {{"sha256", c}}}});
  for (const auto& s : data.stacks)
    configuration.push_back({{"name", "fingerprint " + s.label}, {"digest", {{"sha256", s.id}}}, {"content", s.fingerprint}});
  for (const auto& r : data.run_rows)
    configuration.push_back({{"name", "run " + r.id}, {"digest", {{"sha256", r.chain_root}}}, {"annotations", {{"chain_root", r.chain_root}, {"host", r.host}}}});
  return {{"_type", "https://in-toto.io/Statement/v1"},
          {"subject", json::array({{{"name", report_path}, {"digest", {{"sha256", file_sha256_or_fail(report_path)}}}},
                                   {{"name", store_path}, {"digest", {{"sha256", file_sha256_or_fail(store_path)}}}}})},
          {"predicateType", "https://in-toto.io/attestation/test-result/v0.1"},
          {"predicate",
           {{"result", v.held() ? "PASSED" : "FAILED"},
            {"configuration", configuration},
            {"passedTests", passed},
            {"failedTests", failed},
            {"warnedTests", json::array()}}}};
}

json make_envelope(const json& statement, const std::optional<std::string>& private_key_pem) {
  const std::string payload = json_text(statement);
  json sigs = json::array();
  if (private_key_pem) {
    Pkey key = read_key(*private_key_pem, true);
    const std::string pae = dsse_pae(kPayloadType, payload);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    std::size_t len = 0;
    std::string sig;
    // Ed25519 signs the message itself (no separate digest): one-shot EVP_DigestSign.
    if (EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key.get()) == 1 &&
        EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(pae.data()), pae.size()) == 1) {
      sig.resize(len);
      if (EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len, reinterpret_cast<const unsigned char*>(pae.data()),
                         pae.size()) != 1)
        sig.clear();
    }
    EVP_MD_CTX_free(ctx);
    if (sig.empty()) fail_environment("OpenSSL could not sign with " + *private_key_pem);
    sigs.push_back({{"keyid", key_id(key.get())}, {"sig", base64(sig)}});
  }
  return {{"payloadType", kPayloadType}, {"payload", base64(payload)}, {"signatures", sigs}};
}

AttestationCheck verify_attestation(const std::string& envelope_path, const std::string& public_key_pem, const std::string& base_dir) {
  AttestationCheck c;
  std::ifstream in(envelope_path);
  if (!in) fail_usage(envelope_path + ": cannot read the attestation");
  json env;
  try {
    env = json::parse(in);
  } catch (const json::parse_error& e) {
    fail_usage(envelope_path + ": not JSON: " + e.what());
  }
  if (!env.is_object() || env.value("payloadType", "") != kPayloadType || !env.contains("payload") || !env["payload"].is_string())
    fail_usage(envelope_path + ": not a DSSE envelope of an in-toto statement");
  const auto payload = unbase64(env["payload"].get<std::string>());
  if (!payload) fail_usage(envelope_path + ": the payload is not base64");
  Pkey key = read_key(public_key_pem, false);
  const std::string pae = dsse_pae(kPayloadType, *payload);
  for (const auto& s : env.value("signatures", json::array())) {
    const auto sig = unbase64(s.value("sig", ""));
    if (!sig) continue;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    const bool ok = EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key.get()) == 1 &&
                    EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig->data()), sig->size(),
                                     reinterpret_cast<const unsigned char*>(pae.data()), pae.size()) == 1;
    EVP_MD_CTX_free(ctx);
    c.signature_ok |= ok;
  }
  if (!c.signature_ok) c.problems.push_back("no signature verifies with " + public_key_pem);
  try {
    c.statement = json::parse(*payload);
  } catch (const json::parse_error&) {
    c.problems.push_back("the payload is not JSON");
    return c;
  }
  if (c.statement.value("_type", "") != "https://in-toto.io/Statement/v1")
    c.problems.push_back("the payload is not an in-toto Statement v1");
  for (const auto& s : c.statement.value("subject", json::array())) {
    std::string name = s.value("name", "");
    const std::string path = (!name.empty() && name[0] == '/') || base_dir.empty() ? name : base_dir + "/" + name;
    const std::string want = s.contains("digest") ? s["digest"].value("sha256", "") : "";
    const std::string got = sha256_file(path);
    if (got.empty()) c.problems.push_back("subject " + name + ": cannot read " + path);
    else if (got != want) c.problems.push_back("subject " + name + ": SHA-256 " + got + " does not match the attested " + want);
  }
  return c;
}

}  // namespace d9m
