// GPU tests (label `gpu`): each reports a skip, never a pass, when no device answers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include "harness/core/catalog.h"
#include "harness/core/digest.h"
#include "harness/exec/executor.h"
#include "harness/core/gpu_digest.h"
#include "harness/core/inputs.h"
#include "kernels/common/counter_rng.h"
#include "suites/unit/kernel_harness.h"

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

// n floats in [-1, 1), the same for the same seed.
std::vector<float> random_floats(std::int64_t n, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  const CounterRng rng(seed, seed);
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = rng.unit_symmetric(static_cast<std::uint64_t>(i));
  return v;
}

TEST(GpuDigest, EqualsTheHostDigestOnManyLengths) {
  D9M_REQUIRE_GPU();
  // Edges of both levels: a last leaf of 240/241 bytes (XXH3's short and long paths), leaf-value
  // arrays of 30/31 leaves (240/248 bytes: the final hash's short and long paths), of 128 leaves
  // (exactly one 1 KiB block, which XXH3 treats as zero full blocks plus a tail) and 129, 2048
  // and 2049 leaves, and buffers too large for one resident grid of warps.
  std::vector<std::size_t> lengths = {0, 1, 3, 8, 16, 17, 240, 241, 4095, 4096, 4097, 8192 + 5, 3 * 4096 + 4000,
                                      3 * 4096 + 240, 3 * 4096 + 241, 30 * 4096, 31 * 4096, 128 * 4096, 129 * 4096 - 7,
                                      2048 * 4096, 2049 * 4096 + 1, (5u << 20) + 3, 64u << 20, (256u << 20) + 4096 + 64};
  const CounterRng pick(5, 5);
  for (int i = 0; i < 20; ++i) lengths.push_back(pick.below(static_cast<std::uint64_t>(i), 2'000'000));
  GpuDigester digester(nullptr);
  for (std::size_t n : lengths) {
    const auto buf = random_bytes(n, n);
    DeviceCopy d(buf.data(), n);
    EXPECT_EQ(digester.digest(d.p, n).hex(), digest_v1(buf.data(), n).hex()) << "length " << n;
  }
}

TEST(GpuDigest, UnalignedBuffersDigestLikeTheHost) {
  D9M_REQUIRE_GPU();
  const auto buf = random_bytes(3 * 4096 + 999, 77);
  DeviceCopy d(buf.data(), buf.size());
  GpuDigester digester(nullptr);
  for (std::size_t skip : {1u, 3u, 8u, 12u})
    EXPECT_EQ(digester.digest(static_cast<const unsigned char*>(d.p) + skip, buf.size() - skip).hex(),
              digest_v1(buf.data() + skip, buf.size() - skip).hex())
        << "offset " << skip;
}

// The batched form: digests land in device slots, and the diff runs only where they differ.
TEST(GpuDigest, QueuedDigestsAndDiffsEqualTheSynchronousOnes) {
  D9M_REQUIRE_GPU();
  const std::int64_t n = 300000;
  const std::vector<float> a = random_floats(n, 4);
  std::vector<float> b = a;
  b[123456] = std::nextafter(b[123456], 2.0f);
  DeviceCopy da(a.data(), n * 4), db(b.data(), n * 4), da2(a.data(), n * 4);
  std::vector<std::uint64_t> zeros(6 + 12, 0);
  DeviceCopy slots(zeros.data(), zeros.size() * 8);  // 3 digests, then 3 diff slots (zeroed)
  auto* digests = static_cast<std::uint64_t*>(slots.p);
  auto* diffs = reinterpret_cast<GpuDiffSlot*>(digests + 6);
  GpuDigester digester(nullptr);
  digester.enqueue_digest(da.p, n * 4, digests);
  digester.enqueue_digest(db.p, n * 4, digests + 2);
  digester.enqueue_digest(da2.p, n * 4, digests + 4);
  digester.enqueue_diff_if_different(DType::f32, da.p, db.p, n, digests, digests + 2, diffs + 1);
  digester.enqueue_diff_if_different(DType::f32, da.p, da2.p, n, digests, digests + 4, diffs + 2);
  std::vector<std::uint64_t> host(zeros.size());
  D9M_CUDA_CHECK(cudaMemcpy(host.data(), slots.p, host.size() * 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ((Digest128{host[0], host[1]}.hex()), digest_v1(a.data(), n * 4).hex());
  EXPECT_EQ((Digest128{host[2], host[3]}.hex()), digest_v1(b.data(), n * 4).hex());
  EXPECT_EQ(host[4], host[0]);
  GpuDiffSlot got[3];
  std::memcpy(got, host.data() + 6, sizeof got);
  const DiffStats differ = to_diff_stats(got[1]), same = to_diff_stats(got[2]);
  EXPECT_EQ(differ.count, 1);
  EXPECT_EQ(differ.first_index, 123456);
  EXPECT_EQ(differ.max_ulp, 1);
  EXPECT_EQ(same.count, 0);
  EXPECT_EQ(same.first_index, -1);
}

TEST(GpuDigest, DiffStatsEqualTheHostOnes) {
  D9M_REQUIRE_GPU();
  const std::int64_t n = 100000;
  const std::vector<float> a = random_floats(n, 3);
  std::vector<float> b = a;
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

// The same in the 16-bit types and f64: the device reads elements of the output's dtype.
TEST(GpuDigest, DiffStatsEqualTheHostOnesInEveryFloatType) {
  D9M_REQUIRE_GPU();
  const std::int64_t n = 50000;
  const std::vector<float> base = random_floats(n, 5);
  for (DType dtype : {DType::f16, DType::bf16, DType::f64}) {
    std::vector<unsigned char> a(n * dtype_size(dtype)), b;
    for (std::int64_t i = 0; i < n; ++i) {
      if (dtype == DType::f16) reinterpret_cast<Half*>(a.data())[i] = half_from_float(base[i]);
      if (dtype == DType::bf16) reinterpret_cast<BFloat16*>(a.data())[i] = bfloat16_from_float(base[i]);
      if (dtype == DType::f64) reinterpret_cast<double*>(a.data())[i] = base[i];
    }
    b = a;
    for (std::int64_t i : {3, 777, 49999}) {  // one element up by a few units in the last place
      if (dtype == DType::f64) reinterpret_cast<double*>(b.data())[i] *= -1.5;
      else reinterpret_cast<std::uint16_t*>(b.data())[i] += static_cast<std::uint16_t>(i % 5 + 1);
    }
    DeviceCopy da(a.data(), a.size()), db(b.data(), b.size());
    GpuDigester digester(nullptr);
    const DiffStats g = digester.diff(dtype, da.p, db.p, n), h = diff_outputs(dtype, a.data(), b.data(), n);
    EXPECT_EQ(g.count, 3) << dtype_name(dtype);
    EXPECT_EQ(g.count, h.count) << dtype_name(dtype);
    EXPECT_EQ(g.first_index, h.first_index) << dtype_name(dtype);
    EXPECT_EQ(g.max_ulp, h.max_ulp) << dtype_name(dtype);
    EXPECT_DOUBLE_EQ(g.max_abs, h.max_abs) << dtype_name(dtype);
  }
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
    const auto r = test::values(*ref.first_output);
    double max_ref = 0;
    for (double x : r) max_ref = std::max(max_ref, std::fabs(x));
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
      const double tol = (v->name.rfind("cudnn.", 0) == 0 ? 1e-3 : std::max(tolerance_for(*cc.op, cc.problem.dtype, cc.problem.math), 1e-5)) * (1 + max_ref);
      const auto o = test::values(*out.first_output);
      double worst = 0;
      for (std::size_t i = 0; i < o.size(); ++i) worst = std::max(worst, std::fabs(o[i] - r[i]));
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

// The executor's batched trial loop: every trial has its digest, diff stats exactly where its
// digest differs from the first, and a callback that says stop is obeyed at that very trial.
TEST(CudaExecutor, BatchedTrialsKeepEveryDigestDiffAndStop) {
  D9M_REQUIRE_GPU();
  const Catalog cat = default_catalog(Registry::global());
  const CatalogConfig* cc = nullptr;
  for (const auto& c : cat.configs)
    if (c.op->name == "scatter_add" && c.name == "collide_8192_into_16") cc = &c;
  ASSERT_NE(cc, nullptr);
  const auto inputs = make_inputs(*cc->op, cc->problem, cc->seed);
  const auto* atomic = Registry::global().find_variant("scatter_add", "cuda.atomic");
  auto ex = make_cuda_executor();
  std::int64_t calls = 0;
  const CaseOutcome out = ex->run(*atomic, cc->problem, inputs, 300, true, [&](std::int64_t done, std::int64_t total) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(total, 300);
    return true;
  });
  ASSERT_EQ(out.trials.size(), 300u);
  EXPECT_EQ(calls, 300);
  int differing = 0;
  for (std::size_t t = 1; t < out.trials.size(); ++t) {
    const bool differs = out.trials[t].digest != out.trials[0].digest;
    EXPECT_EQ(out.trials[t].diff.has_value(), differs) << "trial " << t;
    if (differs) {
      ++differing;
      EXPECT_GT(out.trials[t].diff->count, 0) << "trial " << t;
      EXPECT_GE(out.trials[t].diff->first_index, 0) << "trial " << t;
    }
    EXPECT_GT(out.trials[t].elapsed_ns, 0) << "trial " << t;
  }
  EXPECT_GT(differing, 0) << "8192 float atomics into 16 rows gave one digest in 300 trials";

  const CaseOutcome stopped = ex->run(*atomic, cc->problem, inputs, 300, false, [](std::int64_t done, std::int64_t) { return done < 77; });
  EXPECT_EQ(stopped.trials.size(), 77u);
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

// ---- CUB's determinism levels (kernels/reduce/reduce_cub.cu) ---------------------------------

// The reduce family's CUB variants that claim determinism (cub.default where CUB documents
// run_to_run, cub.run_to_run, cub.gpu_to_gpu) give one digest in 50 calls on every default config,
// large ones included, within the op's tolerance of the serial reference.
TEST(CubVariants, DeterministicLevelsRepeatTheirBitsOver50CallsNearTheReference) {
  D9M_REQUIRE_GPU();
  const Catalog cat = default_catalog(Registry::global());
  std::set<std::string> seen;
  for (const auto& cc : cat.configs) {
    if (cc.op->family != "reduce") continue;
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    const auto ref = test::values(*run_case(*Registry::global().find_variant(cc.op->name, "cpu.serial"), cc.problem, inputs, 1).first_output);
    double max_ref = 0;
    for (double x : ref) max_ref = std::max(max_ref, std::fabs(x));
    const double tol = tolerance_for(*cc.op, cc.problem.dtype) * (1 + max_ref);
    for (const auto* v : Registry::global().variants_of(cc.op->name)) {
      if (v->name.rfind("cub.", 0) != 0 || v->claim.determinism != Determinism::deterministic) continue;
      const std::string what = cc.op->name + "/" + cc.name + "/" + v->name;
      const CaseOutcome out = run_case(*v, cc.problem, inputs, 50);
      ASSERT_EQ(out.trials.size(), 50u) << what;
      for (const auto& t : out.trials) EXPECT_EQ(t.digest, out.trials[0].digest) << what << " diverged";
      const auto got = test::values(*out.first_output);
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - ref[i]));
      EXPECT_LE(worst, tol) << what;
      seen.insert(cc.op->name + "/" + v->name);
    }
  }
  for (const char* required : {"reduce_sum/cub.run_to_run", "reduce_sum/cub.gpu_to_gpu", "reduce_sum/cub.default",
                               "segmented_reduce/cub.run_to_run", "segmented_reduce/cub.default"})
    EXPECT_TRUE(seen.count(required)) << required;
}

// A trial allocates nothing: the workspace is sized and allocated in prepare(), and the
// single-phase calls get it through their environment's memory resource instead of allocating
// from the device's default pool (CUB's default resource does: cudaMallocAsync).
TEST(CubVariants, TrialsAllocateNothing) {
  D9M_REQUIRE_GPU();
  const Catalog cat = default_catalog(Registry::global());
  cudaMemPool_t pool;
  D9M_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  int checked = 0;
  for (const auto& cc : cat.configs) {
    if (cc.op->family != "reduce" || cc.problem.dtype != DType::f32 || cc.problem.inputs[0].numel() < (1 << 22)) continue;
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    std::vector<std::unique_ptr<DeviceCopy>> device;
    for (const auto& t : inputs) device.push_back(std::make_unique<DeviceCopy>(t.data(), t.desc().bytes()));
    std::vector<unsigned char> zeros(cc.problem.output.bytes(), 0);
    DeviceCopy out(zeros.data(), zeros.size());
    cudaStream_t stream;
    D9M_CUDA_CHECK(cudaStreamCreate(&stream));
    for (const auto* v : Registry::global().variants_of(cc.op->name)) {
      if (v->name.rfind("cub.", 0) != 0 || (v->unsupported && v->unsupported(cc.problem))) continue;
      const std::string what = cc.op->name + "/" + cc.name + "/" + v->name;
      const ExecContext exec{nullptr, stream};
      const Prepared prepared = v->prepare(cc.problem, exec);
      D9M_CUDA_CHECK(cudaStreamSynchronize(stream));
      std::uint64_t zero = 0, before = 0, high = 0;
      D9M_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
      D9M_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &before));
      KernelArgs args{cc.problem, {}, out.p, exec};
      for (const auto& d : device) args.inputs.push_back(d->p);
      args.state = prepared.state.get();
      for (int t = 0; t < 5; ++t) v->run(args);
      D9M_CUDA_CHECK(cudaStreamSynchronize(stream));
      D9M_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
      EXPECT_LE(high, before) << what << " allocated " << (high - before) << " bytes in its trials";
      ++checked;
    }
    D9M_CUDA_CHECK(cudaStreamDestroy(stream));
  }
  EXPECT_GE(checked, 4 + 2 + 3);  // on the large f32 configs: reduce_sum 4 levels, cumsum 2, segmented_reduce 3
}

// d9m's own atomic reduction races on a GPU: 1024 block sums of mixed magnitudes into one address.
// CUB's not_guaranteed (atomics too, claimed nondeterministic) is run alongside and its count
// recorded, not asserted: CCCL promises nothing either way.
TEST(CubVariants, AtomicReductionsOnManyBlocksDiverge) {
  D9M_REQUIRE_GPU();
  const Catalog cat = default_catalog(Registry::global());
  for (const auto& cc : cat.configs) {
    if (cc.op->name != "reduce_sum" || cc.name != "n_4194304") continue;
    const auto inputs = make_inputs(*cc.op, cc.problem, cc.seed);
    for (const char* name : {"cuda.atomic", "cub.not_guaranteed"}) {
      const CaseOutcome out = run_case(*Registry::global().find_variant("reduce_sum", name), cc.problem, inputs, 100);
      std::set<std::string> distinct;
      for (const auto& t : out.trials) distinct.insert(t.digest);
      RecordProperty(std::string("distinct_in_100_") + name, static_cast<int>(distinct.size()));
      if (std::string(name) == "cuda.atomic") {
        EXPECT_GT(distinct.size(), 1u) << name;
      }
    }
    return;
  }
  FAIL() << "no reduce_sum/n_4194304 in the default catalogue";
}

}  // namespace
}  // namespace d9m
