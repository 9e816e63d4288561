// libFuzzer target: the store opener and everything that reads a store, then the writer's open
// (schema migration after a backup, dead runs marked interrupted). Any file must either be
// refused with d9m::Error (environment) or opened, verified and reported without a crash.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <cstdio>
#include <string>

#include "harness/core/error.h"
#include "harness/report/report.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/d9m_fuzz_store_" + std::to_string(::getpid()) + ".sqlite";
  for (const char* s : {"", "-wal", "-shm"}) std::remove((path + s).c_str());
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    const d9m::Store store = d9m::Store::open(path, d9m::Store::Mode::read_only);
    d9m::verify_store(store);
    const d9m::ReportData report = d9m::load_report_data(store);
    const d9m::StatusModel model = d9m::build_status_model(report);
    d9m::render_markdown(report, model);
    d9m::render_json(report, model);
    d9m::render_html(report, model);
    d9m::render_junit(report, model);
    d9m::render_csv(report, model);
  } catch (const d9m::Error&) {
  }
  try {
    const d9m::Store store = d9m::Store::open(path, d9m::Store::Mode::read_write);
    d9m::verify_store(store);
  } catch (const d9m::Error&) {
  }
  std::error_code ec;  // the migration's backups (and any partial one), the lease file
  for (const auto& e : std::filesystem::directory_iterator("/tmp", ec))
    if (e.path().string().rfind(path + ".schema", 0) == 0 || e.path().string() == path + "-runlease")
      std::filesystem::remove(e.path(), ec);
  return 0;
}
