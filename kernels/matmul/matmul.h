// matmul family, tf.linalg.matmul semantics, row-major, at every float dtype:
//   matmul(a, b)         -> c[M,N] = op(a) op(b)
//   matmul_batched(a, b) -> c[B,M,N], each batch element independent (BatchMatMul)
// `layout` names op(): "NN" a[M,K] b[K,N]; "TN" a[K,M] (transpose_a); "NT" b[N,K] (transpose_b).
//
// Products are summed in the accumulation type, f32 for f32, f16 and bf16 inputs (as cuBLAS's
// CUBLAS_COMPUTE_32F) and f64 for f64, and the output is rounded once to the dtype. The
// reference (cpu.serial) adds the K products in ascending k: ((a0 b0 + a1 b1) + a2 b2) + ...
// Split-K variants sum chunks of kSplitK consecutive k in that same order, then add the chunk
// sums: the atomic ones in the scheduler's order (as split-K GEMMs that reduce with atomicAdd),
// the ordered ones in chunk order, so their bits depend on nothing but the inputs (CPU and CUDA
// alike: cuda.ordered claims cpu.ordered's bits). A split-K sum is not the serial one's bits:
// its additions are associated differently.
//
// cpu.splitk_by_shape splits K the way library heuristics do: into as many chunks as it takes
// to give the threads kSplitTasks pieces of work, so a small M gets more chunks than a large one.
// Its bits depend only on the shape (any thread count gives them), so it is repeatable; but a
// row's bits depend on M, so it is not batch-invariant (Thinking Machines' split-K culprit).
// cpu.autotune times cpu.ordered and cpu.splitk_by_shape afresh in each trial and keeps the
// faster's output, as a framework's autotuner does in every new process (told to replay a
// choice, as in a pipeline's later steps, it runs that one untimed).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"
#include "kernels/registry.h"

namespace d9m::matmul {

// The ordered split-K variants' batch-invariance claim: their chunks follow K alone.
inline Claim fixed_chunks_are_invariant() {
  return {Determinism::deterministic, ClaimSource::design, "chunks of 256 k whatever M: a row's sums do not see the batch"};
}

// K per chunk of the split-K variants. Fixed, never derived from the machine.
inline constexpr std::int64_t kSplitK = 256;
// Pieces of work cpu.splitk_by_shape aims at (rows x chunks), and the shortest chunk it cuts.
inline constexpr std::int64_t kSplitTasks = 256;
inline constexpr std::int64_t kMinChunk = 32;

// cpu.splitk_by_shape's chunk length for `rows` output rows (all batch elements) and K.
D9M_HD inline std::int64_t chunk_by_shape(std::int64_t rows, std::int64_t k) {
  std::int64_t chunks = (kSplitTasks + rows - 1) / rows;
  const std::int64_t most = (k + kMinChunk - 1) / kMinChunk;
  if (chunks > most) chunks = most;
  if (chunks < 1) chunks = 1;
  return (k + chunks - 1) / chunks;
}

struct Geometry {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;

  D9M_HD std::int64_t chunks() const { return (k + kSplitK - 1) / kSplitK; }
  D9M_HD std::int64_t outputs() const { return batch * m * n; }
};

// Sums are in Acc<T> (kernels/common/half.h): widen() in, one narrow() out.

// Sum over k in [k0, k1) of a[i,k] b[k,j] in batch element `e`, in ascending k, starting from 0.
template <class T>
D9M_HD inline Acc<T> partial(const Geometry& g, const T* a, const T* b, std::int64_t e, std::int64_t i, std::int64_t j,
                             std::int64_t k0, std::int64_t k1) {
  const T* ae = a + e * g.m * g.k;
  const T* be = b + e * g.k * g.n;
  Acc<T> acc = 0;
  for (std::int64_t kk = k0; kk < k1; ++kk) {
    const Acc<T> x = widen(g.trans_a ? ae[kk * g.m + i] : ae[i * g.k + kk]);
    const Acc<T> y = widen(g.trans_b ? be[j * g.k + kk] : be[kk * g.n + j]);
    acc = acc + x * y;  // contraction is off on both sides (D9M_FP_FLAGS): a product, then a sum
  }
  return acc;
}

// d9m's own kernels compute in plain f32 (or f64): a library math mode (tf32, ...) is the
// library's, and they are UNSUPPORTED under it. The serial reference still runs: it is what
// the library's result is compared with.
inline std::optional<std::string> own_kernels_support(const std::string& math) {
  if (math == "default") return std::nullopt;
  return "d9m's own kernels have no math mode \"" + math + "\" (the library's setting)";
}

// Output index o = (e * M + i) * N + j.
D9M_HD inline void output_coords(const Geometry& g, std::int64_t o, std::int64_t& e, std::int64_t& i, std::int64_t& j) {
  j = o % g.n;
  i = (o / g.n) % g.m;
  e = o / (g.n * g.m);
}

}  // namespace d9m::matmul
