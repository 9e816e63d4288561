#include "harness/gpu_digest.h"

#include <cstring>

#include "harness/xxh3_hd.h"

namespace d9m {

namespace {

// One thread per 4096-byte leaf. (A warp per leaf would read memory coalesced; this is the
// simple form that is bit-equal by construction -- the same function as the host's.)
__global__ void leaf_kernel(const unsigned char* data, std::size_t bytes, std::size_t leaves, std::uint64_t* out) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= leaves) return;
  const std::size_t off = i * kDigestLeafBytes;
  const std::size_t len = bytes - off < kDigestLeafBytes ? bytes - off : kDigestLeafBytes;
  out[i] = xxh3::hash64(data + off, len);  // little-endian in memory, as the digest defines
}

__global__ void final_kernel(const std::uint64_t* leaves, std::size_t leaf_count, std::uint64_t* out) {
  const xxh3::U128 h = xxh3::hash128(leaves, leaf_count * 8);
  out[0] = h.high;
  out[1] = h.low;
}

struct DeviceDiff {
  unsigned long long count;
  long long first_index;
  unsigned long long max_ulp;
  unsigned long long max_abs_bits;  // bits of a non-negative double: ordered like the values
};

__device__ long long ordered_bits(float f) {
  const int i = __float_as_int(f);
  return i < 0 ? static_cast<long long>(INT_MIN) - i : i;
}

__global__ void diff_kernel(DType dtype, const void* a, const void* b, std::int64_t n, DeviceDiff* d) {
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
    // Integer atomics: the stats themselves are deterministic whatever the order.
    atomicAdd(&d->count, 1ULL);
    atomicMin(&d->first_index, static_cast<long long>(i));
    atomicMax(&d->max_ulp, ulp);
    atomicMax(&d->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(abs_diff)));
  }
}

}  // namespace

Digest128 GpuDigester::digest(const void* data, std::size_t bytes) {
  const std::size_t leaves = (bytes + kDigestLeafBytes - 1) / kDigestLeafBytes;
  if (leaves_.bytes() < std::max<std::size_t>(leaves, 1) * 8) leaves_ = DeviceBuffer(std::max<std::size_t>(leaves, 1) * 8, stream_);
  if (result_.bytes() < sizeof(DeviceDiff)) result_ = DeviceBuffer(sizeof(DeviceDiff), stream_);
  if (leaves) {
    leaf_kernel<<<blocks_for(leaves, 128), 128, 0, stream_>>>(static_cast<const unsigned char*>(data), bytes, leaves,
                                                         leaves_.get<std::uint64_t>());
    D9M_CUDA_CHECK_LAUNCH();
  }
  final_kernel<<<1, 1, 0, stream_>>>(leaves_.get<std::uint64_t>(), leaves, result_.get<std::uint64_t>());
  D9M_CUDA_CHECK_LAUNCH();
  std::uint64_t h[2];
  D9M_CUDA_CHECK(cudaMemcpyAsync(h, result_.get(), sizeof h, cudaMemcpyDeviceToHost, stream_));
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return {h[0], h[1]};
}

DiffStats GpuDigester::diff(DType dtype, const void* first, const void* other, std::int64_t elements) {
  if (result_.bytes() < sizeof(DeviceDiff)) result_ = DeviceBuffer(sizeof(DeviceDiff), stream_);
  DeviceDiff init{0, LLONG_MAX, 0, 0};
  D9M_CUDA_CHECK(cudaMemcpyAsync(result_.get(), &init, sizeof init, cudaMemcpyHostToDevice, stream_));
  const unsigned blocks = std::min<unsigned>(blocks_for(static_cast<std::size_t>(elements)), 4096);
  diff_kernel<<<std::max(blocks, 1u), 256, 0, stream_>>>(dtype, first, other, elements, result_.get<DeviceDiff>());
  D9M_CUDA_CHECK_LAUNCH();
  DeviceDiff d{};
  D9M_CUDA_CHECK(cudaMemcpyAsync(&d, result_.get(), sizeof d, cudaMemcpyDeviceToHost, stream_));
  D9M_CUDA_CHECK(cudaStreamSynchronize(stream_));
  double max_abs;
  std::memcpy(&max_abs, &d.max_abs_bits, sizeof max_abs);
  return {static_cast<std::int64_t>(d.count), max_abs, static_cast<std::int64_t>(d.max_ulp),
          d.count ? d.first_index : -1};
}

}  // namespace d9m
