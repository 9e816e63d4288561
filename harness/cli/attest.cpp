// d9m attest: an in-toto statement of a report and its store, in a DSSE envelope signed with
// Ed25519 (docs/ATTESTATION.md), made only for a single-file store that verifies and a report
// rendered from it as it is.
#include <memory>
#include <optional>

#include "harness/attest/attest.h"
#include "harness/cli/common.h"
#include "harness/cli/verbs.h"
#include "harness/core/json_text.h"
#include "harness/store/store.h"

namespace d9m::cli {
namespace {

struct AttestArgs {
  std::string db = "d9m.sqlite", report, key, output;
};

int attest(const AttestArgs& a) {
  check_output(a.output, {a.db, a.report});
  const Store store = Store::open(a.db, Store::Mode::read_only);
  const nlohmann::json statement = attest_store(store, a.report);
  write_output(a.output, json_text(make_envelope(statement, a.key.empty() ? std::nullopt : std::optional(a.key)), 2) + "\n");
  return 0;
}

}  // namespace

void add_attest(CLI::App& app, std::vector<Verb>& verbs) {
  auto o = std::make_shared<AttestArgs>();
  auto* c = app.add_subcommand("attest", "in-toto attestation of a report and its store (DSSE, Ed25519)");
  c->add_option("--db", o->db, "store file");
  c->add_option("--report", o->report, "the report file the statement covers")->required();
  c->add_option("--key", o->key, "Ed25519 private key (PEM) to sign with; unsigned without it");
  c->add_option("-o,--output", o->output, "attestation file (default: standard output)");
  verbs.push_back({c, [o] { return attest(*o); }});
}

}  // namespace d9m::cli
