// XXH3-64 and XXH3-128 (seed 0, default secret) as host/device functions, so that the GPU can
// compute d9m-digest-v1 leaves and the final hash on the device. Written from the XXH3
// specification (xxHash 0.8); unit-tested against libxxhash for every length the digest uses,
// so the device digest and the host digest are the same function.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/common/hd.h"

namespace d9m::xxh3 {

using u8 = std::uint8_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

inline constexpr u64 kPrime32_1 = 0x9E3779B1U, kPrime32_2 = 0x85EBCA77U, kPrime32_3 = 0xC2B2AE3DU;
inline constexpr u64 kPrime64_1 = 0x9E3779B185EBCA87ULL, kPrime64_2 = 0xC2B2AE3D27D4EB4FULL,
                     kPrime64_3 = 0x165667B19E3779F9ULL, kPrime64_4 = 0x85EBCA77C2B2AE63ULL,
                     kPrime64_5 = 0x27D4EB2F165667C5ULL;
inline constexpr u64 kPrimeMx1 = 0x165667919E3779F9ULL, kPrimeMx2 = 0x9FB21C651E98DF25ULL;
inline constexpr int kSecretSize = 192, kStripe = 64, kSecretConsume = 8, kSecretSizeMin = 136;
inline constexpr int kMidStart = 3, kMidLast = 17, kMergeStart = 11, kLastAccStart = 7;

#define D9M_XXH3_SECRET_BYTES                                                                              \
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4,   \
      0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, \
      0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, \
      0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, \
      0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, \
      0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, \
      0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, \
      0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, \
      0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, \
      0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, \
      0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e

// The default secret (XXH3_kSecret), once for the host and once in device constant memory.
#if defined(__CUDACC__)
static __constant__ u8 kSecretDevice[kSecretSize] = {D9M_XXH3_SECRET_BYTES};
#endif
static constexpr u8 kSecretHost[kSecretSize] = {D9M_XXH3_SECRET_BYTES};
#undef D9M_XXH3_SECRET_BYTES

D9M_HD inline const u8* secret() {
#if defined(__CUDA_ARCH__)
  return kSecretDevice;
#else
  return kSecretHost;
#endif
}

D9M_HD inline u64 read64(const u8* p) {
  u64 v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
D9M_HD inline u32 read32(const u8* p) {
  return static_cast<u32>(p[0]) | static_cast<u32>(p[1]) << 8 | static_cast<u32>(p[2]) << 16 | static_cast<u32>(p[3]) << 24;
}
D9M_HD inline u64 swap64(u64 x) {
  u64 r = 0;
  for (int i = 0; i < 8; ++i) r = (r << 8) | ((x >> (8 * i)) & 0xff);
  return r;
}
D9M_HD inline u32 swap32(u32 x) {
  return (x << 24) | ((x << 8) & 0x00ff0000u) | ((x >> 8) & 0x0000ff00u) | (x >> 24);
}
D9M_HD inline u64 rotl64(u64 x, int r) { return (x << r) | (x >> (64 - r)); }
D9M_HD inline u32 rotl32(u32 x, int r) { return (x << r) | (x >> (32 - r)); }

struct U128 {
  u64 low, high;
};

D9M_HD inline U128 mul64to128(u64 a, u64 b) {
#if defined(__CUDA_ARCH__)
  return {a * b, __umul64hi(a, b)};
#else
  __extension__ typedef unsigned __int128 u128;  // GCC and Clang; the device path uses __umul64hi
  const u128 p = static_cast<u128>(a) * b;
  return {static_cast<u64>(p), static_cast<u64>(p >> 64)};
#endif
}
D9M_HD inline u64 mul128_fold64(u64 a, u64 b) {
  const U128 p = mul64to128(a, b);
  return p.low ^ p.high;
}
D9M_HD inline u64 xxh64_avalanche(u64 h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  return h ^ (h >> 32);
}
D9M_HD inline u64 avalanche(u64 h) {
  h ^= h >> 37;
  h *= kPrimeMx1;
  return h ^ (h >> 32);
}
D9M_HD inline u64 rrmxmx(u64 h, u64 len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= kPrimeMx2;
  h ^= (h >> 35) + len;
  h *= kPrimeMx2;
  return h ^ (h >> 28);
}
D9M_HD inline u64 mix16(const u8* in, const u8* sec) {
  return mul128_fold64(read64(in) ^ read64(sec), read64(in + 8) ^ read64(sec + 8));
}

// ---- the long-input loop shared by both widths --------------------------------------------

D9M_HD inline void accumulate_512(u64* acc, const u8* in, const u8* sec) {
  for (int i = 0; i < 8; ++i) {
    const u64 data = read64(in + 8 * i);
    const u64 key = data ^ read64(sec + 8 * i);
    acc[i ^ 1] += data;
    acc[i] += (key & 0xFFFFFFFFULL) * (key >> 32);
  }
}

D9M_HD inline void scramble(u64* acc, const u8* sec) {
  for (int i = 0; i < 8; ++i) {
    u64 a = acc[i];
    a ^= a >> 47;
    a ^= read64(sec + 8 * i);
    acc[i] = a * kPrime32_1;
  }
}

D9M_HD inline void hash_long_loop(u64* acc, const u8* in, std::size_t len) {
  const u8* sec = secret();
  constexpr std::size_t stripes_per_block = (kSecretSize - kStripe) / kSecretConsume;
  constexpr std::size_t block_len = kStripe * stripes_per_block;
  const std::size_t blocks = (len - 1) / block_len;
  for (std::size_t b = 0; b < blocks; ++b) {
    for (std::size_t s = 0; s < stripes_per_block; ++s)
      accumulate_512(acc, in + b * block_len + s * kStripe, sec + s * kSecretConsume);
    scramble(acc, sec + kSecretSize - kStripe);
  }
  const std::size_t stripes = ((len - 1) - block_len * blocks) / kStripe;
  for (std::size_t s = 0; s < stripes; ++s) accumulate_512(acc, in + blocks * block_len + s * kStripe, sec + s * kSecretConsume);
  accumulate_512(acc, in + len - kStripe, sec + kSecretSize - kStripe - kLastAccStart);
}

D9M_HD inline u64 merge_accs(const u64* acc, const u8* sec, u64 start) {
  u64 r = start;
  for (int i = 0; i < 4; ++i) r += mul128_fold64(acc[2 * i] ^ read64(sec + 16 * i), acc[2 * i + 1] ^ read64(sec + 16 * i + 8));
  return avalanche(r);
}

// Lane `lane` of init_acc, without indexing an array (which would put it in local memory).
D9M_HD inline u64 init_lane(int lane) {
  switch (lane) {
    case 0: return kPrime32_3;
    case 1: return kPrime64_1;
    case 2: return kPrime64_2;
    case 3: return kPrime64_3;
    case 4: return kPrime64_4;
    case 5: return kPrime32_2;
    case 6: return kPrime64_5;
    default: return kPrime32_1;
  }
}

D9M_HD inline void init_acc(u64* acc) {
  acc[0] = kPrime32_3; acc[1] = kPrime64_1; acc[2] = kPrime64_2; acc[3] = kPrime64_3;
  acc[4] = kPrime64_4; acc[5] = kPrime32_2; acc[6] = kPrime64_5; acc[7] = kPrime32_1;
}

// ---- the long-input loop split into quarter stripes (the layout of the device digest) -------
//
// accumulate_512 only adds to acc terms that depend on the data and the secret, never on acc
// itself, so one block of 16 stripes acts as acc = scramble(acc + the sum of its stripes' terms),
// and the sums may be formed in any order (64-bit wrapping addition). The device gives a warp one
// 1 KiB block as two coalesced 512-byte loads: in load r (0 or 1) thread t reads the 16 bytes at
// 512r + 16t, i.e. quarter q = t % 4 of stripe s = 8r + t / 4, which feeds exactly lanes 2q and
// 2q + 1 (a lane and its xor-1 partner); the 8 threads with the same q then sum their terms. The
// step after the full blocks (the partial block's stripes, then the last stripe at len - 64 with
// its own keys, in place of stripe 15) is one more such sum, with no scramble after it.
// hash_long_loop_by_quarters below is that layout run on the host, tested against hash_long_loop.

inline constexpr std::size_t kBlockLen = 1024;  // kStripe * (kSecretSize - kStripe) / kSecretConsume
inline constexpr int kStripesPerBlock = 16;
inline constexpr int kScrambleKey = kSecretSize - kStripe;                    // 128
inline constexpr int kLastStripeKey = kSecretSize - kStripe - kLastAccStart;  // 121

D9M_HD inline std::size_t long_blocks(std::size_t len) { return (len - 1) / kBlockLen; }

// Where quarter q of stripe s reads in step `step` of a long input (steps 0..blocks-1 are the
// full blocks, step `blocks` the tail), and whether it takes the last stripe's keys; nullptr
// when it adds nothing in that step.
struct QuarterStripe {
  const u8* data;
  bool last_key;
};
D9M_HD inline QuarterStripe quarter_stripe(const u8* in, std::size_t len, std::size_t step, int s, int q) {
  const std::size_t blocks = long_blocks(len);
  const std::size_t at = static_cast<std::size_t>(s) * kStripe + static_cast<std::size_t>(q) * 16;
  if (step < blocks) return {in + step * kBlockLen + at, false};
  const std::size_t tail_stripes = ((len - 1) - kBlockLen * blocks) / kStripe;  // 0..15
  if (static_cast<std::size_t>(s) < tail_stripes) return {in + blocks * kBlockLen + at, false};
  if (s == kStripesPerBlock - 1) return {in + len - kStripe + static_cast<std::size_t>(q) * 16, true};
  return {nullptr, false};
}

// accumulate_512 restricted to lanes 2q and 2q + 1: `data` and `key` are the quarter's 2 words.
D9M_HD inline void add_quarter_terms(u64* inc, const u64* data, const u64* key) {
  for (int i = 0; i < 2; ++i) {
    const u64 k = data[i] ^ key[i];
    inc[i ^ 1] += data[i];
    inc[i] += (k & 0xFFFFFFFFULL) * (k >> 32);
  }
}

D9M_HD inline u64 scramble_lane(u64 a, u64 key) {
  a ^= a >> 47;
  a ^= key;
  return a * kPrime32_1;
}

// Host model of the device layout (same result as hash_long_loop; see the unit test).
inline void hash_long_loop_by_quarters(u64* acc, const u8* in, std::size_t len) {
  const u8* sec = secret();
  const std::size_t blocks = long_blocks(len);
  for (std::size_t step = 0; step <= blocks; ++step) {
    u64 inc[8] = {};
    for (int s = 0; s < kStripesPerBlock; ++s)
      for (int q = 0; q < 4; ++q) {
        const QuarterStripe qs = quarter_stripe(in, len, step, s, q);
        if (!qs.data) continue;
        u64 data[2], key[2];
        for (int i = 0; i < 2; ++i) {
          data[i] = read64(qs.data + 8 * i);
          key[i] = read64(sec + (qs.last_key ? kLastStripeKey : s * kSecretConsume) + 8 * (2 * q + i));
        }
        add_quarter_terms(inc + 2 * q, data, key);
      }
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] += inc[lane];
      if (step < blocks) acc[lane] = scramble_lane(acc[lane], read64(sec + kScrambleKey + 8 * lane));
    }
  }
}

// ---- XXH3-64 --------------------------------------------------------------------------------

D9M_HD inline u64 hash64(const void* data, std::size_t len) {
  const auto* in = static_cast<const u8*>(data);
  const u8* sec = secret();
  if (len <= 16) {
    if (len > 8) {
      const u64 lo = read64(in) ^ (read64(sec + 24) ^ read64(sec + 32));
      const u64 hi = read64(in + len - 8) ^ (read64(sec + 40) ^ read64(sec + 48));
      return avalanche(len + swap64(lo) + hi + mul128_fold64(lo, hi));
    }
    if (len >= 4) {
      const u64 in64 = read32(in + len - 4) + (static_cast<u64>(read32(in)) << 32);
      return rrmxmx(in64 ^ (read64(sec + 8) ^ read64(sec + 16)), len);
    }
    if (len > 0) {
      const u32 combined = (static_cast<u32>(in[0]) << 16) | (static_cast<u32>(in[len >> 1]) << 24) |
                           static_cast<u32>(in[len - 1]) | (static_cast<u32>(len) << 8);
      return xxh64_avalanche(static_cast<u64>(combined) ^ (read32(sec) ^ read32(sec + 4)));
    }
    return xxh64_avalanche(read64(sec + 56) ^ read64(sec + 64));
  }
  if (len <= 128) {
    u64 acc = len * kPrime64_1;
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += mix16(in + 48, sec + 96);
          acc += mix16(in + len - 64, sec + 112);
        }
        acc += mix16(in + 32, sec + 64);
        acc += mix16(in + len - 48, sec + 80);
      }
      acc += mix16(in + 16, sec + 32);
      acc += mix16(in + len - 32, sec + 48);
    }
    acc += mix16(in, sec);
    acc += mix16(in + len - 16, sec + 16);
    return avalanche(acc);
  }
  if (len <= 240) {
    u64 acc = len * kPrime64_1;
    const int rounds = static_cast<int>(len / 16);
    for (int i = 0; i < 8; ++i) acc += mix16(in + 16 * i, sec + 16 * i);
    acc = avalanche(acc);
    for (int i = 8; i < rounds; ++i) acc += mix16(in + 16 * i, sec + 16 * (i - 8) + kMidStart);
    acc += mix16(in + len - 16, sec + kSecretSizeMin - kMidLast);
    return avalanche(acc);
  }
  u64 acc[8];
  init_acc(acc);
  hash_long_loop(acc, in, len);
  return merge_accs(acc, sec + kMergeStart, static_cast<u64>(len) * kPrime64_1);
}

// ---- XXH3-128 -------------------------------------------------------------------------------

D9M_HD inline U128 mix32(U128 acc, const u8* in1, const u8* in2, const u8* sec) {
  acc.low += mix16(in1, sec);
  acc.low ^= read64(in2) + read64(in2 + 8);
  acc.high += mix16(in2, sec + 16);
  acc.high ^= read64(in1) + read64(in1 + 8);
  return acc;
}

D9M_HD inline U128 finish_mid(U128 acc, std::size_t len) {
  U128 h;
  h.low = acc.low + acc.high;
  h.high = acc.low * kPrime64_1 + acc.high * kPrime64_4 + static_cast<u64>(len) * kPrime64_2;
  h.low = avalanche(h.low);
  h.high = 0 - avalanche(h.high);
  return h;
}

D9M_HD inline U128 hash128(const void* data, std::size_t len) {
  const auto* in = static_cast<const u8*>(data);
  const u8* sec = secret();
  if (len <= 16) {
    if (len > 8) {
      const u64 bitflipl = read64(sec + 32) ^ read64(sec + 40);
      const u64 bitfliph = read64(sec + 48) ^ read64(sec + 56);
      const u64 lo = read64(in);
      u64 hi = read64(in + len - 8);
      U128 m = mul64to128(lo ^ hi ^ bitflipl, kPrime64_1);
      m.low += static_cast<u64>(len - 1) << 54;
      hi ^= bitfliph;
      m.high += hi + (hi & 0xFFFFFFFFULL) * (kPrime32_2 - 1);
      m.low ^= swap64(m.high);
      U128 h = mul64to128(m.low, kPrime64_2);
      h.high += m.high * kPrime64_2;
      return {avalanche(h.low), avalanche(h.high)};
    }
    if (len >= 4) {
      const u64 in64 = read32(in) + (static_cast<u64>(read32(in + len - 4)) << 32);
      const u64 keyed = in64 ^ (read64(sec + 16) ^ read64(sec + 24));
      U128 m = mul64to128(keyed, kPrime64_1 + (static_cast<u64>(len) << 2));
      m.high += m.low << 1;
      m.low ^= m.high >> 3;
      m.low ^= m.low >> 35;
      m.low *= kPrimeMx2;
      m.low ^= m.low >> 28;
      m.high = avalanche(m.high);
      return m;
    }
    if (len > 0) {
      const u32 combinedl = (static_cast<u32>(in[0]) << 16) | (static_cast<u32>(in[len >> 1]) << 24) |
                            static_cast<u32>(in[len - 1]) | (static_cast<u32>(len) << 8);
      const u32 combinedh = rotl32(swap32(combinedl), 13);
      const u64 bitflipl = read32(sec) ^ read32(sec + 4);
      const u64 bitfliph = read32(sec + 8) ^ read32(sec + 12);
      return {xxh64_avalanche(combinedl ^ bitflipl), xxh64_avalanche(combinedh ^ bitfliph)};
    }
    return {xxh64_avalanche(read64(sec + 64) ^ read64(sec + 72)), xxh64_avalanche(read64(sec + 80) ^ read64(sec + 88))};
  }
  if (len <= 128) {
    U128 acc{len * kPrime64_1, 0};
    if (len > 32) {
      if (len > 64) {
        if (len > 96) acc = mix32(acc, in + 48, in + len - 64, sec + 96);
        acc = mix32(acc, in + 32, in + len - 48, sec + 64);
      }
      acc = mix32(acc, in + 16, in + len - 32, sec + 32);
    }
    acc = mix32(acc, in, in + len - 16, sec);
    return finish_mid(acc, len);
  }
  if (len <= 240) {
    const int rounds = static_cast<int>(len / 32);
    U128 acc{len * kPrime64_1, 0};
    for (int i = 0; i < 4; ++i) acc = mix32(acc, in + 32 * i, in + 32 * i + 16, sec + 32 * i);
    acc.low = avalanche(acc.low);
    acc.high = avalanche(acc.high);
    for (int i = 4; i < rounds; ++i) acc = mix32(acc, in + 32 * i, in + 32 * i + 16, sec + kMidStart + 32 * (i - 4));
    acc = mix32(acc, in + len - 16, in + len - 32, sec + kSecretSizeMin - kMidLast - 16);
    return finish_mid(acc, len);
  }
  u64 acc[8];
  init_acc(acc);
  hash_long_loop(acc, in, len);
  return {merge_accs(acc, sec + kMergeStart, static_cast<u64>(len) * kPrime64_1),
          merge_accs(acc, sec + kSecretSize - 64 - kMergeStart, ~(static_cast<u64>(len) * kPrime64_2))};
}

}  // namespace d9m::xxh3
