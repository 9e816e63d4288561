// d9m-digest-v1 against a plain streaming read of the same buffer: the digest is worth its
// cost only if it runs near memory speed. Compare the bytes_per_second of BM_DigestV1/<bytes>
// with BM_MemoryRead/<bytes> in one run (these machines are noisy).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "harness/core/digest.h"
#include "kernels/common/thread_pool.h"

namespace {

std::vector<std::uint64_t> buffer(std::int64_t bytes) {
  std::vector<std::uint64_t> b(static_cast<std::size_t>(bytes) / 8);
  std::iota(b.begin(), b.end(), 1);
  return b;
}

void BM_MemoryRead(benchmark::State& state) {
  const auto b = buffer(state.range(0));
  for (auto _ : state) {
    // Four accumulators so the loop is bound by loads, not by one add chain.
    std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (std::size_t i = 0; i + 3 < b.size(); i += 4) {
      s0 += b[i];
      s1 += b[i + 1];
      s2 += b[i + 2];
      s3 += b[i + 3];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_DigestV1(benchmark::State& state) {
  const auto b = buffer(state.range(0));
  const auto threads = static_cast<unsigned>(state.range(1));
  d9m::ThreadPool pool(threads);
  for (auto _ : state)
    benchmark::DoNotOptimize(d9m::digest_v1(b.data(), b.size() * 8, threads > 1 ? &pool : nullptr));
  state.SetBytesProcessed(state.iterations() * state.range(0));
  state.counters["threads"] = threads;
}

}  // namespace

BENCHMARK(BM_MemoryRead)->RangeMultiplier(16)->Range(4 << 10, 256 << 20)->UseRealTime();
// One thread, then doubling up to every hardware thread of the machine it runs on (the scaling).
std::vector<std::int64_t> thread_counts() {
  const std::int64_t all = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::int64_t> counts;
  for (std::int64_t t = 1; t < all; t *= 2) counts.push_back(t);
  counts.push_back(all);
  return counts;
}

BENCHMARK(BM_DigestV1)
    ->ArgsProduct({benchmark::CreateRange(4 << 10, 256 << 20, 16), thread_counts()})
    ->ArgNames({"bytes", "threads"})
    ->UseRealTime();  // worker threads do not show in the main thread's CPU time
