// Batch invariance and autotuning choices, end to end: the catalogue field is validated, the
// sub-batches are cut along the op's axes, a variant whose split depends on M is caught as
// "Replay only" beside invariant ones, the evidence and choices are stored under the hash chain
// (an edit to either breaks verify) and reach the JSON report.
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "harness/core/batch_invariance.h"
#include "harness/core/catalog.h"
#include "harness/core/error.h"
#include "harness/exec/runner.h"
#include "harness/report/model.h"
#include "harness/report/report.h"
#include "harness/report/results.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"
#include "scratch_dir.h"

namespace d9m {
namespace {

std::string catalogue_error(const std::string& config) {
  try {
    parse_catalog(R"({"schema": "d9m.catalog/1", "configs": [)" + config + "]}", "cat.json", Registry::global());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << config;
  return "";
}

TEST(BatchInvariance, RowsAreCutAlongTheAxisWithTheOtherAxesWhole) {
  HostTensor t(TensorDesc{"t", DType::f32, {2, 3, 2}});
  for (int i = 0; i < 12; ++i) t.as<float>()[i] = static_cast<float>(i);
  const HostTensor mid = cut_rows(t, 1, 1, 2);  // [2,2,2]: rows 1..2 of each outer block
  ASSERT_EQ(mid.desc().shape, (Shape{2, 2, 2}));
  const float expected[] = {2, 3, 4, 5, 8, 9, 10, 11};
  EXPECT_EQ(std::memcmp(mid.data(), expected, sizeof expected), 0);
  const HostTensor last = cut_rows(t, 0, 1, 1);
  EXPECT_EQ(last.as<float>()[0], 6.0f);
  EXPECT_THROW(cut_rows(t, 1, 2, 2), std::logic_error);
  EXPECT_THROW(cut_rows(t, 3, 0, 1), std::logic_error);
}

TEST(BatchInvariance, SubBatchesAreTheFirstAndLastRowsAtEverySize) {
  const OpDef& mm = *Registry::global().find_op("matmul");
  Params p;
  p.set("m", std::int64_t{8});
  p.set("n", std::int64_t{4});
  p.set("k", std::int64_t{16});
  p.set("layout", std::string("TN"));
  const BatchPlan plan = plan_sub_batches(mm, p, DType::bf16, "default", {1, 3});
  EXPECT_EQ(plan.full, 8);
  ASSERT_EQ(plan.subs.size(), 4u);
  EXPECT_EQ(plan.subs[1].offset, 7);
  EXPECT_EQ(plan.subs[3].offset, 5);
  // Under TN, a is stored [K, M]: the batch runs along its second axis; b is shared.
  EXPECT_EQ(plan.subs[2].problem.inputs[0].shape, (Shape{16, 3}));
  EXPECT_EQ(plan.subs[2].problem.inputs[1].shape, (Shape{16, 4}));
  EXPECT_EQ(plan.subs[2].problem.output.dtype, DType::bf16);
}

TEST(BatchInvariance, TheCatalogueFieldIsValidated) {
  const std::string mm = R"({"op": "matmul", "name": "x", "params": {"m": 8, "n": 4, "k": 16}, "batch_invariance": )";
  EXPECT_NE(catalogue_error(R"({"op": "scatter_add", "name": "x", "params": {"rows": 4, "depth": 2, "updates": 8},
                               "batch_invariance": {"sizes": [1]}})")
                .find("configs[0].batch_invariance: scatter_add has no batch dimension"),
            std::string::npos);
  EXPECT_NE(catalogue_error(mm + R"({"sizes": [8]}})").find("configs[0].batch_invariance.sizes[0]: expected a non-empty array of "
                                                               "distinct sub-batch sizes in [1, 7] (m is 8), got 8"),
            std::string::npos);
  EXPECT_NE(catalogue_error(mm + R"({"sizes": [2, 2]}})").find("sizes[1]"), std::string::npos);
  EXPECT_NE(catalogue_error(mm + R"({"sizes": [0]}})").find("sizes[0]"), std::string::npos);
  EXPECT_NE(catalogue_error(mm + R"({"sizes": []}})").find("batch_invariance.sizes"), std::string::npos);
  EXPECT_NE(catalogue_error(mm + R"({"sizes": ["1"]}})").find("sizes[0]"), std::string::npos);
  EXPECT_NE(catalogue_error(mm + R"({"sizes": [1], "order": true}})").find("batch_invariance.order: unknown field"),
            std::string::npos);
  EXPECT_NE(catalogue_error(mm + R"([1]})").find("batch_invariance"), std::string::npos);
  // A batch of 1 has no sub-batch (the message gave the empty range "[1, 0]").
  EXPECT_NE(catalogue_error(R"({"op": "matmul", "name": "x", "params": {"m": 1, "n": 4, "k": 16}, "batch_invariance": {"sizes": [1]}})")
                .find("configs[0].batch_invariance: a batch of 1 (m) has no smaller sub-batch to compare with"),
            std::string::npos);
}

TEST(BatchInvariance, StatusIsInCuDnnsWords) {
  InvarianceEvidence e;
  e.subs = {{1, 0, 4, 0, ""}, {1, 7, 4, 0, ""}};
  EXPECT_EQ(invariance_status(true, e), "Supported");
  EXPECT_EQ(invariance_status(false, e), "Not guaranteed");
  e.subs.push_back({3, 0, 12, 2, ""});
  EXPECT_EQ(invariance_status(true, e), "Replay only");
  EXPECT_EQ(e.differing(), (std::vector<std::int64_t>{0, 2}));
  InvarianceEvidence none;
  none.subs = {{1, 0, 4, 0, "UNSUPPORTED: no algorithm"}};
  EXPECT_EQ(invariance_status(true, none), "Unverified");
  EXPECT_EQ(InvarianceEvidence::from_json_text(e.to_json_text()).to_json_text(), e.to_json_text());
  EXPECT_THROW(InvarianceEvidence::from_json_text("{\"param\": 1}"), std::invalid_argument);
}

// A variant that claims batch invariance and is repeatable but whose sub-batches differ breaks
// its claim: the verdict fails with the kind not_invariant; without the claim it is Replay only.
TEST(BatchInvariance, ABrokenInvarianceClaimFailsTheVerdict) {
  ReportData d;
  d.stacks.push_back(StackInfo{"s", "S1", nlohmann::json::object(), 1, {}});
  CaseResult r;
  r.stack = "s";
  r.op = "matmul";
  r.variant = "cuda.ordered";
  r.config = "bi";
  r.claim_determinism = "deterministic";
  r.status = Status::deterministic;
  r.trials = 10;
  r.distinct = 1;
  r.invariance = InvarianceEvidence{"m", 16, {{1, 0, 16, 0, ""}, {1, 15, 16, 3, ""}}, std::nullopt};
  d.results.push_back(r);
  EXPECT_TRUE(verdict_of(d).held()) << "no claim, no failure";
  d.results[0].invariance->claim = Claim{Determinism::deterministic, ClaimSource::design, "fixed chunks"};
  const Verdict v = verdict_of(d);
  ASSERT_EQ(v.failures.size(), 1u);
  EXPECT_EQ(id_of(v.failures[0].kind), "not_invariant");
  EXPECT_NE(v.failures[0].text.find("sub-batches of m = 1"), std::string::npos) << v.failures[0].text;
  d.results[0].invariance->subs[1].differing = 0;
  EXPECT_TRUE(verdict_of(d).held());
}

class BatchInvarianceRunTest : public test::ScratchDirTest {
 protected:
  BatchInvarianceRunTest() : ScratchDirTest("d9m-batch-") {}

  // matmul with the split-K of cpu.splitk_by_shape depending on M (16 rows: 16 chunks of 128;
  // 1 row: 64 chunks of 32), and cpu.autotune choosing afresh each trial.
  Catalog catalogue() const {
    return parse_catalog(R"({"schema": "d9m.catalog/1", "configs": [
        {"op": "matmul", "name": "bi", "params": {"m": 16, "n": 8, "k": 2048},
         "variants": ["cpu.serial", "cpu.ordered", "cpu.splitk_by_shape", "cpu.autotune"],
         "batch_invariance": {"sizes": [1, 5]}}]})",
                         "bi.json", Registry::global());
  }

  const CaseResult& result(const ReportData& d, const std::string& variant) {
    for (const auto& r : d.results)
      if (r.variant == variant) return r;
    throw std::logic_error("no result for " + variant);
  }
};

TEST_F(BatchInvarianceRunTest, AnMDependentSplitIsReplayOnlyAndTheEvidenceIsChainedAndReported) {
  const Catalog cat = catalogue();
  RunOptions opt;
  opt.trials = 6;
  opt.canaries = false;
  const std::string p = path("bi.sqlite");
  {
    Store s = Store::open(p, Store::Mode::read_write);
    run_audit(cat, plan_cases(cat, Registry::global(), Selection{}), s, opt);
  }
  Store s = Store::open(p, Store::Mode::read_write);
  EXPECT_TRUE(verify_store(s).problems.empty());
  const ReportData d = load_report_data(s);
  const CaseResult& serial = result(d, "cpu.serial");
  ASSERT_TRUE(serial.invariance.has_value());
  EXPECT_EQ(serial.invariance->param, "m");
  EXPECT_EQ(serial.invariance->subs.size(), 4u);
  EXPECT_EQ(serial.invariance_status(), "Supported");
  EXPECT_EQ(result(d, "cpu.ordered").invariance_status(), "Supported");
  const CaseResult& by_shape = result(d, "cpu.splitk_by_shape");
  EXPECT_EQ(by_shape.status, Status::deterministic);
  EXPECT_EQ(by_shape.invariance_status(), "Replay only");
  ASSERT_TRUE(by_shape.invariance->claim.has_value());
  EXPECT_EQ(by_shape.invariance->claim->determinism, Determinism::nondeterministic);
  EXPECT_TRUE(serial.invariance->claimed_invariant());
  EXPECT_GT(by_shape.invariance->differing().at(0), 0);

  // Every trial of the autotuner recorded its choice, one of the two candidates.
  const CaseResult& tuned = result(d, "cpu.autotune");
  std::int64_t chosen = 0;
  for (const auto& c : tuned.choices) {
    EXPECT_TRUE(c.name == "cpu.ordered" || c.name == "cpu.splitk_by_shape") << c.name;
    chosen += c.trials;
  }
  EXPECT_EQ(chosen, 6);

  const StatusModel m = build_status_model(d);
  EXPECT_TRUE(m.any_invariance);
  const auto json = nlohmann::json::parse(render_json(d, m));
  bool seen = false;
  for (const auto& r : json.at("results"))
    if (r.at("variant") == "cpu.splitk_by_shape") {
      seen = true;
      EXPECT_EQ(r.at("invariance").at("status"), "Replay only");
      EXPECT_EQ(r.at("invariance").at("sizes"), nlohmann::json::array({1, 5}));
      EXPECT_EQ(r.at("invariance").at("differing").size(), 2u);
    }
  EXPECT_TRUE(seen);
  const std::string md = render_markdown(d, m, false);
  EXPECT_NE(md.find("| S1 batch |"), std::string::npos);
  EXPECT_NE(md.find("## Batch invariance"), std::string::npos);
  EXPECT_NE(md.find("## Autotuning"), std::string::npos);

  // The evidence and the choices are under the hash chain: an edit to either breaks verify.
  sql::exec(s.db(), "UPDATE case_runs SET invariance = replace(invariance, '\"differing\":', '\"differing\":1') WHERE invariance != ''"
                    " AND case_id IN (SELECT id FROM cases WHERE variant = 'cpu.serial')");
  EXPECT_FALSE(verify_store(s).problems.empty()) << "an edited invariance went unnoticed";
}

TEST_F(BatchInvarianceRunTest, AnEditedChoiceBreaksTheChain) {
  const Catalog cat = catalogue();
  RunOptions opt;
  opt.trials = 3;
  opt.canaries = false;
  Store s = Store::open(path("c.sqlite"), Store::Mode::read_write);
  Selection only_tuned;
  only_tuned.variant_globs = {"cpu.autotune"};
  run_audit(cat, plan_cases(cat, Registry::global(), only_tuned), s, opt);
  ASSERT_TRUE(verify_store(s).problems.empty());
  sql::Statement n(s.db(), "SELECT count(*) FROM trials WHERE choice != ''");
  ASSERT_TRUE(n.step());
  EXPECT_EQ(n.integer(0), 3);
  sql::exec(s.db(), "UPDATE trials SET choice = 'cudnn.algo7' WHERE trial = 1");
  EXPECT_FALSE(verify_store(s).problems.empty()) << "an edited choice went unnoticed";
}

}  // namespace
}  // namespace d9m
