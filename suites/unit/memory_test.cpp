// Ordered variants that scale (issue 13 item 4): the bucketed ordered variant buffers one wave of
// contributions at a time and keeps serial's bits whatever the waves; every op in scatter form
// states a bound on its contributions, which the ordered variants check; and a case whose memory
// is beyond the machine is UNSUPPORTED before anything is allocated, naming what it needs.
#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "harness/exec/case_exec.h"
#include "kernels/common/accumulate.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::digest;
using test::run_variant;

// A scatter whose sources emit uneven numbers of contributions (0 to 6) into few targets, in
// an order unlike their targets', with values whose float sums depend on the order.
struct UnevenScatter {
  template <class Emit>
  void operator()(std::size_t s, Emit& emit) const {
    for (std::size_t k = 0; k < s % 7; ++k)
      emit((s * 31 + k * 17) % 97, 1.0f / static_cast<float>(1 + ((s * 7919 + k) % 1013)));
  }
};

TEST(OrderedWaves, AnyWaveBudgetGivesSerialsBitsOnAnyThreadCount) {
  const std::size_t sources = 20000, targets = 97;
  std::vector<float> serial(targets, 0.0f);
  accumulate::serial(sources, serial.data(), UnevenScatter{});
  for (unsigned threads : {1u, 3u})
    for (std::uint64_t budget : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{1000}, accumulate::kOrderedWaveContributions}) {
      ThreadPool pool(threads);
      std::vector<float> got(targets, 0.0f);
      accumulate::ordered(pool, sources, targets, got.data(), UnevenScatter{}, 0, budget);
      EXPECT_EQ(std::memcmp(got.data(), serial.data(), targets * sizeof(float)), 0) << "budget " << budget << ", " << threads << " threads";
    }
  // A bound makes the chunks small where each source emits many: still the same bits.
  ThreadPool pool(2);
  std::vector<float> got(targets, 0.0f);
  accumulate::ordered(pool, sources, targets, got.data(), UnevenScatter{}, 6 * sources, 64);
  EXPECT_EQ(std::memcmp(got.data(), serial.data(), targets * sizeof(float)), 0);
}

TEST(OrderedWaves, ExceedingThePlansBoundIsAnErrorNotASilentMemoryOverrun) {
  const std::size_t sources = 1000, targets = 97;
  std::uint64_t emitted = 0;
  for (std::size_t s = 0; s < sources; ++s) emitted += s % 7;
  ThreadPool pool(2);
  std::vector<float> out(targets, 0.0f);
  EXPECT_NO_THROW(accumulate::ordered(pool, sources, targets, out.data(), UnevenScatter{}, emitted, 100));
  EXPECT_THROW(accumulate::ordered(pool, sources, targets, out.data(), UnevenScatter{}, emitted - 1, 100), std::logic_error);
}

// Every op whose ordered variant buffers contributions (it states its working memory) plans a
// bound on them, and the bound holds on every config of the catalogue: the variant itself checks
// it (a config past its bound ends in an error).
TEST(OrderedWaves, EveryScatterOpStatesABoundThatHoldsOnTheCatalogue) {
  const Catalog cat = builtin_catalog(D9M_TEST_PROFILE, Registry::global());
  std::set<std::string> checked;
  for (const auto& cc : cat.configs) {
    const VariantDef* v = Registry::global().find_variant(cc.op->name, "cpu.ordered");
    if (!v || !v->memory) continue;
    EXPECT_GT(cc.problem.contributions, 0u) << cc.op->name << "/" << cc.name;
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    EXPECT_NO_THROW(run_variant(cc.op->name, "cpu.ordered", cc.problem, inputs)) << cc.op->name << "/" << cc.name;
    checked.insert(cc.op->name);
  }
  // Every such op, whichever profile the tests run (each profile has a config of every op).
  std::set<std::string> buffering;
  for (const auto& op : Registry::global().ops()) {
    const VariantDef* v = Registry::global().find_variant(op.name, "cpu.ordered");
    if (v && v->memory) buffering.insert(op.name);
  }
  EXPECT_GE(buffering.size(), 10u);
  EXPECT_EQ(checked, buffering);
}

TEST(OrderedWaves, TheOrderedVariantsWorkingMemoryIsBoundedByTheWave) {
  // A ResNet-50 convolution backprop at batch 32 emits about 3.7e9 contributions: 60 GiB if all
  // were buffered, one wave's worth here.
  const CatalogConfig cc = config("conv2d_bwd_data", {{"n", 32}, {"h", 56}, {"w", 56}, {"ci", 64}, {"co", 64}, {"kh", 3}, {"kw", 3}});
  EXPECT_GT(cc.problem.contributions, std::uint64_t{3} << 30);
  const auto mem = Registry::global().find_variant("conv2d_bwd_data", "cpu.ordered")->memory(cc.problem);
  ASSERT_TRUE(mem);
  EXPECT_LE(mem->bytes, std::uint64_t{1} << 30);
  EXPECT_FALSE(mem->what.empty());
}

// An executor of a machine with 1 GiB free.
class SmallMachine final : public Executor {
 public:
  std::optional<std::string> unavailable() const override { return std::nullopt; }
  CaseOutcome run(const VariantDef&, const Problem&, const std::vector<HostTensor>&, std::int64_t, bool, const TrialCallback&) override {
    return {};
  }
  HostTensor run_once(const VariantDef&, const Problem& p, const std::vector<HostTensor>&, OnceChoice* = nullptr) override {
    return HostTensor(p.output);
  }
  std::string memory_name() const override { return "host memory"; }
  bool on_device() const override { return false; }
  std::optional<std::uint64_t> memory_free() const override { return free; }
  std::uint64_t memory_held(const Problem& p) const override { return 2 * p.output.bytes(); }
  std::optional<std::uint64_t> free = std::uint64_t{1} << 30;
};

TEST(MemoryRefusal, BeyondTheMachineNamesWhatIsNeededAndWhatIsFree) {
  const CatalogConfig cc = config("bias_add_grad", {{"n", 1}, {"h", 4}, {"w", 4}, {"c", 256}});
  VariantDef v = *Registry::global().find_variant("bias_add_grad", "cpu.serial");
  SmallMachine machine;
  EXPECT_EQ(memory_refusal(machine, v, cc.problem), std::nullopt) << "no working memory stated: the outputs fit";
  v.memory = [](const Problem&) -> std::optional<WorkingMemory> { return WorkingMemory{std::uint64_t{3} << 30, "three GiB of scratch"}; };
  const auto why = memory_refusal(machine, v, cc.problem);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("needs about 3.0 GiB of host memory"), std::string::npos) << *why;
  EXPECT_NE(why->find("three GiB of scratch"), std::string::npos) << *why;
  EXPECT_NE(why->find("1.0 GiB is free"), std::string::npos) << *why;
  v.memory = [](const Problem&) -> std::optional<WorkingMemory> { return WorkingMemory{std::uint64_t{1} << 29, "half a GiB"}; };
  EXPECT_EQ(memory_refusal(machine, v, cc.problem), std::nullopt) << "fits";
  machine.free = std::nullopt;
  v.memory = [](const Problem&) -> std::optional<WorkingMemory> { return WorkingMemory{std::uint64_t{1} << 60, "an exbibyte"}; };
  EXPECT_EQ(memory_refusal(machine, v, cc.problem), std::nullopt) << "free memory unknown: never refused on a guess";
}

TEST(MemoryRefusal, TheRealHostRefusesACaseBeyondItBeforeRunningIt) {
  const Catalog cat = parse_catalog(
      R"({"schema": "d9m.catalog/1", "configs": [{"op": "bias_add_grad", "name": "small", "params": {"n": 1, "h": 4, "w": 4, "c": 8}}]})",
      "test", Registry::global());
  VariantDef v = *Registry::global().find_variant("bias_add_grad", "cpu.serial");
  bool ran = false;
  v.run = [&ran](const KernelArgs&) { ran = true; };
  v.memory = [](const Problem&) -> std::optional<WorkingMemory> { return WorkingMemory{std::uint64_t{1} << 60, "an exbibyte"}; };
  CaseHost host(2);
  const CaseExecution r = host.run({&cat.configs[0], &v, 3, std::nullopt}, nullptr, nullptr);
  EXPECT_EQ(r.kind, CaseExecution::Kind::unsupported);
  EXPECT_NE(r.detail.find("of host memory"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("an exbibyte"), std::string::npos) << r.detail;
  EXPECT_FALSE(ran);
  EXPECT_FALSE(r.input_digest.empty()) << "the case keeps its identity";
}

TEST(MemoryRefusal, HostMemoryFreeIsReadOnLinux) {
  const auto free = host_memory_free();
  ASSERT_TRUE(free);
  EXPECT_GT(*free, std::uint64_t{16} << 20);
}

TEST(MemoryText, PicksAReadableUnit) {
  EXPECT_EQ(memory_text(1000), "1 KiB");
  EXPECT_EQ(memory_text(std::uint64_t{3} << 20), "3.0 MiB");
  EXPECT_EQ(memory_text((std::uint64_t{59} << 30) + (std::uint64_t{6} << 27)), "59.8 GiB");
}

}  // namespace
}  // namespace d9m
