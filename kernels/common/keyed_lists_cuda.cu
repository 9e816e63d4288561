#include "kernels/common/keyed_lists_cuda.h"

#include <cub/device/device_radix_sort.cuh>

#include "kernels/common/keyed_lists.h"
#include "kernels/registry.h"

namespace d9m::cuda {

namespace {

__global__ void number_items_kernel(std::int32_t* items, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) items[i] = static_cast<std::int32_t>(i);
}

// starts[k]: the first sorted position whose key is k or more (starts[keys]: the items listed).
__global__ void starts_kernel(const std::uint32_t* keys_sorted, std::size_t items, std::uint64_t keys, std::int32_t* starts) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k > keys) return;
  std::size_t lo = 0, hi = items;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (keys_sorted[mid] < k) lo = mid + 1;
    else hi = mid;
  }
  starts[k] = static_cast<std::int32_t>(lo);
}

}  // namespace

// Refused before anything is allocated (the variants refuse such plans earlier still, through
// their `unsupported`): a plan past the limits would otherwise first ask for gigabytes.
std::size_t KeyedLists::checked(std::size_t items, std::uint64_t keys) {
  if (const auto why = keyed_lists::unsupported(items, keys, "items", "keys")) throw Unsupported(*why);
  return items;
}

KeyedLists::KeyedLists(std::size_t items, std::uint64_t keys, cudaStream_t stream)
    : stream_(stream), items_(checked(items, keys)), key_count_(keys), keys_(4 * items, stream), keys_sorted_(4 * items, stream),
      items_in_(4 * items, stream), items_sorted_(4 * items, stream), starts_(4 * (keys + 1), stream) {
  while (end_bit_ < 32 && (std::uint64_t{1} << end_bit_) <= keys) ++end_bit_;
  if (items > 0) {
    // The item numbers, once: the sort reads them and writes its sorted copy elsewhere.
    number_items_kernel<<<blocks_for(items), 256, 0, stream>>>(items_in_.get<std::int32_t>(), items);
    D9M_CUDA_CHECK_LAUNCH();
    D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes_, keys_.get<std::uint32_t>(), keys_sorted_.get<std::uint32_t>(),
                                                   items_in_.get<std::int32_t>(), items_sorted_.get<std::int32_t>(), static_cast<int>(items),
                                                   0, end_bit_, stream));
    scratch_ = DeviceBuffer(scratch_bytes_, stream);
  }
}

void KeyedLists::list() {
  cudaStream_t stream = stream_;
  if (items_ > 0) {
    std::size_t scratch_bytes = scratch_bytes_;
    D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch_.get(), scratch_bytes, keys_.get<std::uint32_t>(), keys_sorted_.get<std::uint32_t>(),
                                                   items_in_.get<std::int32_t>(), items_sorted_.get<std::int32_t>(), static_cast<int>(items_),
                                                   0, end_bit_, stream));
  }
  starts_kernel<<<blocks_for(static_cast<std::size_t>(key_count_) + 1), 256, 0, stream>>>(keys_sorted_.get<std::uint32_t>(), items_,
                                                                                         key_count_, starts_.get<std::int32_t>());
  D9M_CUDA_CHECK_LAUNCH();
}

}  // namespace d9m::cuda
