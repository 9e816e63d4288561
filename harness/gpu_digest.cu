#include "harness/gpu_digest.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "harness/xxh3_hd.h"

namespace d9m {

namespace {

using xxh3::u64;
using xxh3::u8;

// The half stripe's 32 bytes: two 16-byte loads where aligned (every full block of a buffer from
// cudaMalloc), byte loads otherwise (a last stripe at an odd length, or an unaligned caller).
__device__ __noinline__ void load_half_unaligned(u64* d, const u8* p) {
  for (int i = 0; i < 4; ++i) d[i] = xxh3::read64(p + 8 * i);
}
__device__ inline void load_half(u64* d, const u8* p) {
  if ((reinterpret_cast<std::uintptr_t>(p) & 15) == 0) {
    const ulonglong2 a = __ldg(reinterpret_cast<const ulonglong2*>(p));
    const ulonglong2 b = __ldg(reinterpret_cast<const ulonglong2*>(p) + 1);
    d[0] = a.x, d[1] = a.y, d[2] = b.x, d[3] = b.y;
  } else {
    load_half_unaligned(d, p);
  }
}

// Thread (s, h)'s terms for one step of a long input (no data, no terms: zeros).
__device__ inline void step_terms(u64* inc, const u8* in, std::size_t len, std::size_t step, int s, int h,
                                  const u64* block_key, const u64* last_key) {
  for (int i = 0; i < 4; ++i) inc[i] = 0;
  const xxh3::HalfStripe hs = xxh3::half_stripe(in, len, step, s, h);
  if (hs.data) {
    u64 d[4], key[4];
    load_half(d, hs.data);
    for (int i = 0; i < 4; ++i) key[i] = hs.last_key ? last_key[i] : block_key[i];  // no pointer: registers
    xxh3::add_half_terms(inc, d, key);
  }
}

// Summed over the 16 threads of the warp with the same h (xor over lane bits 1..4): afterwards
// every thread holds lanes 4h..4h+3 of the step's sum.
__device__ inline void warp_sum_half(u64* inc) {
  for (int m = 2; m < 32; m <<= 1)
    for (int i = 0; i < 4; ++i) inc[i] += __shfl_xor_sync(0xffffffffu, inc[i], m);
}

__device__ inline void step_sum(u64* inc, const u8* in, std::size_t len, std::size_t step, int s, int h,
                                const u64* block_key, const u64* last_key) {
  step_terms(inc, in, len, step, s, h, block_key, last_key);
  warp_sum_half(inc);
}

// Kept out of line: XXH3's short paths need many registers, and only a last leaf takes them.
__device__ __noinline__ u64 short_leaf(const u8* in, std::size_t len) { return xxh3::hash64(in, len); }

// Leaves: one warp per 4096-byte leaf (coalesced: a warp reads each 1 KiB block at once), warps
// striding over the leaves so the keys are read once per thread. A leaf of 240 bytes or fewer
// (only ever the last) takes XXH3's short paths on one thread.
__global__ void __launch_bounds__(256, 2) leaf_kernel(const u8* data, std::size_t bytes, std::size_t leaves, u64* out) {
  const int t = threadIdx.x & 31, s = t >> 1, h = t & 1;
  u64 block_key[4], last_key[4], scramble_key[4];
  xxh3::half_keys(s, h, block_key, last_key, scramble_key);
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * (blockDim.x >> 5);
  for (std::size_t leaf = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) >> 5; leaf < leaves;
       leaf += warps) {
    const std::size_t off = leaf * kDigestLeafBytes;
    const std::size_t len = bytes - off < kDigestLeafBytes ? bytes - off : kDigestLeafBytes;
    const u8* in = data + off;
    if (len <= 240) {
      if (t == 0) out[leaf] = short_leaf(in, len);
      continue;
    }
    // All of the leaf's loads first (a leaf has at most 3 full blocks and the tail), so a warp
    // waits for memory once per leaf rather than once per block.
    const std::size_t blocks = xxh3::long_blocks(len);
    u64 terms[4][4];
#pragma unroll
    for (int step = 0; step < 4; ++step)
      if (static_cast<std::size_t>(step) <= blocks) step_terms(terms[step], in, len, step, s, h, block_key, last_key);
    u64 acc[4];
    for (int i = 0; i < 4; ++i) acc[i] = xxh3::init_lane(4 * h + i);
#pragma unroll
    for (int step = 0; step < 4; ++step) {
      if (static_cast<std::size_t>(step) > blocks) break;  // the same for the whole warp
      warp_sum_half(terms[step]);
      for (int i = 0; i < 4; ++i)
        acc[i] = static_cast<std::size_t>(step) < blocks ? xxh3::scramble_lane(acc[i] + terms[step][i], scramble_key[i])
                                                         : acc[i] + terms[step][i];
    }
    u64 all[8];
    for (int i = 0; i < 4; ++i) {
      all[i] = acc[i];                                      // lanes 0..3 as thread 0 holds them
      all[4 + i] = __shfl_sync(0xffffffffu, acc[i], 1);  // lanes 4..7 from thread 1
    }
    if (t == 0) out[leaf] = xxh3::merge_accs(all, xxh3::secret() + xxh3::kMergeStart, static_cast<u64>(len) * xxh3::kPrime64_1);
  }
}

// The final XXH3-128 over the leaf values, when they are longer than 240 bytes: first every
// step's sum, one warp per 1 KiB block (they do not depend on one another), then the short
// sequential part -- add and scramble per block, 8 lanes on 8 threads -- and the two merges.
__global__ void step_sums_kernel(const u8* in, std::size_t len, u64* sums) {
  const int t = threadIdx.x & 31, s = t >> 1, h = t & 1;
  u64 block_key[4], last_key[4], scramble_key[4], inc[4];
  xxh3::half_keys(s, h, block_key, last_key, scramble_key);
  const std::size_t steps = xxh3::long_blocks(len) + 1;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * (blockDim.x >> 5);
  for (std::size_t step = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) >> 5; step < steps;
       step += warps) {
    step_sum(inc, in, len, step, s, h, block_key, last_key);
    if (t < 2)
      for (int i = 0; i < 4; ++i) sums[step * 8 + 4 * h + i] = inc[i];
  }
}

constexpr int kChainTile = 256;  // steps staged in shared memory at a time

__global__ void chain_kernel(const u64* sums, std::size_t len, u64* out) {
  __shared__ u64 tile[kChainTile * 8];
  __shared__ u64 acc_all[8];
  const int lane = threadIdx.x;
  const std::size_t blocks = xxh3::long_blocks(len);
  u64 acc = 0, key = 0;
  if (lane < 8) {
    acc = xxh3::init_lane(lane);
    key = xxh3::read64(xxh3::secret() + xxh3::kScrambleKey + 8 * lane);
  }
  for (std::size_t base = 0; base < blocks; base += kChainTile) {
    const std::size_t n = blocks - base < kChainTile ? blocks - base : kChainTile;
    for (std::size_t j = threadIdx.x; j < n * 8; j += blockDim.x) tile[j] = sums[base * 8 + j];
    __syncthreads();
    if (lane < 8)
      for (std::size_t b = 0; b < n; ++b) acc = xxh3::scramble_lane(acc + tile[b * 8 + lane], key);
    __syncthreads();
  }
  if (lane < 8) acc_all[lane] = acc + sums[blocks * 8 + lane];
  __syncthreads();
  if (threadIdx.x == 0) {
    const u8* sec = xxh3::secret();
    out[0] = xxh3::merge_accs(acc_all, sec + xxh3::kSecretSize - 64 - xxh3::kMergeStart, ~(static_cast<u64>(len) * xxh3::kPrime64_2));
    out[1] = xxh3::merge_accs(acc_all, sec + xxh3::kMergeStart, static_cast<u64>(len) * xxh3::kPrime64_1);
  }
}

// Leaf-value arrays of up to kFusedSteps steps (32 KiB: buffers up to 16 MiB) take one launch:
// a warp per step into shared memory, then the chain and the merges.
constexpr std::size_t kFusedSteps = 32;

__global__ void final_fused_kernel(const u8* in, std::size_t len, u64* out) {
  __shared__ u64 sums[kFusedSteps * 8];
  __shared__ u64 acc_all[8];
  const int t = threadIdx.x & 31, s = t >> 1, h = t & 1;
  u64 block_key[4], last_key[4], scramble_key[4], inc[4];
  xxh3::half_keys(s, h, block_key, last_key, scramble_key);
  const std::size_t blocks = xxh3::long_blocks(len);
  for (std::size_t step = threadIdx.x >> 5; step <= blocks; step += blockDim.x >> 5) {
    step_sum(inc, in, len, step, s, h, block_key, last_key);
    if (t < 2)
      for (int i = 0; i < 4; ++i) sums[step * 8 + 4 * h + i] = inc[i];
  }
  __syncthreads();
  if (threadIdx.x < 8) {
    const int lane = threadIdx.x;
    const u64 key = xxh3::read64(xxh3::secret() + xxh3::kScrambleKey + 8 * lane);
    u64 acc = xxh3::init_lane(lane);
    for (std::size_t b = 0; b < blocks; ++b) acc = xxh3::scramble_lane(acc + sums[b * 8 + lane], key);
    acc_all[lane] = acc + sums[blocks * 8 + lane];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const u8* sec = xxh3::secret();
    out[0] = xxh3::merge_accs(acc_all, sec + xxh3::kSecretSize - 64 - xxh3::kMergeStart, ~(static_cast<u64>(len) * xxh3::kPrime64_2));
    out[1] = xxh3::merge_accs(acc_all, sec + xxh3::kMergeStart, static_cast<u64>(len) * xxh3::kPrime64_1);
  }
}

// Short leaf-value arrays (240 bytes or fewer: up to 30 leaves, 120 KiB of data).
__global__ void final_short_kernel(const u64* leaves, std::size_t leaf_count, u64* out) {
  const xxh3::U128 h = xxh3::hash128(leaves, leaf_count * 8);
  out[0] = h.high;
  out[1] = h.low;
}

__device__ long long ordered_bits(float f) {
  const int i = __float_as_int(f);
  return i < 0 ? static_cast<long long>(INT_MIN) - i : i;
}

// Integer atomics: the stats themselves are deterministic whatever the order. With digests
// given, the whole grid returns at once when they are equal.
__global__ void diff_kernel(DType dtype, const void* a, const void* b, std::int64_t n, const u64* digest_a,
                            const u64* digest_b, GpuDiffSlot* d) {
  if (digest_a && digest_a[0] == digest_b[0] && digest_a[1] == digest_b[1]) return;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    double abs_diff;
    unsigned long long ulp;
    if (dtype == DType::f32) {
      const float x = static_cast<const float*>(a)[i], y = static_cast<const float*>(b)[i];
      if (__float_as_int(x) == __float_as_int(y)) continue;
      abs_diff = (isnan(x) || isnan(y)) ? __longlong_as_double(0x7ff0000000000000LL)
                                        : fabs(static_cast<double>(x) - static_cast<double>(y));
      const long long dd = ordered_bits(x) - ordered_bits(y);
      ulp = static_cast<unsigned long long>(dd < 0 ? -dd : dd);
    } else {
      const int x = static_cast<const int*>(a)[i], y = static_cast<const int*>(b)[i];
      if (x == y) continue;
      abs_diff = fabs(static_cast<double>(x) - static_cast<double>(y));
      ulp = static_cast<unsigned long long>(abs_diff);
    }
    atomicAdd(&d->count, 1ULL);
    atomicMax(&d->first_index_complement, ~static_cast<unsigned long long>(i));
    atomicMax(&d->max_ulp, ulp);
    atomicMax(&d->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(abs_diff)));
  }
}

}  // namespace

GpuDigester::GpuDigester(cudaStream_t stream) : stream_(stream), host_(sizeof(GpuDiffSlot)) {
  int device = 0, sms = 0;
  D9M_CUDA_CHECK(cudaGetDevice(&device));
  D9M_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Enough resident warps to keep the memory system busy (8 blocks of 8 warps per SM).
  max_blocks_ = static_cast<unsigned>(std::max(sms, 1) * 8);
}

DiffStats to_diff_stats(const GpuDiffSlot& slot) {
  double max_abs;
  std::memcpy(&max_abs, &slot.max_abs_bits, sizeof max_abs);
  return {static_cast<std::int64_t>(slot.count), max_abs, static_cast<std::int64_t>(slot.max_ulp),
          slot.count ? static_cast<std::int64_t>(~slot.first_index_complement) : -1};
}

void GpuDigester::enqueue_digest(const void* data, std::size_t bytes, u64* digest_slot) {
  const std::size_t leaves = (bytes + kDigestLeafBytes - 1) / kDigestLeafBytes;
  const std::size_t leaf_bytes = leaves * 8;
  const std::size_t steps = leaf_bytes > 240 ? xxh3::long_blocks(leaf_bytes) + 1 : 0;
  if (leaves_.bytes() < std::max<std::size_t>(leaf_bytes, 8)) leaves_ = DeviceBuffer(std::max<std::size_t>(leaf_bytes, 8), stream_);
  if (steps > kFusedSteps && sums_.bytes() < steps * 64) sums_ = DeviceBuffer(steps * 64, stream_);
  const auto blocks_for_warps = [&](std::size_t warps) {
    return static_cast<unsigned>(std::min<std::size_t>((warps + 7) / 8, max_blocks_));
  };
  if (leaves) {
    leaf_kernel<<<blocks_for_warps(leaves), 256, 0, stream_>>>(static_cast<const u8*>(data), bytes, leaves,
                                                                leaves_.get<u64>());
    D9M_CUDA_CHECK_LAUNCH();
  }
  if (steps > kFusedSteps) {
    step_sums_kernel<<<blocks_for_warps(steps), 256, 0, stream_>>>(leaves_.get<u8>(), leaf_bytes, sums_.get<u64>());
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
