// GPU tests (label `gpu`): each reports a skip, never a pass, when no device answers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "harness/catalog.h"
#include "harness/digest.h"
#include "harness/executor.h"
#include "harness/gpu_digest.h"
#include "harness/inputs.h"
#include "kernels/common/counter_rng.h"

namespace d9m {
namespace {

#define D9M_REQUIRE_GPU()                                                         \
  do {                                                                            \
    static const auto why = make_cuda_executor()->unavailable();                  \
    if (why) GTEST_SKIP() << *why;                                                \
  } while (0)

struct DeviceCopy {
  void* p = nullptr;
  DeviceCopy(const void* host, std::size_t bytes) {
    D9M_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
    D9M_CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
  }
  ~DeviceCopy() { cudaFree(p); }
};

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<unsigned char> b(n);
  const CounterRng rng(seed, 1);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(rng.bits(i));
  return b;
}

TEST(GpuDigest, EqualsTheHostDigestOnManyLengths) {
  D9M_REQUIRE_GPU();
  std::vector<std::size_t> lengths = {0, 1, 3, 8, 16, 17, 240, 241, 4095, 4096, 4097, 8192 + 5, 3 * 4096 + 4000,
                                      (5u << 20) + 3, 64u << 20};
  const CounterRng pick(5, 5);
  for (int i = 0; i < 20; ++i) lengths.push_back(pick.below(static_cast<std::uint64_t>(i), 2'000'000));
  GpuDigester digester(nullptr);
  for (std::size_t n : lengths) {
    const auto buf = random_bytes(n, n);
    DeviceCopy d(buf.data(), n);
    EXPECT_EQ(digester.digest(d.p, n).hex(), digest_v1(buf.data(), n).hex()) << "length " << n;
  }
}

TEST(GpuDigest, DiffStatsEqualTheHostOnes) {
  D9M_REQUIRE_GPU();
  const std::int64_t n = 100000;
  std::vector<float> a(n), b(n);
  const CounterRng rng(3, 3);
  for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] = rng.unit_symmetric(static_cast<std::uint64_t>(i));
  for (std::int64_t i : {17, 4242, 99999}) b[i] = std::nextafter(b[i], 2.0f) * (i == 4242 ? 1.5f : 1.0f);
  DeviceCopy da(a.data(), n * 4), db(b.data(), n * 4);
  GpuDigester digester(nullptr);
  const DiffStats g = digester.diff(DType::f32, da.p, db.p, n), h = diff_outputs(DType::f32, a.data(), b.data(), n);
  EXPECT_EQ(g.count, 3);
  EXPECT_EQ(g.count, h.count);
  EXPECT_EQ(g.first_index, h.first_index);
  EXPECT_EQ(g.max_ulp, h.max_ulp);
  EXPECT_DOUBLE_EQ(g.max_abs, h.max_abs);
}

// Runs a variant through its backend's executor: `trials` digests and the first output.
CaseOutcome run_case(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& in, int trials) {
  auto ex = v.backend == Backend::cpu ? make_cpu_executor(2) : make_cuda_executor();
  return ex->run(v, p, in, trials, true, nullptr);
}

TEST(CudaVariants, MatchTheReferenceDeterministicallyAndKeepTheirCrossImplementationClaims) {
  D9M_REQUIRE_GPU();
  const Catalog cat = default_catalog(Registry::global());
  int checked = 0, cross = 0;
  for (const auto& cc : cat.configs) {
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    const auto ref = run_case(*Registry::global().find_variant(cc.op->name, "cpu.serial"), cc.problem, inputs, 1);
    const float* r = ref.first_output->as<float>();
    double max_ref = 0;
    for (std::int64_t i = 0; i < cc.problem.output.numel(); ++i) max_ref = std::max(max_ref, std::fabs(static_cast<double>(r[i])));
    for (const auto* v : Registry::global().variants_of(cc.op->name)) {
      if (v->backend != Backend::cuda) continue;
      const std::string what = cc.op->name + "/" + cc.name + "/" + v->name;
      CaseOutcome out;
      try {
        out = run_case(*v, cc.problem, inputs, 3);
      } catch (const Unsupported&) {
        continue;  // a cuDNN algorithm that does not support this config
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": " << e.what();
        continue;
      }
      // cuDNN's FFT and Winograd algorithms round differently from direct summation.
      const double tol = (v->name.rfind("cudnn.", 0) == 0 ? 1e-3 : std::max(cc.op->tolerance, 1e-5)) * (1 + max_ref);
      const float* o = out.first_output->as<float>();
      double worst = 0;
      for (std::int64_t i = 0; i < cc.problem.output.numel(); ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(o[i]) - static_cast<double>(r[i])));
      EXPECT_LE(worst, tol) << what;
      if (v->claim.determinism == Determinism::deterministic && v->name.rfind("cuda.", 0) == 0) {
        for (const auto& t : out.trials) EXPECT_EQ(t.digest, out.trials[0].digest) << what << " diverged";
      }
      if (!v->bit_equal_to.empty()) {
        const auto partner = run_case(*Registry::global().find_variant(cc.op->name, v->bit_equal_to), cc.problem, inputs, 1);
        EXPECT_EQ(out.trials[0].digest, partner.trials[0].digest) << what << " claims the bits of " << v->bit_equal_to;
        ++cross;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_GT(cross, 0);
}

TEST(CudaVariants, AgreeBitForBitOnExactInputs) {
  D9M_REQUIRE_GPU();
  // Integer inputs with exact sums: the CUDA direct variants (atomic included) must give the
  // reference bits; so must cudnn.max_deterministic and cudnn.max.
  const Catalog cat = default_catalog(Registry::global());
  for (const auto& cc : cat.configs) {
    const auto inputs = make_inputs(*cc.op, cc.problem, 3, FillMode::exact);
    const std::string ref = run_case(*Registry::global().find_variant(cc.op->name, "cpu.serial"), cc.problem, inputs, 1).trials[0].digest;
    for (const auto* v : Registry::global().variants_of(cc.op->name)) {
      const bool direct = v->name.rfind("cuda.", 0) == 0 || v->name.rfind("cudnn.max", 0) == 0;
      if (v->backend != Backend::cuda || !direct) continue;
      // Bilinear weights of non-dyadic scales round: those configs are not exact for any order.
      if (cc.op->family == "resize" || cc.op->family == "crop_and_resize") continue;
      try {
        EXPECT_EQ(run_case(*v, cc.problem, inputs, 2).trials[1].digest, ref) << cc.op->name << "/" << cc.name << "/" << v->name;
      } catch (const Unsupported&) {
      }
    }
  }
}

}  // namespace
}  // namespace d9m
