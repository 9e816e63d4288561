// d9m-digest-v1 (DESIGN.md): the buffer is cut into 4096-byte leaves (the last may be shorter),
// leaf_i = XXH3_64bits(leaf, seed 0) written as 8 little-endian bytes, and the digest is the
// XXH3_128bits (seed 0) of the concatenated leaves; an empty buffer digests zero bytes. It is
// printed as 32 lowercase hex digits in XXH128's canonical form (high half first, big-endian),
// as `xxhsum -H2` prints it. Leaves make the digest independent of how many threads (or GPU
// blocks) compute it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace d9m {

class ThreadPool;

inline constexpr std::size_t kDigestLeafBytes = 4096;

struct Digest128 {
  std::uint64_t high = 0, low = 0;
  bool operator==(const Digest128&) const = default;
  std::string hex() const;
};

// pool may be null (one thread). Threads only change the speed, never the result.
Digest128 digest_v1(const void* data, std::size_t bytes, ThreadPool* pool = nullptr);

// Lowercase hex of a SHA-256 (OpenSSL), for content-addressed keys.
std::string sha256_hex(const std::string& bytes);
// SHA-256 of the concatenation a || b (no copy of either), lower-case hex.
std::string sha256_hex(std::string_view a, std::string_view b);
// SHA-256 of a || b || c as its 32 bytes, and (if hex is not null) its 64 lower-case hex digits,
// with no allocation: the store's hash chain computes one per trial row.
void sha256_into(std::string_view a, std::string_view b, std::string_view c, unsigned char out[32], char* hex = nullptr);
// SHA-256 of a file's bytes, or "" when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace d9m
