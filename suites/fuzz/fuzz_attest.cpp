// libFuzzer target: `d9m verify --attestation` on any bytes. Each input is verified twice: as
// the envelope itself (against a key made at start-up, so its signature fails), and as the
// payload of an envelope correctly signed with that key, so that what lies past the signature
// check is reached too (the statement's shape, its subjects, reading them). Either must end in a
// result or in a usage error (exit 2): another error, a crash, a leak or a hang is a finding.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/attest/attest.h"
#include "harness/core/error.h"

namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path dir, key, pub;
  EVP_PKEY* pkey = nullptr;
};

// A folder with a key pair and two subjects a statement may name (the fuzzer names nothing else:
// see subjects_stay_inside).
const Scratch& scratch() {
  static const Scratch s = [] {
    Scratch s;
    s.dir = fs::temp_directory_path() / ("d9m_fuzz_attest_" + std::to_string(::getpid()));
    fs::create_directories(s.dir);
    s.key = s.dir / "key.pem";
    s.pub = s.dir / "pub.pem";
    s.pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
    std::FILE* k = std::fopen(s.key.c_str(), "w");
    PEM_write_PrivateKey(k, s.pkey, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(k);
    std::FILE* p = std::fopen(s.pub.c_str(), "w");
    PEM_write_PUBKEY(p, s.pkey);
    std::fclose(p);
    std::ofstream(s.dir / "report.json") << "{}";
    std::ofstream(s.dir / "store.sqlite") << "store";
    return s;
  }();
  return s;
}

std::string signed_envelope(const std::string& payload) {
  const std::string type = "application/vnd.in-toto+json";
  const std::string pae = d9m::dsse_pae(type, payload);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::size_t len = 64;
  std::string sig(len, '\0');
  EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, scratch().pkey);
  EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len, reinterpret_cast<const unsigned char*>(pae.data()), pae.size());
  EVP_MD_CTX_free(ctx);
  sig.resize(len);
  return nlohmann::json{{"payloadType", type}, {"payload", d9m::base64(payload)}, {"signatures", {{{"keyid", ""}, {"sig", d9m::base64(sig)}}}}}
      .dump();
}

// A signed statement is trusted to name files: the fuzzer lets it name only files in its folder
// (an absolute name could be anything on this machine, /proc/kcore included).
bool subjects_stay_inside(const std::string& payload) {
  const nlohmann::json st = nlohmann::json::parse(payload, nullptr, false);
  if (!st.is_object() || !st.contains("subject") || !st["subject"].is_array()) return true;
  for (const auto& s : st["subject"])
    if (s.is_object() && s.contains("name") && s["name"].is_string()) {
      const std::string name = s["name"].get<std::string>();
      if (name.find('/') != std::string::npos || name == ".." || name == ".") return false;
    }
  return true;
}

void verify(const std::string& envelope) {
  const fs::path file = scratch().dir / "envelope.json";
  std::ofstream(file, std::ios::binary | std::ios::trunc) << envelope;
  try {
    d9m::verify_attestation(file.string(), scratch().pub.string(), scratch().dir.string());
  } catch (const d9m::Error& e) {
    if (e.category() != d9m::ErrorCategory::usage) {
      std::fprintf(stderr, "not a usage error: %s\n", e.what());
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  verify(bytes);
  if (subjects_stay_inside(bytes)) verify(signed_envelope(bytes));
  return 0;
}
