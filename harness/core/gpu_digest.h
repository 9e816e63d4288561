// d9m-digest-v1 and diff stats computed on the device (CUDA builds only). Per trial only the
// 16-byte digest, and for a differing trial the diff stats, cross to the host.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "harness/core/digest.h"
#include "harness/core/evidence.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/tensor.h"

namespace d9m {

// Diff stats as the device accumulates them: zero bytes are the empty state (no difference), so
// a batch of slots is cleared with one memset. first_index is kept complemented (atomicMax of
// ~i is the smallest i).
struct GpuDiffSlot {
  unsigned long long count;
  unsigned long long first_index_complement;
  unsigned long long max_ulp;
  unsigned long long max_abs_bits;  // bits of a non-negative double: ordered like the values
};
DiffStats to_diff_stats(const GpuDiffSlot& slot);

class GpuDigester {
 public:
  explicit GpuDigester(cudaStream_t stream);
  // Digest of `bytes` bytes at device pointer `data`; synchronises the stream.
  Digest128 digest(const void* data, std::size_t bytes);
  // Element-wise comparison of two device buffers of one dtype; synchronises the stream.
  DiffStats diff(DType dtype, const void* first, const void* other, std::int64_t elements);

  // The same, queued on the stream without synchronising, so that a batch of trials costs one
  // round trip: the digest lands in `digest_slot` (device, 2 words: high, low); the diff stats
  // are added into `diff_slot` (device, zeroed beforehand) only if the two digests in device
  // memory differ, so a trial equal to the first costs no comparison at all.
  void enqueue_digest(const void* data, std::size_t bytes, std::uint64_t* digest_slot);
  void enqueue_diff_if_different(DType dtype, const void* first, const void* other, std::int64_t elements,
                                 const std::uint64_t* first_digest, const std::uint64_t* other_digest,
                                 GpuDiffSlot* diff_slot);

 private:
  cudaStream_t stream_;
  unsigned leaf_blocks_ = 1, max_blocks_ = 1;  // grid caps of the leaf and step-sum kernels
  DeviceBuffer leaves_, sums_, result_;
  PinnedHostBuffer host_;  // the synchronous results land here: a pageable copy would be staged
};

}  // namespace d9m
