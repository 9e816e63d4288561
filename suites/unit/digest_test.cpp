// d9m-digest-v1 and CounterRng against vectors computed independently in Python
// (suites/digest/make_vectors.py, with the xxhash package and a plain SplitMix64).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "harness/core/digest.h"
#include "kernels/common/counter_rng.h"
#include "kernels/common/fill.h"
#include "kernels/common/thread_pool.h"
#include "source_dir.h"

namespace d9m {
namespace {

nlohmann::json vectors() {
  std::ifstream in(test::source_path("suites/digest/vectors.json"));
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<unsigned char> pattern(std::size_t n) {
  std::vector<unsigned char> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((i * 31 + (i >> 8) * 7 + 11) & 0xff);
  return b;
}

TEST(DigestV1, MatchesIndependentVectors) {
  const auto v = vectors();
  ASSERT_GE(v["digest_v1"].size(), 8u);
  for (const auto& c : v["digest_v1"]) {
    const auto n = c["length"].get<std::size_t>();
    const auto buf = pattern(n);
    EXPECT_EQ(digest_v1(buf.data(), n).hex(), c["digest"].get<std::string>()) << "length " << n;
  }
}

TEST(DigestV1, EmptyBufferIsXxh128OfNothing) {
  // `printf '' | xxhsum -H2` prints this.
  EXPECT_EQ(digest_v1(nullptr, 0).hex(), "99aa06d3014798d86001c324468d497f");
}

TEST(DigestV1, ThreadCountDoesNotChangeTheDigest) {
  const auto buf = pattern(5 * (1 << 20) + 123);
  const std::string one = digest_v1(buf.data(), buf.size()).hex();
  for (unsigned t : {1u, 2u, 3u, 8u}) {
    ThreadPool pool(t);
    EXPECT_EQ(digest_v1(buf.data(), buf.size(), &pool).hex(), one) << t << " threads";
  }
}

TEST(DigestV1, EveryByteMatters) {
  auto buf = pattern(3 * 4096 + 5);
  const auto base = digest_v1(buf.data(), buf.size());
  for (std::size_t i : {std::size_t{0}, std::size_t{4095}, std::size_t{4096}, buf.size() - 1}) {
    buf[i] ^= 1;
    EXPECT_NE(digest_v1(buf.data(), buf.size()), base) << "byte " << i;
    buf[i] ^= 1;
  }
  EXPECT_NE(digest_v1(buf.data(), buf.size() - 1), base) << "length matters";
}

TEST(CounterRng, MatchesIndependentVectors) {
  const auto v = vectors();  // not vectors()["..."] in the loop head: the temporary would die first
  for (const auto& c : v["counter_rng"]) {
    const CounterRng rng(c["seed"].get<std::uint64_t>(), c["stream"].get<std::uint64_t>());
    EXPECT_EQ(rng.bits(c["index"].get<std::uint64_t>()), std::stoull(c["bits"].get<std::string>(), nullptr, 16));
  }
}

TEST(Fill, ZipfIdsMatchIndependentVectors) {
  const auto v = vectors();
  ASSERT_FALSE(v["zipf_ids"].empty());
  for (const auto& c : v["zipf_ids"]) {
    const auto expected = c["ids"].get<std::vector<std::int32_t>>();
    const TensorDesc desc{"ids", DType::i32, {static_cast<std::int64_t>(expected.size())}};
    std::vector<std::int32_t> ids(expected.size());
    FillTarget t{desc, ids.data(), c["seed"].get<std::uint64_t>(), c["stream"].get<std::uint64_t>()};
    fill::zipf_integers(t, c["n"].get<std::int32_t>());
    EXPECT_EQ(ids, expected) << "seed " << c["seed"] << ", stream " << c["stream"] << ", n " << c["n"];
  }
}

TEST(Fill, ZipfThresholdsAreTheSpecifiedBits) {
  const auto v = vectors();
  ASSERT_FALSE(v["zipf_thresholds"].empty());
  for (const auto& c : v["zipf_thresholds"]) {
    const auto n = c["n"].get<std::int32_t>();
    const std::vector<std::uint64_t> t = fill::zipf_thresholds(n);
    ASSERT_EQ(t.size(), static_cast<std::size_t>(n));
    std::string bytes;  // little-endian, as the Python generator packs them
    for (std::uint64_t x : t)
      for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>((x >> (8 * b)) & 0xff));
    EXPECT_EQ(sha256_hex(bytes), c["sha256_le_u64"].get<std::string>()) << "n " << n;
    for (const auto& [k, value] : c["some"].items())
      EXPECT_EQ(t.at(std::stoul(k)), std::stoull(value.get<std::string>())) << "n " << n << ", t_" << k;
  }
}

TEST(CounterRng, FloatsAreOnTheExactGrid) {
  const CounterRng rng(42, 3);
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const float f = rng.unit_symmetric(i);
    EXPECT_GE(f, -1.0f);
    EXPECT_LT(f, 1.0f);
    EXPECT_EQ(f * 0x1p23f, static_cast<float>(static_cast<std::int32_t>(f * 0x1p23f)));
    EXPECT_LT(rng.below(i, 7), 7u);
  }
}

TEST(ThreadPool, RunsEveryTaskOnceAndPropagatesErrors) {
  ThreadPool pool(4);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(97);
    pool.parallel_for(hits.size(), [&](std::size_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  EXPECT_THROW(pool.parallel_for(10, [](std::size_t i) { if (i == 5) throw std::runtime_error("x"); }),
               std::runtime_error);
  std::atomic<int> after{0};
  pool.parallel_for(10, [&](std::size_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 10);
}

}  // namespace
}  // namespace d9m
