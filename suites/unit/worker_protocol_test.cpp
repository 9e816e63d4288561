// The parent side of the worker protocol (exec/worker.h) against a worker that speaks it wrong:
// every malformed message fails the case with the reason, and never ends the run (an exception
// out of Worker::run would end it as an internal error).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/core/catalog.h"
#include "harness/core/error.h"
#include "harness/exec/worker.h"

namespace d9m {
namespace {

namespace fs = std::filesystem;

struct Reply {
  const char* name;
  const char* lines;  // what the fake worker prints after reading the request
};

void PrintTo(const Reply& r, std::ostream* os) { *os << r.name; }

class WorkerProtocolTest : public ::testing::TestWithParam<Reply> {};

TEST_P(WorkerProtocolTest, MalformedMessageFailsTheCaseNotTheRun) {
  const fs::path dir = fs::temp_directory_path() / ("d9m_worker_protocol_" + std::to_string(::getpid()) + "_" + GetParam().name);
  fs::create_directories(dir);
  const fs::path script = dir / "fake_worker.sh";
  {
    std::ofstream out(script);
    // `exec`: the worker's SIGKILL ends the sleep itself. A sleep left behind by a killed shell
    // would hold the test's stderr, and ctest would wait the 30 s for it.
    out << "#!/bin/sh\nread catalog\nread request\ncat <<'EOF'\n" << GetParam().lines << "\nEOF\nexec sleep 30\n";
  }
  fs::permissions(script, fs::perms::owner_all);

  const Catalog cat = default_catalog(Registry::global());
  const CatalogConfig& cc = cat.configs.front();
  const VariantDef* v = Registry::global().variants_of(cc.op->name).front();
  Worker worker(WorkerOptions{script.string(), &cat, 1, 20});
  const CaseRequest req{&cc, v, 2, std::nullopt};
  std::optional<CaseExecution> r;
  EXPECT_NO_THROW(r = worker.run(req, false, 0, nullptr, [] { return false; }));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, CaseExecution::Kind::error);
  EXPECT_NE(r->detail.find("malformed message"), std::string::npos) << r->detail;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Replies, WorkerProtocolTest,
    ::testing::Values(Reply{"not_json", "this is not JSON"}, Reply{"array", "[1, 2]"},
                      Reply{"inputs_number", R"({"inputs": 5})"}, Reply{"trial_string", R"({"trial": "one"})"},
                      Reply{"fatal_number", R"({"fatal": 7})"}, Reply{"unknown_field", R"({"hello": 1})"},
                      Reply{"result_bad_kind", R"({"result": {"kind": 3}})"},
                      Reply{"result_bad_values",
                            R"({"result": {"kind": "ran", "input_digest": "x", "detail": "", "claim": null, "trials": [], "device_lost": false, "values": "{\"outcome\": \"fine\"}"}})"},
                      Reply{"result_bad_trials",
                            R"({"result": {"kind": "ran", "input_digest": "x", "detail": "", "claim": null, "trials": [[1]], "device_lost": false}})"}),
    [](const ::testing::TestParamInfo<Reply>& p) { return std::string(p.param.name); });

// A worker's "fatal" keeps the category it was raised with (core/error.h), so the CLI exits
// with the code the same failure gives without isolation.
TEST(WorkerProtocol, FatalKeepsItsCategory) {
  const fs::path dir = fs::temp_directory_path() / ("d9m_worker_fatal_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path script = dir / "fake_worker.sh";
  std::ofstream(script) << "#!/bin/sh\nread catalog\nread request\necho '{\"fatal\": \"out: cannot write\", \"category\": \"environment\"}'\nexec sleep 30\n";
  fs::permissions(script, fs::perms::owner_all);
  const Catalog cat = default_catalog(Registry::global());
  const CatalogConfig& cc = cat.configs.front();
  Worker worker(WorkerOptions{script.string(), &cat, 1, 20});
  const CaseRequest req{&cc, Registry::global().variants_of(cc.op->name).front(), 2, std::nullopt};
  try {
    worker.run(req, false, 0, nullptr, [] { return false; });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::environment);
    EXPECT_EQ(e.code(), ExitCode::environment);
    EXPECT_STREQ(e.what(), "out: cannot write");
  }
  fs::remove_all(dir);
}

// `d9m run` starts its worker before it has its catalogue (cli/run.cpp). A worker that dies in
// that time (an operator, the OOM killer) never saw the case, so the case gets a fresh worker once
// instead of an ERROR; a worker started for the case that dies before it takes the catalogue
// fails the case as before.
TEST(WorkerProtocol, AWorkerThatDiedBeforeItsCatalogueIsReplacedOnceIfItWasStartedEarly) {
  const fs::path dir = fs::temp_directory_path() / ("d9m_worker_early_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path script = dir / "fake_worker.sh", marker = dir / "started_once";
  // The first process closes its input before it marks and exits: a write to it fails whatever
  // the timing and the size of the first message.
  std::ofstream(script) << "#!/bin/sh\nif [ ! -e '" << marker.string() << "' ]; then exec 0<&-; : > '" << marker.string()
                        << "'; exit 1; fi\nread catalog\nread request\n"
                           "echo '{\"result\": {\"kind\": \"ran\", \"input_digest\": \"in\", \"detail\": \"\", \"claim\": null,"
                           " \"trials\": [[\"d\", 1, null], [\"d\", 1, null]], \"device_lost\": false}}'\nexec cat > /dev/null\n";
  fs::permissions(script, fs::perms::owner_all);
  const Catalog cat = default_catalog(Registry::global());
  const CatalogConfig& cc = cat.configs.front();
  const CaseRequest req{&cc, Registry::global().variants_of(cc.op->name).front(), 2, std::nullopt};
  // Sent as text (a catalogue file), then by name (a built-in profile: a first message of 100 bytes).
  for (const std::string profile : {"", "quick"}) {
    fs::remove(marker);
    Worker worker(WorkerOptions{script.string(), nullptr, 1, 20, profile});
    worker.start();
    for (int i = 0; i < 500 && !fs::exists(marker); ++i) ::usleep(10000);
    ::usleep(300000);  // the first process has exited by now: its pipe is closed
    worker.use_catalog(cat, 20);
    const std::optional<CaseExecution> r = worker.run(req, false, 0, nullptr, [] { return false; });
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->kind, CaseExecution::Kind::ran) << profile << ": " << r->detail;
    EXPECT_EQ(r->input_digest, "in");
  }
  {
    fs::remove(marker);  // the next process exits again; this time the case started it
    Worker worker(WorkerOptions{script.string(), &cat, 1, 20});
    const std::optional<CaseExecution> r = worker.run(req, false, 0, nullptr, [] { return false; });
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->kind, CaseExecution::Kind::error);
    EXPECT_NE(r->detail.find("exited with status 1"), std::string::npos) << r->detail;
  }
  fs::remove_all(dir);
}

// A worker that dies while idle between two cases never saw the next case: a write to it fails.
// Killed from outside (an operator, the OOM killer: SIGKILL), it is replaced once and the case runs;
// one that ends by itself after answering a case may have been broken by that case, so the next
// case is an ERROR naming it rather than the crash passing unrecorded.
TEST(WorkerProtocol, AWorkerThatDiedIdleBetweenCasesIsReplacedOnceWhereKilledFromOutside) {
  const fs::path dir = fs::temp_directory_path() / ("d9m_worker_idle_" + std::to_string(::getpid()));
  const Catalog cat = default_catalog(Registry::global());
  const CatalogConfig& cc = cat.configs.front();
  const CaseRequest req{&cc, Registry::global().variants_of(cc.op->name).front(), 2, std::nullopt};
  for (const std::string end : {"kill -KILL $$", "exit 1"}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path script = dir / "fake_worker.sh", marker = dir / "answered_once";
    // Each process answers its case; the first then closes its input (a write to it fails whatever
    // the timing), marks and ends (`end`).
    std::ofstream(script) << "#!/bin/sh\nread catalog\nread request\n"
                             "echo '{\"result\": {\"kind\": \"ran\", \"input_digest\": \"in\", \"detail\": \"\", \"claim\": null,"
                             " \"trials\": [[\"d\", 1, null], [\"d\", 1, null]], \"device_lost\": false}}'\n"
                             "if [ ! -e '" << marker.string() << "' ]; then exec 0<&-; : > '" << marker.string() << "'; " << end
                          << "; fi\nexec cat > /dev/null\n";
    fs::permissions(script, fs::perms::owner_all);
    {
      Worker worker(WorkerOptions{script.string(), &cat, 1, 20});
      std::optional<CaseExecution> r = worker.run(req, false, 0, nullptr, [] { return false; });
      ASSERT_TRUE(r.has_value());
      ASSERT_EQ(r->kind, CaseExecution::Kind::ran) << r->detail;
      for (int i = 0; i < 500 && !fs::exists(marker); ++i) ::usleep(10000);
      ::usleep(300000);  // the first process has ended by now: its pipe is closed
      r = worker.run(req, false, 0, nullptr, [] { return false; });
      ASSERT_TRUE(r.has_value());
      if (end == "exit 1") {
        EXPECT_EQ(r->kind, CaseExecution::Kind::error);
        EXPECT_EQ(r->detail, "the worker process exited with status 1 after it answered " + cc.op->name + "/" + cc.name + "/" +
                                 req.variant->name + ", before it took this case (the crash may be that case's doing)");
      } else {
        EXPECT_EQ(r->kind, CaseExecution::Kind::ran) << r->detail;
        EXPECT_EQ(r->input_digest, "in");
      }
    }  // the worker ends before its folder goes
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace d9m
