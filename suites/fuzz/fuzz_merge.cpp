// libFuzzer target: `d9m merge` of any bytes as an input store, into a new output and into an
// existing store. A merge must succeed or fail with d9m::Error; a failed merge must leave the
// existing output byte for byte as it was (and no new output); a merge that succeeded must leave
// an output that verifies, to which merging the same input again adds nothing.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/core/error.h"
#include "harness/store/merge.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

namespace {

namespace fs = std::filesystem;

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  __builtin_trap();
}

const fs::path& dir() {
  static const fs::path d = fs::temp_directory_path() / ("d9m_fuzz_merge_" + std::to_string(::getpid()));
  return d;
}

// The existing output: a small real store with one complete run, made once.
const std::string& existing_output() {
  static const std::string bytes = [] {
    fs::create_directories(dir());
    const fs::path p = dir() / "seed.sqlite";
    {
      d9m::Store s = d9m::Store::open(p.string(), d9m::Store::Mode::read_write);
      d9m::RunInfo info{d9m::random_run_id(), d9m::utc_now(), "host", "[]", "[]", "catalog", 2, 1, "plan"};
      s.begin_run(d9m::fingerprint_from_json({{"fuzz", 1}}), info);
      d9m::CaseRecord c{"", "op", "cpu.serial", "cpu", "cfg", "cid", "{}", 1, "in", "float32", "[1]"};
      c.id = d9m::Store::case_id(c);
      s.put_case(info.id, c, {d9m::Status::deterministic, "", "deterministic", "design", "r", "", 2, 1, 10, 10},
                 {{0, "aa", 10, std::nullopt}, {1, "aa", 10, std::nullopt}});
      s.finish_run(info.id, "complete");
    }
    std::string b = contents(p);
    fs::remove(p);
    fs::remove(p.string() + "-runlease");
    return b;
  }();
  return bytes;
}

void clear() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir(), ec)) fs::remove(e.path(), ec);
}

void merge_into_new(const fs::path& in) {
  const fs::path out = dir() / "new.sqlite";
  try {
    d9m::merge_stores(out.string(), {in.string()});
  } catch (const d9m::Error&) {
    if (fs::exists(out)) finding("a failed merge left a new output");
    return;
  }
  {
    const d9m::Store s = d9m::Store::open(out.string(), d9m::Store::Mode::read_only);
    const auto v = d9m::verify_store(s);
    if (!v.problems.empty()) finding("a merged store does not verify: " + v.problems.front());
  }
  const d9m::MergeSummary again = d9m::merge_stores(out.string(), {in.string()});
  if (again.added != 0 || again.advanced != 0 || again.adopted != 0) finding("merging the same input twice added rows");
}

void merge_into_existing(const fs::path& in) {
  const fs::path out = dir() / "out.sqlite";
  write(out, existing_output());
  try {
    d9m::merge_stores(out.string(), {in.string()});
  } catch (const d9m::Error&) {
    if (contents(out) != existing_output()) finding("a failed merge changed its output");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  existing_output();
  clear();
  const fs::path in = dir() / "in.sqlite";
  write(in, std::string(reinterpret_cast<const char*>(data), size));
  merge_into_new(in);
  merge_into_existing(in);
  clear();
  return 0;
}
