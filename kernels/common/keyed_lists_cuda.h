// Items grouped by key on the device, for the gather forms that must visit, per output row, the
// inputs that reach it (the scatter family's update rows, crop_and_resize's crop rows): a key per
// item, then CUB's radix sort of (key, item) pairs, which is stable (a key's items stay in
// increasing item order, the reference order), then each key's start by binary search in the
// sorted keys. Every buffer and CUB's scratch are allocated when the plan is known (a variant's
// prepare()): a call allocates nothing and reads nothing back, so the trial loop never waits on it.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/cuda_check.h"

namespace d9m::cuda {

class KeyedLists {
 public:
  // `items` items, keys 0..keys - 1; key `keys` (none) lists an item nowhere: it sorts last.
  // Plans past keyed_lists::unsupported() are the caller's to refuse first (throws Unsupported).
  // Its memory is keyed_lists::bytes(items, keys) at most.
  KeyedLists(std::size_t items, std::uint64_t keys, cudaStream_t stream);

  // Where the caller writes item i's key, before list().
  std::uint32_t* item_keys() const { return keys_.get<std::uint32_t>(); }
  std::uint32_t none() const { return static_cast<std::uint32_t>(key_count_); }

  // Sorts the items by key and finds each key's start, enqueued on the stream the lists were made
  // on (the one their buffers belong to).
  void list();

  // After list(): the items of key k are items_by_key()[starts()[k] .. starts()[k + 1]), in
  // increasing order (starts() has keys + 1 entries; the last is how many items are listed).
  const std::int32_t* items_by_key() const { return items_sorted_.get<std::int32_t>(); }
  const std::int32_t* starts() const { return starts_.get<std::int32_t>(); }

 private:
  static std::size_t checked(std::size_t items, std::uint64_t keys);  // items, or throws Unsupported
  cudaStream_t stream_;
  std::size_t items_ = 0;
  std::uint64_t key_count_ = 0;
  int end_bit_ = 1;  // the keys' significant bits: 0..keys
  DeviceBuffer keys_, keys_sorted_, items_in_, items_sorted_, starts_, scratch_;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace d9m::cuda
