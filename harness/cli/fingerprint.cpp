// d9m fingerprint: the stack this machine would record a run under.
#include <iostream>
#include <memory>

#include "harness/cli/verbs.h"
#include "harness/core/fingerprint.h"
#include "harness/core/json_text.h"

namespace d9m::cli {
namespace {

int fingerprint(bool as_json) {
  const GpuProbe gpus = probe_gpus();
  const Fingerprint fp = collect_fingerprint(gpus);
  if (as_json) {
    std::cout << json_text(nlohmann::json({{"id", fp.id}, {"fingerprint", fp.json}, {"gpu_status", gpus.status},
                                           {"host", host_name()}, {"gpu_uuids", gpus.uuids}}), 2)
              << "\n";
  } else {
    std::cout << "fingerprint " << fp.id << "\n" << json_text(fp.json, 2) << "\n";
    std::cout << "gpu: " << gpus.status << "\n";
  }
  return 0;
}

}  // namespace

void add_fingerprint(CLI::App& app, std::vector<Verb>& verbs) {
  auto as_json = std::make_shared<bool>(false);
  auto* c = app.add_subcommand("fingerprint", "the stack fingerprint of this machine");
  c->add_flag("--json", *as_json, "machine-readable");
  verbs.push_back({c, [as_json] { return fingerprint(*as_json); }});
}

}  // namespace d9m::cli
