#include "harness/core/digest.h"

#include <openssl/evp.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "kernels/common/thread_pool.h"

namespace d9m {

std::string Digest128::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return buf;
}

namespace {

// Leaves per parallel task: 256 leaves = 1 MiB, enough to amortise the hand-off.
constexpr std::size_t kLeavesPerTask = 256;

// Leaves are hashed with the widest vector unit the CPU has: libxxhash's dispatcher picks AVX2
// or AVX-512 at run time (the plain entry point is built for SSE2). Same function, same bits.
std::uint64_t leaf_hash(const void* p, std::size_t len) {
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(p, len);
#else
  return XXH3_64bits(p, len);
#endif
}

void write_lower_hex(const unsigned char* md, unsigned len, char* out) {
  static constexpr char digits[] = "0123456789abcdef";
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = digits[md[i] >> 4];
    out[2 * i + 1] = digits[md[i] & 15];
  }
}

std::string lower_hex(const unsigned char* md, unsigned len) {
  std::string out(2 * std::size_t{len}, '0');
  write_lower_hex(md, len, out.data());
  return out;
}

void store_le64(unsigned char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

Digest128 digest_v1(const void* data, std::size_t bytes, ThreadPool* pool) {
  const auto* p = static_cast<const unsigned char*>(data);
  const std::size_t leaves = (bytes + kDigestLeafBytes - 1) / kDigestLeafBytes;
  std::vector<unsigned char> leaf_bytes(leaves * 8);
  auto hash_leaves = [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t off = i * kDigestLeafBytes;
      const std::size_t len = std::min(kDigestLeafBytes, bytes - off);
      store_le64(&leaf_bytes[i * 8], leaf_hash(p + off, len));
    }
  };
  const std::size_t tasks = (leaves + kLeavesPerTask - 1) / kLeavesPerTask;
  if (pool && tasks > 1) {
    pool->parallel_for(tasks, [&](std::size_t t) {
      hash_leaves(t * kLeavesPerTask, std::min(leaves, (t + 1) * kLeavesPerTask));
    });
  } else {
    hash_leaves(0, leaves);
  }
  const XXH128_hash_t h = XXH3_128bits(leaf_bytes.data(), leaf_bytes.size());
  return {h.high64, h.low64};
}

std::string sha256_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<unsigned char> buf(1 << 20);
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) EVP_DigestUpdate(ctx, buf.data(), n);
  std::fclose(f);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  return lower_hex(md, len);
}

std::string sha256_hex(const std::string& bytes) { return sha256_hex(std::string_view(bytes), {}); }

// The hash chain hashes one short row per trial: the algorithm is fetched from OpenSSL's
// provider once (EVP_Digest with EVP_sha256() fetches it again on every call) and each thread
// reuses one context.
void sha256_into(std::string_view a, std::string_view b, std::string_view c, unsigned char out[32], char* hex) {
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  struct Ctx {
    EVP_MD_CTX* p = EVP_MD_CTX_new();
    ~Ctx() { EVP_MD_CTX_free(p); }
  };
  thread_local Ctx ctx;
  unsigned int len = 0;
  if (!sha256 || !ctx.p || EVP_DigestInit_ex2(ctx.p, sha256, nullptr) != 1 || EVP_DigestUpdate(ctx.p, a.data(), a.size()) != 1 ||
      EVP_DigestUpdate(ctx.p, b.data(), b.size()) != 1 || EVP_DigestUpdate(ctx.p, c.data(), c.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.p, out, &len) != 1 || len != 32)
    throw std::runtime_error("OpenSSL SHA-256 failed");
  if (hex) write_lower_hex(out, 32, hex);
}

std::string sha256_hex(std::string_view a, std::string_view b) {
  unsigned char md[32];
  std::string hex(64, '0');
  sha256_into(a, b, {}, md, hex.data());
  return hex;
}

}  // namespace d9m
