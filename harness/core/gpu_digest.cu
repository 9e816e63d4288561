#include "harness/core/gpu_digest.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "harness/core/element_diff.h"
#include "harness/core/xxh3_hd.h"

namespace d9m {

namespace {

using xxh3::u64;
using xxh3::u8;

// A quarter stripe's 16 bytes: one 16-byte load where aligned (every full block of a buffer from
// cudaMalloc), byte loads otherwise (a last stripe at an odd length, or an unaligned caller).
__device__ __noinline__ void load_quarter_unaligned(u64* d, const u8* p) {
  d[0] = xxh3::read64(p);
  d[1] = xxh3::read64(p + 8);
}
__device__ inline void load_quarter(u64* d, const u8* p) {
  if ((reinterpret_cast<std::uintptr_t>(p) & 15) == 0) {
    const ulonglong2 a = __ldg(reinterpret_cast<const ulonglong2*>(p));
    d[0] = a.x, d[1] = a.y;
  } else {
    load_quarter_unaligned(d, p);
  }
}

// The keys as aligned words, read through the L1 cache: a warp's 32 threads read different
// keys, which constant memory would serialise (and byte-wise read64 eight times over).
struct KeyTable {
  u64 word[xxh3::kSecretSize / 8];  // the secret as little-endian words (block and scramble keys)
  u64 last[8];                      // the last stripe's keys, secret + 121 + 8 * lane (unaligned)
  u64 merge_low[8];                 // mergeAccs keys of XXH3-64 and the low half: secret + 11 + 8k
  u64 merge_high[8];                // of XXH3-128's high half: secret + 192 - 64 - 11 + 8k
};
constexpr u64 secret_word_at(int offset) {
  u64 v = 0;
  for (int b = 7; b >= 0; --b) v = (v << 8) | xxh3::kSecretHost[offset + b];
  return v;
}
constexpr KeyTable make_key_table() {
  KeyTable k{};
  for (int w = 0; w < xxh3::kSecretSize / 8; ++w) k.word[w] = secret_word_at(8 * w);
  for (int l = 0; l < 8; ++l) {
    k.last[l] = secret_word_at(xxh3::kLastStripeKey + 8 * l);
    k.merge_low[l] = secret_word_at(xxh3::kMergeStart + 8 * l);
    k.merge_high[l] = secret_word_at(xxh3::kSecretSize - 64 - xxh3::kMergeStart + 8 * l);
  }
  return k;
}
__device__ const KeyTable kKeys = make_key_table();

// xxh3::merge_accs with its keys from the table (8 word loads instead of 64 byte loads).
__device__ inline u64 merge_accs(const u64* acc, const u64* key, u64 start) {
  u64 r = start;
  for (int i = 0; i < 4; ++i) r += xxh3::mul128_fold64(acc[2 * i] ^ __ldg(&key[2 * i]), acc[2 * i + 1] ^ __ldg(&key[2 * i + 1]));
  return xxh3::avalanche(r);
}

// One thread's view of the warp layout (xxh3_hd.h): in load r it reads quarter q = t % 4 of
// stripe 8r + t / 4, feeding lanes 2q and 2q + 1. After the reduce-scatter below it holds the
// sum of lane 2q + bit4(t), replicated on the 4 threads that differ in bits 2 and 3.
struct WarpSlot {
  int t, q, row, lane;
  u64 block_key[4], last_key[2], scramble_key;  // block_key[2r + i]: stripe 8r + row, lane 2q + i
  __device__ explicit WarpSlot(int thread) : t(thread), q(thread & 3), row(thread >> 2) {
    lane = 2 * q + ((t >> 4) & 1);
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < 2; ++i) block_key[2 * r + i] = __ldg(&kKeys.word[8 * r + row + 2 * q + i]);
    for (int i = 0; i < 2; ++i) last_key[i] = __ldg(&kKeys.last[2 * q + i]);
    scramble_key = __ldg(&kKeys.word[xxh3::kScrambleKey / 8 + lane]);
  }
  // The thread holding lane l after the reduce-scatter (bits 2 and 3 clear).
  __device__ static int holder(int l) { return 16 * (l & 1) + (l >> 1); }
};

// The thread's terms for one step of a long input, lanes 2q and 2q + 1 (no data: zeros). Both
// loads are issued before either is used.
__device__ inline void step_terms(u64* inc, const u8* in, std::size_t len, std::size_t step, const WarpSlot& w) {
  inc[0] = inc[1] = 0;
  const xxh3::QuarterStripe qs[2] = {xxh3::quarter_stripe(in, len, step, w.row, w.q),
                                     xxh3::quarter_stripe(in, len, step, 8 + w.row, w.q)};
  u64 d[2][2];
  for (int r = 0; r < 2; ++r)
    if (qs[r].data) load_quarter(d[r], qs[r].data);
  for (int r = 0; r < 2; ++r)
    if (qs[r].data) {
      u64 key[2];
      for (int i = 0; i < 2; ++i) key[i] = qs[r].last_key ? w.last_key[i] : w.block_key[2 * r + i];  // registers
      xxh3::add_quarter_terms(inc, d[r], key);
    }
}

// Sums the 8 threads with the same q (lane bits 2..4) and leaves each thread one lane, w.lane:
// exchange one of the 2 values across bit 4, then add across bits 3 and 2 -- 3 shuffles of 64
// bits per step.
__device__ inline u64 reduce_scatter(const u64* inc, const WarpSlot& w) {
  const bool b4 = (w.t >> 4) & 1;
  u64 m = (b4 ? inc[1] : inc[0]) + __shfl_xor_sync(0xffffffffu, b4 ? inc[0] : inc[1], 16);
  m += __shfl_xor_sync(0xffffffffu, m, 8);
  m += __shfl_xor_sync(0xffffffffu, m, 4);
  return m;
}

// A leaf's XXH3-64 from its accumulators, one lane per thread: gathered, merged, written by
// thread 0.
__device__ inline void store_leaf(u64 acc, std::size_t len, const WarpSlot& w, u64* out) {
  u64 all[8];
  for (int l = 0; l < 8; ++l) all[l] = __shfl_sync(0xffffffffu, acc, WarpSlot::holder(l));
  if (w.t == 0) *out = merge_accs(all, kKeys.merge_low, static_cast<u64>(len) * xxh3::kPrime64_1);
}

// A last leaf of 240 bytes or fewer takes XXH3's short paths, on one thread of its own launch:
// inside leaf_kernel their registers would be the whole kernel's.
__global__ void short_leaf_kernel(const u8* in, std::size_t len, u64* out) { *out = xxh3::hash64(in, len); }

// Leaves of more than 240 bytes: one warp per 4096-byte leaf (coalesced: each of a warp's loads
// covers 512 bytes), warps striding over the leaves so the keys are read once per thread.
__global__ void __launch_bounds__(256, 3) leaf_kernel(const u8* data, std::size_t bytes, std::size_t leaves, u64* out) {
  const WarpSlot w(threadIdx.x & 31);
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * (blockDim.x >> 5);
  for (std::size_t leaf = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) >> 5; leaf < leaves;
       leaf += warps) {
    const std::size_t off = leaf * kDigestLeafBytes;
    const std::size_t len = bytes - off < kDigestLeafBytes ? bytes - off : kDigestLeafBytes;
    const u8* in = data + off;
    if (len == kDigestLeafBytes && (reinterpret_cast<std::uintptr_t>(in) & 15) == 0) {
      // A whole aligned leaf -- nearly every leaf. Its 3 blocks and its tail (15 stripes, then
      // the last stripe, which for 4096 bytes sits exactly where stripe 15 would) are the leaf
      // read straight through: load k of the thread is the 16 bytes at 512k + 16t. All 8 loads
      // are issued before any is used, so the warp waits for memory once per leaf.
      ulonglong2 v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = __ldg(reinterpret_cast<const ulonglong2*>(in) + w.t + 32 * k);
      u64 acc = xxh3::init_lane(w.lane);
#pragma unroll
      for (int step = 0; step < 4; ++step) {
        u64 inc[2] = {0, 0};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const bool last = step == 3 && r == 1 && w.row == 7;
          const u64 d[2] = {v[2 * step + r].x, v[2 * step + r].y};
          const u64 key[2] = {last ? w.last_key[0] : w.block_key[2 * r], last ? w.last_key[1] : w.block_key[2 * r + 1]};
          xxh3::add_quarter_terms(inc, d, key);
        }
        acc += reduce_scatter(inc, w);
        if (step < 3) acc = xxh3::scramble_lane(acc, w.scramble_key);
      }
      store_leaf(acc, len, w, out + leaf);
      continue;
    }
    // Any other leaf (the last one, or an unaligned caller's): step by step through the layout.
    const std::size_t blocks = xxh3::long_blocks(len);
    u64 terms[4][2];
#pragma unroll
    for (int step = 0; step < 4; ++step)
      if (static_cast<std::size_t>(step) <= blocks) step_terms(terms[step], in, len, step, w);
    u64 acc = xxh3::init_lane(w.lane);
#pragma unroll
    for (int step = 0; step < 4; ++step) {
      if (static_cast<std::size_t>(step) > blocks) break;  // the same for the whole warp
      acc += reduce_scatter(terms[step], w);
      if (static_cast<std::size_t>(step) < blocks) acc = xxh3::scramble_lane(acc, w.scramble_key);
    }
    store_leaf(acc, len, w, out + leaf);
  }
}

// The final XXH3-128 over the leaf values, when they are longer than 240 bytes: first every
// step's sum, one warp per 1 KiB block (they do not depend on one another), then the short
// sequential part -- add and scramble per block, 8 lanes on 8 threads -- and the two merges.
__device__ inline void step_sums(const u8* in, std::size_t len, std::size_t first_step, std::size_t stride, u64* sums) {
  const WarpSlot w(threadIdx.x & 31);
  const std::size_t steps = xxh3::long_blocks(len) + 1;
  for (std::size_t step = first_step; step < steps; step += stride) {
    u64 inc[2];
    step_terms(inc, in, len, step, w);
    const u64 sum = reduce_scatter(inc, w);
    if (((w.t >> 2) & 3) == 0) sums[step * 8 + w.lane] = sum;
  }
}

// Lane `lane` of the chain over `n` step sums: add, then scramble, block after block.
__device__ inline u64 chain_lane(u64 acc, const u64* sums, std::size_t n, int lane) {
  const u64 key = kKeys.word[xxh3::kScrambleKey / 8 + lane];
#pragma unroll 8
  for (std::size_t b = 0; b < n; ++b) acc = xxh3::scramble_lane(acc + sums[b * 8 + lane], key);
  return acc;
}

// XXH3-128's two merges, written high half first as the digest stores them.
__device__ inline void merge_final(const u64* acc_all, std::size_t len, u64* out) {
  out[0] = merge_accs(acc_all, kKeys.merge_high, ~(static_cast<u64>(len) * xxh3::kPrime64_2));
  out[1] = merge_accs(acc_all, kKeys.merge_low, static_cast<u64>(len) * xxh3::kPrime64_1);
}

__global__ void step_sums_kernel(const u8* in, std::size_t len, u64* sums) {
  step_sums(in, len, (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) >> 5,
            static_cast<std::size_t>(gridDim.x) * (blockDim.x >> 5), sums);
}

constexpr int kChainTile = 256;  // steps staged in shared memory at a time

__global__ void chain_kernel(const u64* sums, std::size_t len, u64* out) {
  __shared__ u64 tile[kChainTile * 8];
  __shared__ u64 acc_all[8];
  const int lane = threadIdx.x;
  const std::size_t blocks = xxh3::long_blocks(len);
  u64 acc = lane < 8 ? xxh3::init_lane(lane) : 0;
  for (std::size_t base = 0; base < blocks; base += kChainTile) {
    const std::size_t n = blocks - base < kChainTile ? blocks - base : kChainTile;
    for (std::size_t j = threadIdx.x; j < n * 8; j += blockDim.x) tile[j] = sums[base * 8 + j];
    __syncthreads();
    if (lane < 8) acc = chain_lane(acc, tile, n, lane);
    __syncthreads();
  }
  if (lane < 8) acc_all[lane] = acc + sums[blocks * 8 + lane];
  __syncthreads();
  if (threadIdx.x == 0) merge_final(acc_all, len, out);
}

// Leaf-value arrays of up to kFusedSteps steps (32 KiB: buffers up to 16 MiB) take one launch:
// a warp per step into shared memory, then the chain and the merges.
constexpr std::size_t kFusedSteps = 32;

__global__ void final_fused_kernel(const u8* in, std::size_t len, u64* out) {
  __shared__ u64 sums[kFusedSteps * 8];
  __shared__ u64 acc_all[8];
  step_sums(in, len, threadIdx.x >> 5, blockDim.x >> 5, sums);
  __syncthreads();
  const std::size_t blocks = xxh3::long_blocks(len);
  if (threadIdx.x < 8) {
    const int lane = threadIdx.x;
    acc_all[lane] = chain_lane(xxh3::init_lane(lane), sums, blocks, lane) + sums[blocks * 8 + lane];
  }
  __syncthreads();
  if (threadIdx.x == 0) merge_final(acc_all, len, out);
}

// Short leaf-value arrays (240 bytes or fewer: up to 30 leaves, 120 KiB of data).
__global__ void final_short_kernel(const u64* leaves, std::size_t leaf_count, u64* out) {
  const xxh3::U128 h = xxh3::hash128(leaves, leaf_count * 8);
  out[0] = h.high;
  out[1] = h.low;
}

// Integer atomics: the stats themselves are deterministic whatever the order. With digests
// given, the whole grid returns at once when they are equal.
__global__ void diff_kernel(DType dtype, const void* a, const void* b, std::int64_t n, const u64* digest_a,
                            const u64* digest_b, GpuDiffSlot* d) {
  if (digest_a && digest_a[0] == digest_b[0] && digest_a[1] == digest_b[1]) return;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    ElementDiff e;
    if (!diff_element(dtype, a, b, i, e)) continue;
    atomicAdd(&d->count, 1ULL);
    atomicMax(&d->first_index_complement, ~static_cast<unsigned long long>(i));
    atomicMax(&d->max_ulp, static_cast<unsigned long long>(e.ulp));
    atomicMax(&d->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(e.abs_diff)));
  }
}

}  // namespace

GpuDigester::GpuDigester(cudaStream_t stream) : stream_(stream), host_(sizeof(GpuDiffSlot)) {
  int device = 0, sms = 0, leaf_blocks_per_sm = 0;
  D9M_CUDA_CHECK(cudaGetDevice(&device));
  D9M_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  D9M_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&leaf_blocks_per_sm, leaf_kernel, 256, 0));
  sms = std::max(sms, 1);
  // The leaf kernel's warps stride over the leaves: one wave of resident blocks covers any size
  // with no partial last wave. The step sums are few; 8 blocks of 8 warps per SM is plenty.
  leaf_blocks_ = static_cast<unsigned>(sms * std::max(leaf_blocks_per_sm, 1));
  max_blocks_ = static_cast<unsigned>(sms * 8);
}

DiffStats to_diff_stats(const GpuDiffSlot& slot) {
  double max_abs;
  std::memcpy(&max_abs, &slot.max_abs_bits, sizeof max_abs);
  return {static_cast<std::int64_t>(slot.count), max_abs, static_cast<std::int64_t>(std::min<unsigned long long>(slot.max_ulp, 0x7fffffffffffffffull)),
          slot.count ? static_cast<std::int64_t>(~slot.first_index_complement) : -1};
}

void GpuDigester::enqueue_digest(const void* data, std::size_t bytes, u64* digest_slot) {
  const std::size_t leaves = (bytes + kDigestLeafBytes - 1) / kDigestLeafBytes;
  const std::size_t leaf_bytes = leaves * 8;
  const std::size_t steps = leaf_bytes > 240 ? xxh3::long_blocks(leaf_bytes) + 1 : 0;
  if (leaves_.bytes() < std::max<std::size_t>(leaf_bytes, 8)) leaves_ = DeviceBuffer(std::max<std::size_t>(leaf_bytes, 8), stream_);
  if (steps > kFusedSteps && sums_.bytes() < steps * 64) sums_ = DeviceBuffer(steps * 64, stream_);
  const auto blocks_for_warps = [](std::size_t warps, unsigned cap) {
    return static_cast<unsigned>(std::min<std::size_t>((warps + 7) / 8, cap));
  };
  const std::size_t last_len = bytes - (leaves ? (leaves - 1) * kDigestLeafBytes : 0);
  const std::size_t long_leaves = leaves && last_len <= 240 ? leaves - 1 : leaves;
  if (long_leaves) {
    leaf_kernel<<<blocks_for_warps(long_leaves, leaf_blocks_), 256, 0, stream_>>>(static_cast<const u8*>(data), bytes, long_leaves,
                                                                     leaves_.get<u64>());
    D9M_CUDA_CHECK_LAUNCH();
  }
  if (long_leaves < leaves) {
    short_leaf_kernel<<<1, 1, 0, stream_>>>(static_cast<const u8*>(data) + (leaves - 1) * kDigestLeafBytes, last_len,
                                            leaves_.get<u64>() + leaves - 1);
    D9M_CUDA_CHECK_LAUNCH();
  }
  if (steps > kFusedSteps) {
    step_sums_kernel<<<blocks_for_warps(steps, max_blocks_), 256, 0, stream_>>>(leaves_.get<u8>(), leaf_bytes, sums_.get<u64>());
    D9M_CUDA_CHECK_LAUNCH();
    chain_kernel<<<1, 256, 0, stream_>>>(sums_.get<u64>(), leaf_bytes, digest_slot);
  } else if (steps) {
    final_fused_kernel<<<1, static_cast<unsigned>(32 * steps), 0, stream_>>>(leaves_.get<u8>(), leaf_bytes, digest_slot);
  } else {
    final_short_kernel<<<1, 1, 0, stream_>>>(leaves_.get<u64>(), leaves, digest_slot);
  }
  D9M_CUDA_CHECK_LAUNCH();
}

void GpuDigester::enqueue_diff_if_different(DType dtype, const void* first, const void* other, std::int64_t elements,
                                            const u64* first_digest, const u64* other_digest, GpuDiffSlot* diff_slot) {
  const unsigned blocks = std::min<unsigned>(blocks_for(static_cast<std::size_t>(elements)), 4096);
  diff_kernel<<<std::max(blocks, 1u), 256, 0, stream_>>>(dtype, first, other, elements, first_digest, other_digest, diff_slot);
  D9M_CUDA_CHECK_LAUNCH();
}

Digest128 GpuDigester::digest(const void* data, std::size_t bytes) {
  if (result_.bytes() < sizeof(GpuDiffSlot)) result_ = DeviceBuffer(sizeof(GpuDiffSlot), stream_);
  enqueue_digest(data, bytes, result_.get<u64>());
  auto* h = host_.get<std::uint64_t>();
  D9M_CUDA_CHECK(cudaMemcpyAsync(h, result_.get(), 16, cudaMemcpyDeviceToHost, stream_));
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return {h[0], h[1]};
}

DiffStats GpuDigester::diff(DType dtype, const void* first, const void* other, std::int64_t elements) {
  if (result_.bytes() < sizeof(GpuDiffSlot)) result_ = DeviceBuffer(sizeof(GpuDiffSlot), stream_);
  D9M_CUDA_CHECK(cudaMemsetAsync(result_.get(), 0, sizeof(GpuDiffSlot), stream_));
  enqueue_diff_if_different(dtype, first, other, elements, nullptr, nullptr, result_.get<GpuDiffSlot>());
  auto* d = host_.get<GpuDiffSlot>();
  D9M_CUDA_CHECK(cudaMemcpyAsync(d, result_.get(), sizeof *d, cudaMemcpyDeviceToHost, stream_));
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return to_diff_stats(*d);
}

}  // namespace d9m
