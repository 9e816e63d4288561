// embedding family: the weight gradient of PyTorch's EmbeddingBag (ATen's EmbeddingBag.cu and
// EmbeddingBackwardKernel.cu: _embedding_bag_dense_backward), values in the config's dtype T:
//
//   embedding_bag_bwd(indices[I], offsets[B], ..., grad[B, D]) -> grad_weight[E, D]
//
// indices are rows of an E x D table (int32 in [0, E); PyTorch takes int32 or int64), offsets[b]
// the first index of bag b (offsets[0] = 0, non-decreasing, include_last_offset false: bag b is
// [offsets[b], offsets[b + 1]), the last bag ends at I; empty bags allowed). padding_idx -1 is
// none (ATen's encoding); an index equal to padding_idx belongs to its bag but contributes nothing,
// is not counted in the bag's size, and its row of grad_weight stays 0.
//
// mode sum / mean (embedding_bag_backward_cuda_sum_avg then embedding_backward_cuda_kernel), in
// Acc<T> (accscalar_t: float for f32, f16, bf16; double for f64): the entry at position i of bag
// b contributes to row indices[i] the value c = g, g / bag_size(b) (mean: bag_size counts the
// bag's non-padding entries; the division in Acc<T>), or g p_i (sum with per_sample_weights p),
// g = grad[b, f] widened. PyTorch sorts the indices with their positions (cub radix sort, stable:
// each row's entries stay in ascending position), cuts each row's run into partial segments of
// NROWS_PER_THREAD = 10 entries, sums each partial from 0 (compute_grad_weight_bags), then sums a
// row's partials in order from 0 and writes the row once, rounded to T (sum_and_scatter). No
// atomics: PyTorch's sum and mean backward is deterministic, and its deterministic mode lets it run.
// (nvcc contracts `weight += gradient * scale` into an fma; d9m rounds the product first. The two
// differ only with per_sample_weights: without them the scale is 1.)
//
// mode max (EmbeddingBag_accGradParametersKernel_max): inputs indices, offsets, weight[E, D] and
// max_indices[B, D], the forward's argmax (EmbeddingBag_updateOutputKernel_max): for bag b and
// feature f the first non-padding entry whose weight is strictly greater than every earlier one
// (first maximum on ties, compared in T), -1 for a bag without non-padding entries; the fill
// computes it from `weight` as PyTorch's forward does. The backward adds grad[b, f] to
// grad_weight[max_indices[b, f], f] with gpuAtomicAdd in T, a thread per (bag, feature) (block
// 32 x 8, grid 1024); -1 and padding_idx are skipped. Two bags whose maximum is the same row
// race: PyTorch's deterministic mode refuses it (alertNotDeterministic("embedding_bag_backward_cuda_max")).
// PyTorch dispatches max's backward for float, double and half only; d9m runs bf16 too.
//
// d9m's variants:
//   cpu.serial    sum / mean: PyTorch's arrangement (rows' entries in ascending position, partials
//                 of 10, partials in order), one thread; max: the bags in ascending order, adds in T.
//   cpu.ordered   the same on worker threads: serial's bits (sum / mean: a stable counting sort by
//                 row, then rows in parallel; max: stable bucketing by output).
//   cuda.ordered  sum / mean: PyTorch's kernels (stable radix sort, partial sums, sum_and_scatter);
//                 max: stable radix sort by output, each output adds its bags in order. Serial's bits.
//   cuda.atomic   max: PyTorch's kernel, atomicAdd in T. sum / mean: PyTorch has no atomic kernel;
//                 d9m's is a thread per (entry, feature) adding c with atomicAdd into an Acc<T>
//                 buffer, rounded to T at the end (the same contributions, in another order).
//   cpu.atomic    the same atomic shapes on worker threads.
// scale_grad_by_freq is not modelled.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::embedding {

// NROWS_PER_THREAD of EmbeddingBackwardKernel.cu.
inline constexpr std::int64_t kRowsPerPartial = 10;

enum class Mode : std::uint8_t { sum, mean, max };

struct Geometry {
  std::int64_t num_embeddings = 0, dim = 0, indices = 0, bags = 0;
  Mode mode = Mode::sum;
  bool per_sample_weights = false;
  std::int32_t padding_idx = -1;
  std::int64_t bag_size = 0;  // the fill's: 0 random bag sizes, k every bag k indices (no variant reads it)
  bool zipf_ids = false;      // the fill's: indices by Zipf's law (fill.h), not uniform
};

// Bag b's entries: [begin, end).
D9M_HD inline std::int64_t bag_begin(const std::int32_t* offsets, std::int64_t b) {
  return b == 0 ? 0 : offsets[b];  // PyTorch forces the first offset to 0
}
D9M_HD inline std::int64_t bag_end(const Geometry& g, const std::int32_t* offsets, std::int64_t b) {
  return b < g.bags - 1 ? offsets[b + 1] : g.indices;
}

// Bag b's share of what the forward hands the backward: offset2bag[i] = b for its entries, and
// bag_size[b], the count of its non-padding entries.
D9M_HD inline void describe_bag(const Geometry& g, const std::int32_t* indices, const std::int32_t* offsets, std::int64_t b,
                                std::int32_t* offset2bag, std::int32_t* bag_size) {
  std::int32_t count = 0;
  for (std::int64_t i = bag_begin(offsets, b); i < bag_end(g, offsets, b); ++i) {
    offset2bag[i] = static_cast<std::int32_t>(b);
    count += indices[i] != g.padding_idx ? 1 : 0;
  }
  bag_size[b] = count;
}

// The forward's max_indices[b, f] (EmbeddingBag_updateOutputKernel_max): the first non-padding
// entry of bag b whose value(row, f) is strictly greater than every earlier one; -1 if the bag has
// no non-padding entry. value(row, f) is the weight as the dtype holds it.
template <class Value>
inline std::int32_t bag_argmax(const Geometry& g, const std::int32_t* indices, const std::int32_t* offsets, std::int64_t b,
                               std::int64_t f, Value&& value) {
  std::int32_t best = -1;
  double best_value = 0;
  for (std::int64_t i = bag_begin(offsets, b); i < bag_end(g, offsets, b); ++i) {
    const std::int32_t row = indices[i];
    if (row == g.padding_idx) continue;
    const double v = value(row, f);
    if (best < 0 || v > best_value) {
      best = row;
      best_value = v;
    }
  }
  return best;
}

// sum / mean: the contributions of the entries, given each entry's bag (offset2bag) and each bag's
// count of non-padding entries (bag_size), as the forward hands them to the backward.
template <class T>
struct BagGrads {
  Geometry g;
  const std::int32_t* indices;
  const std::int32_t* offset2bag;  // [I]
  const std::int32_t* bag_size;    // [B]
  const T* grad;                   // [B, D]
  const T* per_sample;             // [I], or null

  // compute_grad_weight_bags: gradient = grad[bag, f] (Acc); mean: /= bag_size; weight += gradient * scale.
  D9M_HD Acc<T> contribution(std::int64_t i, std::int64_t f) const {
    using A = Acc<T>;
    const std::int32_t bag = offset2bag[i];
    A gradient = widen(grad[bag * g.dim + f]);
    if (g.mode == Mode::mean) gradient = gradient / static_cast<A>(bag_size[bag]);
    const A scale = per_sample ? widen(per_sample[i]) : A(1);
    return gradient * scale;
  }

  // Scatter form for the atomic variants: source s = (entry, feature).
  D9M_HD std::size_t sources() const { return static_cast<std::size_t>(g.indices * g.dim); }
  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const auto i = static_cast<std::int64_t>(s) / g.dim, f = static_cast<std::int64_t>(s) % g.dim;
    const std::int32_t row = indices[i];
    if (row == g.padding_idx) return;
    emit(static_cast<std::size_t>(row * g.dim + f), contribution(i, f));
  }

  // One partial segment: the contributions of sorted positions [begin, end) (at most
  // kRowsPerPartial, one row's) to feature f, from 0.
  D9M_HD Acc<T> partial(const std::int32_t* positions, std::int64_t begin, std::int64_t end, std::int64_t f) const {
    Acc<T> acc = 0;
    for (std::int64_t k = begin; k < end; ++k) acc = acc + contribution(positions[k], f);
    return acc;
  }

  // A row's gradient at feature f from its entries' positions [begin, end) in ascending order:
  // its partials of kRowsPerPartial added in order from 0, rounded to T.
  D9M_HD T row_sum(const std::int32_t* positions, std::int64_t begin, std::int64_t end, std::int64_t f) const {
    Acc<T> total = 0;
    for (std::int64_t k = begin; k < end; k += kRowsPerPartial)
      total = total + partial(positions, k, k + kRowsPerPartial < end ? k + kRowsPerPartial : end, f);
    return narrow<T>(total);
  }
};

// max: source s = (bag, feature) adds its gradient at the row of its maximum, in T.
template <class T>
struct MaxGrads {
  Geometry g;
  const std::int32_t* max_indices;  // [B, D]
  const T* grad;                    // [B, D]

  D9M_HD std::size_t sources() const { return static_cast<std::size_t>(g.bags * g.dim); }
  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    const std::int32_t row = max_indices[s];
    if (row < 0 || row == g.padding_idx) return;
    emit(static_cast<std::size_t>(row * g.dim + static_cast<std::int64_t>(s) % g.dim), grad[s]);
  }
};

}  // namespace d9m::embedding
