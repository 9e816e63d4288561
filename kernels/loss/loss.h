// loss family: classification losses reduced to a scalar, with PyTorch's semantics (ATen's
// LossNLL.cu, LossNLL2d.cu and SoftMax.cu), values in the config's dtype T, int32 targets
// (PyTorch's are int64; the values are the same):
//
//   nll_loss(input, target[, weight]) -> loss[1]
//     input [N, C] (h = w = 0) or [N, C, H, W]: log-probabilities; target [N] or [N, H, W] in
//     [0, C) or equal to ignore_index; weight [C] (class weights, `weighted`).
//     A position p with target t != ignore_index contributes the term -w_t input[p, t] and the
//     weight w_t (w_t = 1 without class weights); ignored positions contribute nothing.
//     sum:  loss = sum of the terms.
//     mean: loss = sum of the terms / sum of w_t over the non-ignored positions, so with class
//           weights the mean divides by the weights' sum, not by the count; 0/0 = NaN when every
//           target is ignored.
//   softmax_cross_entropy(logits, target[, weight]) -> loss[1]
//     PyTorch's cross_entropy with class-index targets: nll_loss(log_softmax(logits, dim 1), ...),
//     the same shapes (no label smoothing, no probability targets). PyTorch's, not TensorFlow's
//     SparseSoftmaxCrossEntropyWithLogits: TF's op returns per-example losses (the reduction is a
//     separate tf.reduce_* the user calls), and its GPU kernel raises under op determinism, the
//     Python API then taking a deterministic composite path; PyTorch fuses the reduction, and its
//     race, into the loss.
//
// Arithmetic, as the CUDA kernels do it (accscalar_t = Acc<T>: float for f32, f16, bf16; double
// for f64): the product input[p, t] * w_t is one operation in T (c10's Half * Half is a float
// product rounded to Half), and each term is subtracted from an Acc<T> partial (acc -= product),
// each weight added to another. What happens to the partials depends on the input's rank:
//
//   [N, C] (LossNLL.cu nll_loss_forward_reduce_cuda_kernel_2d): ONE block of 32 threads; lane l
//     takes examples l, l + 32, l + 64, ... into its two Acc<T> partials from 0; thread 0 then adds
//     the 32 lane partials in lane order from 0. mean: loss = T(sum / weight sum) in Acc<T>, one
//     rounding to T; sum: loss = T(sum). A fixed order: PyTorch's 2-D forward is deterministic and
//     raises nothing in deterministic mode.
//   [N, C, H, W] (LossNLL2d.cu nll_loss2d_forward_kernel): M = H W positions per example,
//     bps = max(1, ceil(M / 1024) / 128) blocks of 1024 threads per example; thread l of block
//     (n, k) takes positions k 1024 + l, then + 1024 bps, ... of example n into its partials; the
//     block adds them with BlockReduceSum (block_reduce.cuh: in each warp of 32 lanes
//     p[l] += p[l + h] for h = 16, 8, 4, 2, 1 (shuffles), then the same over the 32 warp sums),
//     rounds both block sums to T, and thread 0 adds them to the loss and the total weight with
//     gpuAtomicAdd, in T. mean then divides in T (nll_loss2d_forward_size_average_kernel:
//     *output /= *total_weight). The order of the block adds is the scheduler's: with a reduction,
//     PyTorch's nll_loss2d forward calls alertNotDeterministic (the "NLLLoss" of its
//     deterministic-mode list), and F.nll_loss / F.cross_entropy of any input with more than two
//     dimensions ([N, C, L] included: sequence models) takes this path.
//
// d9m's variants ("the reference arrangement" is the above with its one race fixed):
//   cpu.serial    the arrangement, one thread; [N, C, H, W]: the block sums added in block order.
//   cpu.ordered   the lanes or blocks on worker threads, combined in the same order: serial's bits.
//   cuda.ordered  PyTorch's kernels, the 2-D one as it is, the 4-D block sums kept apart and added
//                 in block order by one thread: serial's bits.
//   cuda.atomic   [N, C, H, W]: PyTorch's nll_loss2d kernel as it is (atomicAdd in T).
//                 [N, C]: PyTorch has no atomic kernel there; d9m's is a thread per example adding
//                 its term and weight into Acc<T> accumulators with atomicAdd (the naive kernel),
//                 then the same finish as the 2-D kernel.
//   cpu.atomic    the same two shapes on worker threads (atomic adds in T of the block sums; of each
//                 example's term in Acc<T>).
// The atomic variants add the same values as the reference, in another order only.
//
// softmax_cross_entropy's log_softmax is per position and the same in every variant (PyTorch's is
// a separate kernel with a fixed order, cunn_SoftMaxForward / cunn_SpatialSoftMaxForward):
//   m = max_c x_c (exact in any order); s = sum_c exp(x_c - m) in Acc<T> in ascending c from 0;
//   log_softmax(x)_t = T((x_t - m) - log(s)), as LogSoftMaxForwardEpilogue rounds its Acc<T>
//   result to T. exp and log are elementary.h's (+ - * / only), so the CPU and the GPU compute
//   the same bits; PyTorch's std::exp/std::log and its block-tree order of the row sum differ from
//   these in the last bits, so d9m's values agree with PyTorch's within rounding, not bit for bit.
//   The reduction then runs on those values as nll_loss does on its input.
//
// softmax_cross_entropy_grad(logits, target[, weight]) -> grad, the shape of logits
//   The gradient of softmax_cross_entropy with respect to the logits for a loss gradient of 1 (what
//   PyTorch's backward of cross_entropy gives for loss.backward()), with the same parameters,
//   inputs and fills as the loss:
//     grad[p, c] = (softmax(x_p)_c - [c == t_p]) * k_p,  k_p = w_t (sum) or w_t / W (mean),
//   W = the sum of w_t over the counted positions (the mean's divisor); a position whose target is
//   ignore_index has a zero row (and with every target ignored, mean's 0/0 is never formed: the
//   gradient is all zeros, as PyTorch's). Class weights scale the whole row of their target's
//   class, as the chain rule through -w_t log_softmax_t does.
//   Arithmetic, in Acc<T>: W (mean only) adds widen(w_t), or 1 without weights, over the counted
//   positions in ascending p from 0 on one thread in every variant (a sum across rows, so the only
//   one whose order could matter: it has one; it is exact without weights up to 2^24 positions, and
//   may differ in its last bits from the forward's lane- or block-ordered weight sum with random
//   weights). Per position: m and s as log_softmax above (s in ascending c from 0, elementary.h's
//   exp); k = widen(w_t) / W for mean, widen(w_t) for sum; then for each c
//   grad = narrow<T>((exp_nonpositive(x_c - m) / s - [c == t]) * k), one rounding to T. Rows are
//   independent once W is known: every variant gives the same bits (no atomic variant: nothing races).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/elementary.h"
#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::loss {

// PyTorch's launch constants: NLL_LOSS_THREADS (LossNLL.cu), CUDA_NUM_THREADS (KernelUtils.h),
// the warp size, and the 128 of nll_loss2d's blocks_per_sample.
inline constexpr int kLanes2d = 32;
inline constexpr int kBlockThreads = 1024;
inline constexpr int kWarp = 32;
inline constexpr std::int64_t kBlocksPerSampleDivisor = 128;

enum class Reduction : std::uint8_t { mean, sum };

struct Geometry {
  std::int64_t n = 0, classes = 0, h = 0, w = 0;  // h = w = 0: input [N, C]
  Reduction reduction = Reduction::mean;
  bool weighted = false;
  std::int32_t ignore_index = -100;
  bool logits = false;  // softmax_cross_entropy: the input is logits, log_softmax runs first
  std::int64_t ignored_percent = 0;  // the fill's share of targets set to ignore_index

  D9M_HD bool spatial() const { return h > 0; }
  D9M_HD std::int64_t map() const { return spatial() ? h * w : 1; }       // positions per example
  D9M_HD std::int64_t positions() const { return n * map(); }
  D9M_HD std::int64_t blocks_per_sample() const {
    const std::int64_t b = (map() + kBlockThreads - 1) / kBlockThreads / kBlocksPerSampleDivisor;
    return b > 0 ? b : 1;
  }
  D9M_HD std::int64_t blocks() const { return n * blocks_per_sample(); }
  // Offset of (position p, class c) in the input: [N, C] or [N, C, M].
  D9M_HD std::int64_t at(std::int64_t p, std::int64_t c) const {
    const std::int64_t m = map();
    return (p / m * classes + c) * m + p % m;
  }
};

// The row statistics of softmax at position p in Acc<T>: m = max_c x_c, s = sum_c exp(x_c - m) in
// ascending c from 0. Shared by log_softmax_at (the losses) and grad_row (the gradient).
template <class T>
struct SoftmaxRow {
  Acc<T> max = 0, sum = 0;
};

template <class T>
D9M_HD inline SoftmaxRow<T> softmax_row(const Geometry& g, const T* x, std::int64_t p) {
  using A = Acc<T>;
  SoftmaxRow<T> r;
  r.max = widen(x[g.at(p, 0)]);
  for (std::int64_t c = 1; c < g.classes; ++c) {
    const A v = widen(x[g.at(p, c)]);
    if (v > r.max) r.max = v;
  }
  for (std::int64_t c = 0; c < g.classes; ++c) r.sum = r.sum + exp_nonpositive(widen(x[g.at(p, c)]) - r.max);
  return r;
}

// log_softmax over the classes at position p, at class t, rounded to T.
template <class T>
D9M_HD inline T log_softmax_at(const Geometry& g, const T* x, std::int64_t p, std::int64_t t) {
  const SoftmaxRow<T> r = softmax_row(g, x, p);
  return narrow<T>((widen(x[g.at(p, t)]) - r.max) - log_positive(r.sum));
}

// What the reduction reads: the target of each position and the value at (p, target): the input
// itself (nll_loss), or log_softmax of the logits at the target (softmax_cross_entropy), either
// gathered beforehand into gathered[p] (as PyTorch runs log_softmax first) or computed where the
// term is needed (cpu.atomic, whose threads then stay busy while they add: the same values).
template <class T>
struct Terms {
  Geometry g;
  const T* input;        // [N, C(, H, W)]: log-probabilities or logits; unused when gathered
  const T* gathered;     // [positions], or null
  const std::int32_t* target;
  const T* weight;       // [C], or null

  D9M_HD bool counts(std::int64_t p) const { return target[p] != g.ignore_index; }
  D9M_HD T class_weight(std::int32_t t) const { return weight ? weight[t] : from_float<T>(1.0f); }
  D9M_HD T value(std::int64_t p) const {
    if (gathered) return gathered[p];
    return g.logits ? log_softmax_at(g, input, p, target[p]) : input[g.at(p, target[p])];
  }
  // The term's product input[p, t] * w_t in T (before the negation the partials apply).
  D9M_HD T product(std::int64_t p) const { return mul(value(p), class_weight(target[p])); }
};

// The two running sums of a lane, a thread or an example in Acc<T>: the negated terms and the
// weights; and of a block or of the whole input in T (nll_loss2d's sums after rounding).
template <class A>
struct Partial {
  A loss = 0, weight = 0;
};
template <class T>
struct Sums {
  T loss{}, weight{};  // +0: all bits zero in every float type
};

template <class T>
D9M_HD inline void accumulate_position(const Terms<T>& terms, std::int64_t p, Partial<Acc<T>>& acc) {
  if (!terms.counts(p)) return;
  acc.loss = acc.loss - widen(terms.product(p));
  acc.weight = acc.weight + widen(terms.class_weight(terms.target[p]));
}

// [N, C]: lane l's partials (examples l, l + 32, ...).
template <class T>
D9M_HD inline Partial<Acc<T>> lane_partial(const Terms<T>& terms, int lane) {
  Partial<Acc<T>> acc;
  for (std::int64_t i = lane; i < terms.g.n; i += kLanes2d) accumulate_position(terms, i, acc);
  return acc;
}

// [N, C, H, W]: thread l of block b's partials.
template <class T>
D9M_HD inline Partial<Acc<T>> thread_partial(const Terms<T>& terms, std::int64_t block, int thread) {
  const Geometry& g = terms.g;
  const std::int64_t bps = g.blocks_per_sample(), sample = block / bps, m = g.map();
  Partial<Acc<T>> acc;
  for (std::int64_t i = block % bps * kBlockThreads + thread; i < m; i += kBlockThreads * bps)
    accumulate_position(terms, sample * m + i, acc);
  return acc;
}

// BlockReduceSum on the host: p holds kBlockThreads values (thread order); in each warp
// p[l] += p[l + h] for h = 16 .. 1, then the warp sums the same way. Returns the block's sum.
template <class A>
inline A block_reduce(A* p) {
  A warp_sums[kBlockThreads / kWarp];
  for (int w = 0; w < kBlockThreads / kWarp; ++w) {
    A* lanes = p + w * kWarp;
    for (int h = kWarp / 2; h > 0; h /= 2)
      for (int l = 0; l < h; ++l) lanes[l] = lanes[l] + lanes[l + h];
    warp_sums[w] = lanes[0];
  }
  for (int h = kWarp / 2; h > 0; h /= 2)
    for (int l = 0; l < h; ++l) warp_sums[l] = warp_sums[l] + warp_sums[l + h];
  return warp_sums[0];
}

// One block's two sums in T (the values nll_loss2d adds with gpuAtomicAdd), on the host.
template <class T>
inline Sums<T> block_sums(const Terms<T>& terms, std::int64_t block) {
  Acc<T> loss[kBlockThreads], weight[kBlockThreads];
  for (int l = 0; l < kBlockThreads; ++l) {
    const Partial<Acc<T>> p = thread_partial(terms, block, l);
    loss[l] = p.loss;
    weight[l] = p.weight;
  }
  return {narrow<T>(block_reduce(loss)), narrow<T>(block_reduce(weight))};
}

// The last step of the [N, C] kernel: from the Acc<T> sums to the loss.
template <class T>
D9M_HD inline T finish_2d(Reduction r, Partial<Acc<T>> total) {
  return narrow<T>(r == Reduction::mean ? total.loss / total.weight : total.loss);
}

// The last step of the [N, C, H, W] kernel: the loss and total weight accumulated in T.
template <class T>
D9M_HD inline T finish_spatial(Reduction r, T loss, T weight) {
  return r == Reduction::mean ? div(loss, weight) : loss;
}

// softmax_cross_entropy_grad's W: the counted positions' weights (1 each without class weights)
// in ascending position order, from 0.
template <class T>
D9M_HD inline Acc<T> counted_weight_sum(const Geometry& g, const std::int32_t* target, const T* weight) {
  Acc<T> w = 0;
  for (std::int64_t p = 0; p < g.positions(); ++p)
    if (target[p] != g.ignore_index) w = w + (weight ? widen(weight[target[p]]) : Acc<T>(1));
  return w;
}

// softmax_cross_entropy_grad's row at position p (the C outputs at g.at(p, c)); total_weight is W
// (read for mean only).
template <class T>
D9M_HD inline void grad_row(const Geometry& g, const T* x, const std::int32_t* target, const T* weight,
                            Acc<T> total_weight, std::int64_t p, T* out) {
  using A = Acc<T>;
  const std::int32_t t = target[p];
  if (t == g.ignore_index) {
    for (std::int64_t c = 0; c < g.classes; ++c) out[g.at(p, c)] = T{};  // +0
    return;
  }
  const SoftmaxRow<T> r = softmax_row(g, x, p);
  A k = weight ? widen(weight[t]) : A(1);
  if (g.reduction == Reduction::mean) k = k / total_weight;
  for (std::int64_t c = 0; c < g.classes; ++c) {
    const A prob = exp_nonpositive(widen(x[g.at(p, c)]) - r.max) / r.sum;
    out[g.at(p, c)] = narrow<T>((c == t ? prob - A(1) : prob) * k);
  }
}

}  // namespace d9m::loss
