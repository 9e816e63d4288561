// d9m verify: the integrity of a store (SQLite's checks, content-addressed keys, every run's
// hash chain, the manifest), or of an attestation (its signature, then its subjects). Exit 1 on
// any fault; a malformed attestation is bad input (exit 2).
#include <cstdio>
#include <memory>

#include "harness/attest/attest.h"
#include "harness/cli/verbs.h"
#include "harness/core/error.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

namespace d9m::cli {
namespace {

struct VerifyArgs {
  std::string db = "d9m.sqlite", attestation, pubkey;
};

int verify_attestation_file(const VerifyArgs& a) {
  if (a.pubkey.empty()) fail_usage("--attestation needs --pubkey");
  const AttestationCheck c = verify_attestation(a.attestation, a.pubkey, "");
  for (const auto& p : c.problems) std::printf("FAULT: %s\n", p.c_str());
  std::printf("%s: %s (result %s)\n", a.attestation.c_str(), c.problems.empty() ? "OK, signature and subjects verify" : "INVALID",
              c.result.c_str());
  return c.problems.empty() ? 0 : static_cast<int>(ExitCode::claim_broken);
}

int verify(const VerifyArgs& a) {
  if (!a.attestation.empty()) return verify_attestation_file(a);
  const Store store = Store::open(a.db, Store::Mode::read_only);
  const VerifyReport v = verify_store(store);
  for (const auto& n : v.notes) std::printf("note: %s\n", n.c_str());
  for (const auto& r : v.chain_roots) std::printf("chain root: %s\n", r.c_str());
  for (const auto& h : v.evidence.manifest_heads) std::printf("manifest head: %s\n", h.c_str());
  for (const auto& p : v.problems) std::printf("FAULT: %s\n", p.c_str());
  if (v.problems.empty()) std::printf("evidence sha256: %s\n", v.evidence.digest.c_str());
  std::printf("%s: %s (%lld runs, %lld cases, %lld trials checked)\n", a.db.c_str(), v.problems.empty() ? "OK" : "FAULTS FOUND",
              static_cast<long long>(v.runs), static_cast<long long>(v.cases), static_cast<long long>(v.trials));
  return v.problems.empty() ? 0 : static_cast<int>(ExitCode::claim_broken);
}

}  // namespace

void add_verify(CLI::App& app, std::vector<Verb>& verbs) {
  auto o = std::make_shared<VerifyArgs>();
  auto* c = app.add_subcommand("verify", "integrity and consistency of a store, or an attestation");
  c->add_option("--db", o->db, "store file");
  c->add_option("--attestation", o->attestation, "check this attestation instead of a store");
  c->add_option("--pubkey", o->pubkey, "Ed25519 public key (PEM) for --attestation");
  verbs.push_back({c, [o] { return verify(*o); }});
}

}  // namespace d9m::cli
