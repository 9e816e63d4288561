// The device's keyed lists (kernels/common/keyed_lists_cuda.h), which the scatter and
// crop_and_resize gathers read their reference order from: every key's items, in increasing item
// order, exactly as a stable sort on the host lists them; items keyed `none` nowhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "harness/exec/executor.h"
#include "kernels/common/keyed_lists_cuda.h"

namespace d9m {
namespace {

TEST(CudaKeyedLists, ListEveryKeysItemsInIncreasingOrderAsAHostStableSort) {
  if (const auto why = make_cuda_executor()->unavailable()) GTEST_SKIP() << *why;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::mt19937 rng(3);
  // Few keys (long lists), many keys (most empty), one key, no items, and key counts of a power
  // of two (the unlisted key then needs the sort's top bit).
  for (const auto& [items, keys] : std::vector<std::pair<std::size_t, std::uint32_t>>{
           {5000, 7}, {3000, 100000}, {257, 1}, {0, 5}, {1, 3}, {1000, 8}, {5000, 256}, {4000, 65536}}) {
    std::vector<std::uint32_t> key(items);
    for (auto& k : key) k = std::uniform_int_distribution<std::uint32_t>(0, keys)(rng);  // keys itself: none
    {
      cuda::KeyedLists lists(items, keys, stream);
      ASSERT_EQ(lists.none(), keys);
      if (items) ASSERT_EQ(cudaMemcpyAsync(lists.item_keys(), key.data(), 4 * items, cudaMemcpyHostToDevice, stream), cudaSuccess);
      lists.list();
      std::vector<std::int32_t> by_key(items), starts(keys + 1);
      if (items) ASSERT_EQ(cudaMemcpyAsync(by_key.data(), lists.items_by_key(), 4 * items, cudaMemcpyDeviceToHost, stream), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(starts.data(), lists.starts(), 4 * (keys + 1), cudaMemcpyDeviceToHost, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::vector<std::vector<std::int32_t>> expected(keys);
      std::size_t listed = 0;
      for (std::size_t i = 0; i < items; ++i)
        if (key[i] < keys) expected[key[i]].push_back(static_cast<std::int32_t>(i)), ++listed;
      ASSERT_EQ(starts[0], 0);
      ASSERT_EQ(static_cast<std::size_t>(starts[keys]), listed) << items << " items, " << keys << " keys";
      for (std::uint32_t k = 0; k < keys; ++k)
        ASSERT_EQ(std::vector<std::int32_t>(by_key.begin() + starts[k], by_key.begin() + starts[k + 1]), expected[k]) << "key " << k;
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace d9m
