// Pipelines and traces (issue 14): the catalogue's pipeline entries are checked edge by edge
// before anything runs, a run stores a chained trace row per (trial, step, op), `verify` catches
// an edited trace, merge carries it, and `trace diff` names the op where two trials first diverge.
#include <gtest/gtest.h>

#include <set>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/inputs.h"
#include "harness/exec/executor.h"
#include "harness/exec/pipeline_exec.h"
#include "harness/exec/runner.h"
#include "harness/report/results.h"
#include "harness/report/trace_diff.h"
#include "harness/store/merge.h"
#include "harness/store/sqlite.h"
#include "harness/store/verify.h"
#include "suites/unit/scratch_dir.h"

namespace d9m {
namespace {

// A small "training step" of existing ops: the bias gradient of x (bias_add_grad), the bias
// moved by it (bias_add of b, seen as [1,1,1,C], and the gradient), and x moved by the new bias
// (bias_add of x and b). x and b are state, both updated, so every step's inputs depend on the
// last one's outputs. `grad_variant` is bias_add_grad's variant.
std::string bias_pipeline(const std::string& grad_variant, int steps = 3, const std::string& extra = "") {
  std::string text = R"({"schema": "d9m.catalog/1", "pipelines": [{"name": "bias_fit", "steps": )";
  text += std::to_string(steps);
  text += R"(, "seed": 5, "ops": [
        {"name": "grad", "op": "bias_add_grad", "params": {"n": 32, "h": 32, "w": 32, "c": 3}, "inputs": ["x"], "output": "g",
         "variant": ")";
  text += grad_variant;
  text += R"("},
        {"name": "move_b", "op": "bias_add", "params": {"n": 1, "h": 1, "w": 1, "c": 3}, "inputs": ["b", "g"], "output": "b",
         "variant": "cpu.serial"},
        {"name": "move_x", "op": "bias_add", "params": {"n": 32, "h": 32, "w": 32, "c": 3}, "inputs": ["x", "b"], "output": "x",
         "variant": "cpu.serial"}])";
  text += extra;
  text += "}]}";
  return text;
}

std::string usage_error(const std::string& text) {
  try {
    parse_catalog(text, "p.json", Registry::global());
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::usage);
    return e.what();
  }
  return "(no error)";
}

TEST(PipelineCatalog, ParsesStateDataFlowAndSettings) {
  const Catalog cat = parse_catalog(bias_pipeline("cpu.ordered", 3, R"(, "settings": {"deterministic": {}, "racing": {"grad": "cpu.atomic"}})"),
                                    "p.json", Registry::global());
  ASSERT_EQ(cat.pipelines.size(), 1u);
  EXPECT_TRUE(cat.configs.empty());
  const CatalogPipeline& pl = cat.pipelines[0];
  ASSERT_EQ(pl.state.size(), 2u);
  EXPECT_EQ(pl.state[0].name, "x");
  EXPECT_EQ(pl.state[0].filled_by, 0u);
  EXPECT_EQ(pl.state[1].name, "b");
  EXPECT_EQ(pl.state[1].filled_by, 1u);
  EXPECT_TRUE(pl.state[0].updated && pl.state[1].updated);
  ASSERT_EQ(pl.settings.size(), 2u);
  EXPECT_EQ(pl.settings[0].variants[0]->name, "cpu.ordered");
  EXPECT_EQ(pl.settings[1].variants[0]->name, "cpu.atomic");
  EXPECT_EQ(pipeline_claim(pl, pl.settings[0]).determinism, Determinism::deterministic);
  EXPECT_EQ(pipeline_claim(pl, pl.settings[1]).determinism, Determinism::nondeterministic);
  EXPECT_EQ(pipeline_role(pl.settings[1]), Role::atomic);
  // The definition (hence the case's config id) leaves the variants out: settings share it.
  EXPECT_EQ(pipeline_case_record(pl, pl.settings[0], "i").config_id, pipeline_case_record(pl, pl.settings[1], "i").config_id);
  EXPECT_NE(pipeline_case_record(pl, pl.settings[0], "i").id, pipeline_case_record(pl, pl.settings[1], "i").id);
}

// `d9m run --steps N`: the pipeline at N steps is the one written with N, identity included.
TEST(PipelineCatalog, AnotherStepCountIsThePipelineWrittenWithIt) {
  Catalog cat = parse_catalog(bias_pipeline("cpu.ordered", 3), "p.json", Registry::global());
  const Catalog seven = parse_catalog(bias_pipeline("cpu.ordered", 7), "p.json", Registry::global());
  CatalogPipeline& pl = cat.pipelines.at(0);
  const std::string three_id = pl.config_id;
  pl.set_steps(7);
  EXPECT_EQ(pl.steps, 7);
  EXPECT_EQ(pl.definition, seven.pipelines.at(0).definition);
  EXPECT_EQ(pl.config_id, seven.pipelines.at(0).config_id);
  EXPECT_NE(pl.config_id, three_id);
  EXPECT_EQ(pipeline_case_record(pl, pl.settings.at(0), "i").id, pipeline_case_record(seven.pipelines.at(0), seven.pipelines.at(0).settings.at(0), "i").id);
}

TEST(PipelineCatalog, RefusesBadPipelinesNamingTheField) {
  // An edge whose element count does not match: move_b made with 4 channels reads the 3 of g.
  const std::string small = R"("n": 1, "h": 1, "w": 1, "c": 3)";
  std::string bad = bias_pipeline("cpu.ordered");
  bad.replace(bad.find(small), small.size(), R"("n": 1, "h": 1, "w": 1, "c": 4)");
  EXPECT_NE(usage_error(bad).find("pipelines[0].ops[1].inputs[1]: \"g\" is f32 [3] (3 elements), but bias_add's input bias is f32 "
                                  "[4] (4 elements)"),
            std::string::npos)
      << usage_error(bad);
  // A variant the op does not have, and a setting naming no op.
  EXPECT_NE(usage_error(bias_pipeline("cpu.fast")).find("pipelines[0].ops[0].variant: \"cpu.fast\" is no variant of bias_add_grad"),
            std::string::npos);
  EXPECT_NE(usage_error(bias_pipeline("cpu.ordered", 3, R"(, "settings": {"s": {"nope": "cpu.atomic"}})"))
                .find("pipelines[0].settings.s.nope: no op of pipeline bias_fit is named \"nope\""),
            std::string::npos);
  EXPECT_NE(usage_error(bias_pipeline("cpu.ordered", 0)).find("pipelines[0].steps: expected an integer in [1, 100000]"), std::string::npos);
  EXPECT_NE(usage_error(bias_pipeline("cpu.ordered", 3, R"(, "stepz": 2)")).find("pipelines[0].stepz: unknown field"), std::string::npos);
  // A scratch tensor written twice in one step.
  std::string twice = bias_pipeline("cpu.ordered");
  const std::string writes_b = R"("output": "b")";
  twice.replace(twice.find(writes_b), writes_b.size(), R"("output": "g")");
  EXPECT_NE(usage_error(twice).find("\"g\" is already written by grad"), std::string::npos) << usage_error(twice);
  // Nothing updates state: there is no result to compare.
  EXPECT_NE(usage_error(R"({"schema": "d9m.catalog/1", "pipelines": [{"name": "p", "ops": [
      {"name": "g", "op": "bias_add_grad", "params": {"n": 2, "h": 2, "w": 2, "c": 3}, "inputs": ["x"], "output": "y",
       "variant": "cpu.serial"}]}]})")
                .find("no op writes state"),
            std::string::npos);
}

// Integer tensors are indices: one made for 16 rows must not reach an op of 4 (it would index out of
// bounds), and no op may write one (its values would not be checked).
TEST(PipelineCatalog, IntegerTensorsAreReadOnlyByOpsOfTheParametersThatMadeThem) {
  const std::string text = R"({"schema": "d9m.catalog/1", "pipelines": [{"name": "p", "ops": [
      {"name": "big", "op": "scatter_add", "params": {"rows": 16, "depth": 2, "updates": 8}, "inputs": ["ref", "idx", "upd"],
       "output": "ref", "variant": "cpu.serial"},
      {"name": "small", "op": "scatter_add", "params": {"rows": 4, "depth": 2, "updates": 8}, "inputs": ["r2", "idx", "upd"],
       "output": "r2", "variant": "cpu.serial"}]}]})";
  EXPECT_NE(usage_error(text).find("pipelines[0].ops[1].inputs[1]: \"idx\" is an integer tensor made by the fill of big"),
            std::string::npos)
      << usage_error(text);
}

// A setting that needs GPU variants is not in a CPU-only build (the catalogue is shared); in a CUDA
// build it is, and a typo of a variant the build could have is still an error.
TEST(PipelineCatalog, GpuSettingsAreLeftOutOfABuildWithoutThem) {
  const Catalog cat = parse_catalog(bias_pipeline("cpu.ordered", 2, R"(, "settings": {"cpu": {}, "gpu": {"grad": "cuda.ordered"}})"),
                                    "p.json", Registry::global());
  const CatalogPipeline& pl = cat.pipelines.at(0);
  if (Registry::global().find_variant("bias_add_grad", "cuda.ordered")) {
    EXPECT_EQ(pl.settings.size(), 2u);
    EXPECT_TRUE(pl.unavailable.empty());
    EXPECT_NE(usage_error(bias_pipeline("cpu.ordered", 2, R"(, "settings": {"gpu": {"grad": "cuda.ordred"}})"))
                  .find("\"cuda.ordred\" is no variant of bias_add_grad"),
              std::string::npos);
  } else {
    ASSERT_EQ(pl.settings.size(), 1u);
    EXPECT_EQ(pl.settings[0].name, "cpu");
    EXPECT_EQ(pl.unavailable, std::vector<std::string>{"gpu"});
  }
}

class PipelineRunTest : public test::ScratchDirTest {
 protected:
  PipelineRunTest() : ScratchDirTest("pipeline") {}

  RunSummary run(const Catalog& cat, const std::string& db, std::int64_t trials, unsigned threads = 2) {
    RunOptions opt;
    opt.trials = trials;
    opt.threads = threads;
    opt.canaries = false;
    Store s = Store::open(db, Store::Mode::read_write);
    return run_audit(cat, plan_cases(cat, Registry::global(), Selection{}), s, opt, plan_pipelines(cat, Selection{}));
  }

  static std::int64_t count(const std::string& db, const std::string& sql) {
    Store s = Store::open(db, Store::Mode::read_only);
    sql::Statement st(s.db(), sql);
    return st.step() ? st.integer(0) : -1;
  }
};

TEST_F(PipelineRunTest, AnOrderedPipelineIsDeterministicWithAChainedTraceRowPerTrialStepAndOp) {
  const Catalog cat = parse_catalog(bias_pipeline("cpu.ordered"), "p.json", Registry::global());
  const std::string db = path("p.sqlite");
  const RunSummary r = run(cat, db, 3);
  EXPECT_EQ(r.cases, 1);
  EXPECT_EQ(r.by_status[static_cast<int>(Status::deterministic)], 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM trace"), 3 * 3 * 3);
  EXPECT_EQ(count(db, "SELECT count(DISTINCT digest) FROM trace WHERE step = 2 AND position = 2"), 1);
  // Each step reads what the last one wrote: step 1's grad input is step 0's move_x output.
  {
    Store s = Store::open(db, Store::Mode::read_only);
    sql::Statement a(s.db(), "SELECT inputs FROM trace WHERE trial = 0 AND step = 1 AND position = 0");
    sql::Statement b(s.db(), "SELECT digest FROM trace WHERE trial = 0 AND step = 0 AND position = 2");
    ASSERT_TRUE(a.step() && b.step());
    EXPECT_EQ(a.text(0), "[\"" + b.text(0) + "\"]");
    EXPECT_TRUE(verify_store(s).problems.empty());
  }
  const auto diffs = diff_traces(parse_trace_operand(db), std::nullopt, "*", "*");
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_FALSE(diffs[0].source.has_value());
  EXPECT_EQ(diffs[0].by_step.size(), 3u);
  EXPECT_EQ(diffs[0].ops_per_step, 3);
}

// Each op of the first step is checked against its serial reference on the inputs the data flow
// gave it; an op whose values are wrong makes the pipeline's check differ, naming the op.
TEST_F(PipelineRunTest, TheFirstStepsOpsAreCheckedAgainstTheirReferencesAndAWrongOneIsNamed) {
  const Catalog cat = parse_catalog(bias_pipeline("cpu.ordered"), "p.json", Registry::global());
  const std::string db = path("values.sqlite");
  run(cat, db, 2);
  {
    Store s = Store::open(db, Store::Mode::read_only);
    const auto results = load_report_data(s).results;
    ASSERT_EQ(results.size(), 1u);
    ASSERT_TRUE(results[0].values.has_value()) << "the pipeline's ops were checked";
    EXPECT_EQ(results[0].values->outcome, ValueCheck::Outcome::agrees) << results[0].values->reason;
    EXPECT_EQ(results[0].values->reference, "cpu.serial, op grad") << "bias_add runs as cpu.serial: only grad is checked";
  }
  // The same pipeline with its gradient wrong by a constant, repeatably: deterministic, and wrong.
  const CatalogPipeline& pl = cat.pipelines.at(0);
  const VariantDef* ordered = Registry::global().find_variant("bias_add_grad", "cpu.ordered");
  const VariantDef off_by_one{.op = "bias_add_grad", .name = "test.off_by_one", .backend = Backend::cpu, .role = Role::ordered,
                              .claim = {Determinism::deterministic, ClaimSource::design, "test"},
                              .run = [ordered](const KernelArgs& a) {
                                ordered->run(a);
                                a.out<float>()[0] += 1.0f;
                              }};
  PipelineSetting wrong = pl.settings.at(0);
  wrong.variants.at(0) = &off_by_one;
  PipelineHost host(2, 0);
  const PipelineExecution e = host.run(pl, wrong, 2, nullptr);
  ASSERT_EQ(e.result.kind, CaseExecution::Kind::ran) << e.result.detail;
  ASSERT_TRUE(e.result.values.has_value());
  EXPECT_EQ(e.result.values->outcome, ValueCheck::Outcome::differs);
  EXPECT_EQ(e.result.values->reference, "cpu.serial, op grad");
  EXPECT_EQ(e.result.values->beyond, 1);
}

// A framework autotunes once per process and shape, then runs the winner on every later call: in
// a pipeline's trial (a fresh training run) an autotuning op searches at its first step and
// replays its choice in the later ones; the next trial searches afresh, and each trial's choice
// is stored beside its digest.
TEST_F(PipelineRunTest, AnAutotuningOpSearchesOnceATrialAndRunsItsChoiceInTheLaterSteps) {
  const Catalog cat = parse_catalog(bias_pipeline("cpu.ordered", 3), "p.json", Registry::global());
  const CatalogPipeline& pl = cat.pipelines.at(0);
  // A tuner whose searches alternate between two orders with different bits.
  int searches = 0;
  std::vector<std::string> replays;
  bool honour_replay = true;
  const VariantDef tuner{.op = "bias_add_grad", .name = "test.autotune", .backend = Backend::cpu, .role = Role::autotune,
                         .claim = {Determinism::nondeterministic, ClaimSource::design, "test"},
                         .run = [&](const KernelArgs& a) {
                           std::string pick;
                           if (a.replay && honour_replay) {
                             replays.push_back(*a.replay);
                             pick = *a.replay;
                           } else {
                             pick = searches++ % 2 == 0 ? "cpu.ordered" : "cpu.serial";
                           }
                           Registry::global().find_variant("bias_add_grad", pick)->run(a);
                           a.chose(pick);
                         }};
  PipelineSetting tuned = pl.settings.at(0);
  tuned.variants.at(0) = &tuner;
  PipelineHost host(2, 0);
  const PipelineExecution e = host.run(pl, tuned, 3, nullptr);
  ASSERT_EQ(e.result.kind, CaseExecution::Kind::ran) << e.result.detail;
  EXPECT_EQ(searches, 3) << "one search a trial, not one a step";
  EXPECT_EQ(replays, (std::vector<std::string>{"cpu.ordered", "cpu.ordered", "cpu.serial", "cpu.serial", "cpu.ordered", "cpu.ordered"}));
  ASSERT_EQ(e.result.trials.size(), 3u);
  EXPECT_EQ(e.result.trials[0].choice, "grad: cpu.ordered");
  EXPECT_EQ(e.result.trials[1].choice, "grad: cpu.serial");
  EXPECT_EQ(e.result.trials[2].choice, "grad: cpu.ordered");
  EXPECT_EQ(e.result.trials[0].digest, e.result.trials[2].digest) << "the same choice all through: the same trajectory";
  EXPECT_NE(e.result.trials[0].digest, e.result.trials[1].digest) << "another order's bits in every step";
  // Every step of trial 1 ran the same choice: its grad outputs are those of a trial that chose
  // cpu.serial everywhere, so none equals trial 0's at the same step.
  for (const auto& row : e.trace)
    if (row.trial == 1 && row.position == 0) {
      EXPECT_TRUE(row.diff.has_value()) << "step " << row.step;
    }

  // Stored, the trials keep their choices, and `trace diff` of trial 0 against trial 1 names them:
  // the op that diverged follows the choice, not a race.
  const std::string db = path("tuned.sqlite");
  {
    Store st = Store::open(db, Store::Mode::read_write);
    const std::string run = st.begin_run(fingerprint_from_json({{"stack", 1}}),
                                         RunInfo{random_run_id(), utc_now(), "host", "[]", "[]", "cat", 3, 2});
    std::vector<TrialRecord> trials;
    for (std::size_t t = 0; t < e.result.trials.size(); ++t) {
      const auto& r = e.result.trials[t];
      trials.push_back({static_cast<std::int64_t>(t), r.digest, r.elapsed_ns, r.diff, r.choice});
    }
    CaseRunRecord cr{Status::nondeterministic, "", "nondeterministic", "design", "test", "", 3, 2, 1, 1, "autotune"};
    st.put_case(run, pipeline_case_record(pl, tuned, e.result.input_digest), cr, trials, e.trace);
    st.finish_run(run, "complete");
  }
  const auto diffs = diff_traces(parse_trace_operand(db), std::nullopt, "*", "*");
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_EQ(diffs[0].a.choice, "grad: cpu.ordered");
  EXPECT_EQ(diffs[0].b.choice, "grad: cpu.serial");
  ASSERT_TRUE(diffs[0].source.has_value());
  EXPECT_EQ(diffs[0].source->row.name, "grad");
  const std::string md = render_trace_diff_markdown(diffs);
  EXPECT_NE(md.find("trial 1 (chose grad: cpu.serial)"), std::string::npos) << md;
  EXPECT_NE(md.find("Note: the autotuning ops chose otherwise (a: grad: cpu.ordered; b: grad: cpu.serial)"), std::string::npos) << md;
  EXPECT_EQ(nlohmann::json::parse(render_trace_diff_json(diffs))["diffs"][0]["b"]["choice"], "grad: cpu.serial");

  // A variant that searches again where it was told to replay its choice is a harness error: the
  // trajectory would not be what a framework runs.
  honour_replay = false;
  searches = 0;
  const PipelineExecution ignored = host.run(pl, tuned, 1, nullptr);
  EXPECT_EQ(ignored.result.kind, CaseExecution::Kind::error);
  EXPECT_NE(ignored.result.detail.find("op grad (bias_add_grad test.autotune) was told to run its choice cpu.ordered again and named "
                                       "cpu.serial"),
            std::string::npos)
      << ignored.result.detail;
}

// matmul's cpu.autotune, told to replay a choice, runs exactly that variant's sums, untimed.
TEST(AutotuneReplay, MatmulCpuAutotuneRunsTheChoiceItIsToldToReplay) {
  const Catalog cat = parse_catalog(R"({"schema": "d9m.catalog/1", "configs": [
      {"op": "matmul", "name": "tall_k", "params": {"m": 2, "n": 3, "k": 4096}, "variants": ["cpu.*"]}]})",
                                    "c.json", Registry::global());
  const CatalogConfig& cc = cat.configs.at(0);
  const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
  auto cpu = make_cpu_executor(2);
  const VariantDef& tuner = *Registry::global().find_variant("matmul", "cpu.autotune");
  const auto digest_of = [](const HostTensor& t) { return digest_v1(t.data(), t.desc().bytes()).hex(); };
  std::set<std::string> digests;
  for (const std::string name : {"cpu.ordered", "cpu.splitk_by_shape"}) {
    OnceChoice choice{.replay = name, .made = {}};
    const HostTensor replayed = cpu->run_once(tuner, cc.problem, inputs, &choice);
    EXPECT_EQ(choice.made, name);
    const HostTensor direct = cpu->run_once(*Registry::global().find_variant("matmul", name), cc.problem, inputs);
    EXPECT_EQ(digest_of(replayed), digest_of(direct)) << name;
    digests.insert(digest_of(direct));
  }
  EXPECT_EQ(digests.size(), 2u) << "the two choices' bits differ at this shape (else the test proves nothing)";
  OnceChoice searched;
  cpu->run_once(tuner, cc.problem, inputs, &searched);
  EXPECT_TRUE(searched.made == "cpu.ordered" || searched.made == "cpu.splitk_by_shape") << searched.made;
  OnceChoice bogus{.replay = "cpu.atomic", .made = {}};
  EXPECT_THROW(cpu->run_once(tuner, cc.problem, inputs, &bogus), std::logic_error);
}

TEST_F(PipelineRunTest, VerifyFindsAnEditedOrDeletedTraceRowAndMergeCarriesTheTrace) {
  const Catalog cat = parse_catalog(bias_pipeline("cpu.ordered", 2), "p.json", Registry::global());
  const std::string db = path("p.sqlite");
  run(cat, db, 2);
  const std::string merged = path("m.sqlite");
  merge_stores(merged, {db});
  EXPECT_EQ(count(merged, "SELECT count(*) FROM trace"), count(db, "SELECT count(*) FROM trace"));
  {
    Store s = Store::open(merged, Store::Mode::read_only);
    EXPECT_TRUE(verify_store(s).problems.empty());
  }
  {
    Store s = Store::open(db, Store::Mode::read_write);
    sql::exec(s.db(), "UPDATE trace SET digest = '00000000000000000000000000000000' WHERE trial = 1 AND step = 1 AND position = 0");
    const auto problems = verify_store(s).problems;
    ASSERT_FALSE(problems.empty());
    bool chain = false;
    for (const auto& p : problems) chain |= p.find("trace of trial 1 step 1 op 0") != std::string::npos;
    EXPECT_TRUE(chain) << problems.front();
  }
  {
    Store s = Store::open(merged, Store::Mode::read_write);
    sql::exec(s.db(), "DELETE FROM trace WHERE trial = 1 AND step = 1 AND position = 2");
    EXPECT_FALSE(verify_store(s).problems.empty());
  }
  // trace diff reads the trace against the trial digest too: the edited row is not trial 1's.
  try {
    diff_traces(parse_trace_operand(db), std::nullopt, "*", "*");
    ADD_FAILURE() << "trace diff read an edited trace";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not give its trial digest"), std::string::npos) << e.what();
  }
}

// Every trace row waits in memory for its case's transaction: a pipeline whose rows would not fit
// is refused before it starts, naming the rows and the memory.
TEST_F(PipelineRunTest, APipelineWhoseTraceWouldNotFitIsUnsupportedNamingTheRows) {
  const Catalog cat = parse_catalog(bias_pipeline("cpu.ordered", 100000), "p.json", Registry::global());
  const RunSummary r = run(cat, path("p.sqlite"), 1 << 20);
  EXPECT_EQ(r.by_status[static_cast<int>(Status::unsupported)], 1);
  Store s = Store::open(path("p.sqlite"), Store::Mode::read_only);
  sql::Statement d(s.db(), "SELECT detail FROM case_runs");
  ASSERT_TRUE(d.step());
  EXPECT_NE(d.text(0).find("314572800000 trace rows"), std::string::npos) << d.text(0);
}

TEST_F(PipelineRunTest, TraceDiffNamesTheRacingOpAtTheFirstStepItsOutputDiffered) {
  // bias_add_grad's cpu.atomic adds 32768 rows into 3 sums from 2 threads. A race is likely in
  // every step, but a quiet scheduler may serialise one: the test asks only what must hold.
  const Catalog cat = parse_catalog(bias_pipeline("cpu.atomic", 4), "p.json", Registry::global());
  const std::string db = path("p.sqlite");
  std::vector<TraceDiff> diffs;
  for (int attempt = 0; attempt < 10; ++attempt) {
    std::filesystem::remove(db);
    run(cat, db, 4);
    diffs = diff_traces(parse_trace_operand(db), std::nullopt, "*", "*");
    if (diffs.at(0).source) break;
  }
  ASSERT_TRUE(diffs.at(0).source.has_value()) << "cpu.atomic never raced in 10 runs of 4 trials";
  const TraceDiff& d = diffs[0];
  EXPECT_EQ(d.source->row.name, "grad");
  EXPECT_EQ(d.source->row.variant_b, "cpu.atomic");
  EXPECT_EQ(d.source->claim_determinism, "nondeterministic");
  EXPECT_TRUE(d.stats_known);
  ASSERT_TRUE(d.source->row.diff.has_value());
  EXPECT_GT(d.source->row.diff->count, 0);
  // The source's step is the first step with a differing output, and before it nothing differs.
  for (const auto& s : d.by_step) {
    if (s.step < d.source->row.step) {
      EXPECT_EQ(s.differing_outputs, 0);
    }
    if (s.step == d.source->row.step) {
      EXPECT_GT(s.differing_outputs, 0);
    }
  }
  // After the source the difference propagates: move_b and move_x of that step read it.
  EXPECT_GE(d.propagated, 2);
  // Trial B is the first trial whose trajectory differs from trial 0's.
  EXPECT_NE(d.a.trial_digest, d.b.trial_digest);
  const std::string md = render_trace_diff_markdown(diffs);
  EXPECT_NE(md.find("**Source:** step " + std::to_string(d.source->row.step) + ", op 0 `grad`"), std::string::npos) << md;
  EXPECT_NE(render_trace_diff_html(diffs).find("<svg"), std::string::npos);
  const auto j = nlohmann::json::parse(render_trace_diff_json(diffs));
  EXPECT_EQ(j["schema"], "d9m.trace-diff/1");
  EXPECT_EQ(j["diffs"][0]["source"]["name"], "grad");
}

TEST_F(PipelineRunTest, TraceDiffRefusesTracesOfAnotherPipelineOrOtherInputs) {
  const std::string a = path("a.sqlite"), b = path("b.sqlite"), c = path("c.sqlite");
  run(parse_catalog(bias_pipeline("cpu.ordered", 2), "p.json", Registry::global()), a, 2);
  run(parse_catalog(bias_pipeline("cpu.ordered", 3), "p.json", Registry::global()), b, 2);  // another definition
  std::string other_seed = bias_pipeline("cpu.ordered", 2);
  other_seed.replace(other_seed.find("\"seed\": 5"), std::string("\"seed\": 5").size(), "\"seed\": 6");
  run(parse_catalog(other_seed, "p.json", Registry::global()), c, 2);
  auto message = [&](const std::string& x, const std::string& y) {
    try {
      diff_traces(parse_trace_operand(x), parse_trace_operand(y), "*", "*");
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::usage);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message(a, b).find("is another pipeline"), std::string::npos) << message(a, b);
  EXPECT_NE(message(a, c).find("another pipeline"), std::string::npos) << message(a, c);  // the seed is in the definition
  EXPECT_NE(message(a + "#7", a).find("has no trial 7"), std::string::npos) << message(a + "#7", a);
  EXPECT_NE(message(a + "@run:zz", a).find("has an id starting with 'zz'"), std::string::npos);
  // Two stores of the same pipeline compare trial 0 with trial 0.
  const std::string a2 = path("a2.sqlite");
  run(parse_catalog(bias_pipeline("cpu.ordered", 2), "p.json", Registry::global()), a2, 2);
  const auto same = diff_traces(parse_trace_operand(a), parse_trace_operand(a2), "*", "*");
  ASSERT_EQ(same.size(), 1u);
  EXPECT_FALSE(same[0].source.has_value());
  EXPECT_FALSE(same[0].stats_known);
}

}  // namespace
}  // namespace d9m
