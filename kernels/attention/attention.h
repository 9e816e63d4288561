// attention family: scaled dot-product attention (PyTorch's scaled_dot_product_attention, cuDNN's
// SDPA), one head at a time, tensors [batch, heads, seq, head_dim] row-major:
//   sdpa(q, k, v)          -> o[B,H,S,D],  o_i = sum_j softmax_j(scale q_i.k_j) v_j
//   sdpa_bwd(q, k, v, dO)  -> grads[B,H,S+2Skv,D]: dQ (rows 0..S-1), dK (S..S+Skv-1) and dV (the
//                             last Skv) of each head stacked along the sequence axis.
// scale = 1/sqrt(head_dim). `causal` masks key j from query i when j > i (top-left aligned, as
// PyTorch's is_causal and cuDNN's set_causal_mask): key 0 is never masked, so no row is empty.
//
// sdpa_bwd is the backward a training step runs: from q, k, v and the upstream gradient dO it runs
// the forward (for O and the softmax statistics, as the forward of the step would have kept them)
// and then the backward; every variant's forward is deterministic (one row, one task), so what
// races is the backward's. With P = softmax(scale q k^T), O rounded to the dtype and
// delta_i = sum_d dO_id O_id (FlashAttention's D):
//   dV_j = sum_i P_ij dO_i,   dS_ij = P_ij (dO_i.v_j - delta_i),
//   dK_j = scale sum_i dS_ij q_i,   dQ_i = scale sum_j dS_ij k_j.
// dV and dK are sums over queries, owned by one key each: fixed order in every variant. dQ sums
// over keys: flash-attention kernels give each thread block a block of kKeyBlock keys and add its
// partial dQ with atomicAdd (cuda.atomic, cpu.atomic); the ordered variants keep the block
// partials apart and add them in block order. cpu.serial adds all keys of a row in ascending j.
//
// Every sum is in Acc<T> (f32 for f32/f16/bf16, f64 for f64) in ascending index; the softmax
// uses exp_nonpositive() (kernels/common/hd_math.h), the same float operations on the host and
// the device (the library's expf is not), so the CPU and CUDA variants of one decomposition agree
// bit for bit.
// The row maximum is subtracted first, so every exponent is <= 0, and
// softmax_j = exp(s_j - max) / sum_j' exp(s_j' - max), the sum in ascending j'; o_i divides once:
// o_id = (sum_j exp(s_ij - max) v_jd) / sum.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/common/hd_math.h"
#include "kernels/registry.h"

namespace d9m::attention {

// Keys per block of the split dQ sum (FlashAttention-2's BLOCK_N on Hopper is 64 or 128). Fixed,
// never derived from the machine.
inline constexpr std::int64_t kKeyBlock = 64;
// The largest head_dim d9m's CUDA kernels keep a row of (in registers or local memory); cuDNN's
// SDPA stops at 256 too.
inline constexpr std::int64_t kMaxHeadDim = 256;

struct Geometry {
  std::int64_t batch = 1, heads = 1, seq_q = 1, seq_kv = 1, dim = 1;
  bool causal = false;
  double scale = 1;  // 1/sqrt(dim), rounded to Acc<T> where used

  D9M_HD std::int64_t heads_total() const { return batch * heads; }
  D9M_HD std::int64_t rows() const { return batch * heads * seq_q; }            // query rows
  D9M_HD std::int64_t key_rows() const { return batch * heads * seq_kv; }        // key rows
  D9M_HD std::int64_t packed_rows() const { return seq_q + 2 * seq_kv; }         // of sdpa_bwd's output, per head
  D9M_HD std::int64_t key_blocks() const { return (seq_kv + kKeyBlock - 1) / kKeyBlock; }
  // Keys query i sees: [0, keys_for(i)).
  D9M_HD std::int64_t keys_for(std::int64_t i) const { return causal ? (i + 1 < seq_kv ? i + 1 : seq_kv) : seq_kv; }
  // The first query that sees key j: queries [first_query(j), seq_q) do.
  D9M_HD std::int64_t first_query(std::int64_t j) const { return causal ? j : 0; }
};

// exp_nonpositive() is kernels/common/hd_math.h's (the CTC family uses it too).
using ::d9m::exp_nonpositive;

// Offsets of row i of head bh in a [.., seq, dim] tensor of `seq` rows.
D9M_HD inline std::int64_t row_at(const Geometry& g, std::int64_t bh, std::int64_t seq, std::int64_t i) {
  return (bh * seq + i) * g.dim;
}

// scale (q_i . k_j), the dot in ascending d.
template <class T>
D9M_HD inline Acc<T> score(const Geometry& g, const T* q, const T* k, std::int64_t bh, std::int64_t i, std::int64_t j) {
  const T* qi = q + row_at(g, bh, g.seq_q, i);
  const T* kj = k + row_at(g, bh, g.seq_kv, j);
  Acc<T> dot = 0;
  for (std::int64_t d = 0; d < g.dim; ++d) dot = dot + widen(qi[d]) * widen(kj[d]);
  return dot * static_cast<Acc<T>>(g.scale);
}

template <class A>
struct RowStats {
  A max = 0, sum = 0;  // the row's largest score, and sum_j exp(s_j - max)
};

template <class T>
D9M_HD inline RowStats<Acc<T>> row_stats(const Geometry& g, const T* q, const T* k, std::int64_t bh, std::int64_t i) {
  using A = Acc<T>;
  RowStats<A> st;
  const std::int64_t keys = g.keys_for(i);
  st.max = score(g, q, k, bh, i, 0);
  for (std::int64_t j = 1; j < keys; ++j) {
    const A s = score(g, q, k, bh, i, j);
    if (s > st.max) st.max = s;
  }
  for (std::int64_t j = 0; j < keys; ++j) st.sum = st.sum + exp_nonpositive(score(g, q, k, bh, i, j) - st.max);
  return st;
}

// Row i of the forward's output into o (dim values of T). acc: dim values of scratch. Returns the
// row's statistics, which the backward reuses.
template <class T>
D9M_HD inline RowStats<Acc<T>> forward_row(const Geometry& g, const T* q, const T* k, const T* v, std::int64_t bh, std::int64_t i,
                                           Acc<T>* acc, T* o) {
  using A = Acc<T>;
  const RowStats<A> st = row_stats(g, q, k, bh, i);
  for (std::int64_t d = 0; d < g.dim; ++d) acc[d] = 0;
  for (std::int64_t j = 0; j < g.keys_for(i); ++j) {
    const A e = exp_nonpositive(score(g, q, k, bh, i, j) - st.max);
    const T* vj = v + row_at(g, bh, g.seq_kv, j);
    for (std::int64_t d = 0; d < g.dim; ++d) acc[d] = acc[d] + e * widen(vj[d]);
  }
  for (std::int64_t d = 0; d < g.dim; ++d) o[d] = narrow<T>(acc[d] / st.sum);
  return st;
}

// delta_i = sum_d dO_id O_id, O as the forward stored it (in T).
template <class T>
D9M_HD inline Acc<T> delta(const Geometry& g, const T* d_out, const T* o_row, std::int64_t bh, std::int64_t i) {
  const T* gi = d_out + row_at(g, bh, g.seq_q, i);
  Acc<T> s = 0;
  for (std::int64_t d = 0; d < g.dim; ++d) s = s + widen(gi[d]) * widen(o_row[d]);
  return s;
}

// P_ij and dS_ij = P_ij (dO_i . v_j - delta_i) of an unmasked pair.
template <class T>
D9M_HD inline void pair_grad(const Geometry& g, const T* q, const T* k, const T* v, const T* d_out, RowStats<Acc<T>> st,
                             Acc<T> delta_i, std::int64_t bh, std::int64_t i, std::int64_t j, Acc<T>& p, Acc<T>& ds) {
  using A = Acc<T>;
  p = exp_nonpositive(score(g, q, k, bh, i, j) - st.max) / st.sum;
  const T* gi = d_out + row_at(g, bh, g.seq_q, i);
  const T* vj = v + row_at(g, bh, g.seq_kv, j);
  A dp = 0;
  for (std::int64_t d = 0; d < g.dim; ++d) dp = dp + widen(gi[d]) * widen(vj[d]);
  ds = p * (dp - delta_i);
}

// Index of pair (i, j) of head bh in the [heads_total, seq_q, seq_kv] P and dS matrices.
D9M_HD inline std::int64_t pair_at(const Geometry& g, std::int64_t bh, std::int64_t i, std::int64_t j) {
  return (bh * g.seq_q + i) * g.seq_kv + j;
}

// dK_jd and dV_jd of key j: sums over the queries that see it, in ascending i. Written into the
// packed output's rows for key j.
template <class T>
D9M_HD inline void key_grads(const Geometry& g, const Acc<T>* p, const Acc<T>* ds, const T* q, const T* d_out, std::int64_t bh,
                             std::int64_t j, std::int64_t d, T* out) {
  using A = Acc<T>;
  A dk = 0, dv = 0;
  for (std::int64_t i = g.first_query(j); i < g.seq_q; ++i) {
    dk = dk + ds[pair_at(g, bh, i, j)] * widen(q[row_at(g, bh, g.seq_q, i) + d]);
    dv = dv + p[pair_at(g, bh, i, j)] * widen(d_out[row_at(g, bh, g.seq_q, i) + d]);
  }
  const std::int64_t base = bh * g.packed_rows() * g.dim;
  out[base + (g.seq_q + j) * g.dim + d] = narrow<T>(dk * static_cast<A>(g.scale));
  out[base + (g.seq_q + g.seq_kv + j) * g.dim + d] = narrow<T>(dv);
}

// sum_j dS_ij k_jd over the keys [j0, j1) that query i sees, in ascending j, from 0.
template <class T>
D9M_HD inline Acc<T> dq_partial(const Geometry& g, const Acc<T>* ds, const T* k, std::int64_t bh, std::int64_t i, std::int64_t d,
                                std::int64_t j0, std::int64_t j1) {
  Acc<T> s = 0;
  const std::int64_t end = j1 < g.keys_for(i) ? j1 : g.keys_for(i);
  for (std::int64_t j = j0; j < end; ++j) s = s + ds[pair_at(g, bh, i, j)] * widen(k[row_at(g, bh, g.seq_kv, j) + d]);
  return s;
}

// Where dQ_id goes in the packed output.
D9M_HD inline std::int64_t dq_at(const Geometry& g, std::int64_t bh, std::int64_t i, std::int64_t d) {
  return (bh * g.packed_rows() + i) * g.dim + d;
}

}  // namespace d9m::attention
