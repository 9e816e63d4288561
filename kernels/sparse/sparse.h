// sparse family: a sparse matrix A[rows, cols] times a dense vector or matrix, as cuSPARSE's
// generic API (cusparseSpMV, cusparseSpMM) and TensorFlow's sparse_dense_matmul compute it:
//   spmv(A, x)  -> y = op(A) x        x[K], y[M]
//   spmm(A, b)  -> product = op(A) b  b[K, n], product[M, n], both dense and row-major
//   sparse_dense_matmul(A, b) -> product = op(A) op(b), TensorFlow's SparseTensorDenseMatMul:
//                  A in COO (TF's SparseTensor; indices sorted, as tf.sparse.reorder leaves
//                  them), `adjoint_a` sets op(A) = A^T and `adjoint_b` op(b) = b^T, b then
//                  stored [n, K]. TF's GPU kernel is spmm's cuda.atomic: a thread per
//                  (nonzero, output column) adds its product into the output with atomicAdd,
//                  in Tsum = float for 16-bit T, rounded to T once at the end.
// where op(A) is A, or A^T when `transpose` is set, so (M, K) is (rows, cols) or (cols, rows).
//
// A is an input in one of two formats (parameter `format`), with 32-bit indices and zero base:
//   csr  row_offsets[rows + 1], col_indices[nnz], values[nnz]
//   coo  row_indices[nnz],      col_indices[nnz], values[nnz]
// Nonzeros are sorted by row, then by column (what cuSPARSE requires of COO), and both formats
// of one config hold the same matrix. Its structure is generated, never read from a file: each
// ordinary row has `nnz_per_row` nonzeros, and `heavy_rows` rows spread evenly over the matrix
// have `heavy_nnz` (0: every column); a row's k columns are one draw in each of k equal strata
// of [0, cols), so they are distinct and ascending. Heavy rows put many adds on one output
// (non-transposed A), and every row adds into the columns' outputs (transposed A): there the
// atomic variants race.
//
// Precision: values and the dense operand in the config's dtype (f32, f16, bf16, f64); products
// are summed in the accumulation type -- f32 for f32, f16 and bf16 (cuSPARSE's mixed precision:
// 16-bit A, x and y with CUDA_R_32F compute), f64 for f64 -- and each output is rounded once
// to the dtype.
//
// The reference (cpu.serial) defines the order: every output adds its products in ascending
// nonzero index, starting from 0, acc = acc + value * dense, no fused multiply-add (contraction
// is off on both sides). Without transposition that is ascending column within the row; with
// it, ascending row within the column. The ordered variants (CPU and CUDA) replay exactly that
// order per output, so they claim cpu.serial's bits; the atomic ones add the same products in
// the scheduler's order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::sparse {

enum class Format : std::uint8_t { csr, coo };

struct Geometry {
  std::int64_t rows = 0, cols = 0, nnz = 0;
  std::int64_t n = 1;  // columns of the dense operand and of the output (1 for spmv)
  std::int64_t nnz_per_row = 0, heavy_rows = 0, heavy_nnz = 0;
  Format format = Format::csr;
  bool transpose = false;
  bool adjoint_b = false;  // sparse_dense_matmul's op(b) = b^T: b stored [n, K]

  D9M_HD std::int64_t out_rows() const { return transpose ? cols : rows; }
  D9M_HD std::int64_t in_rows() const { return transpose ? rows : cols; }
  D9M_HD std::int64_t outputs() const { return out_rows() * n; }
};

// Input arguments, in this order for both formats and both ops.
enum Arg : std::size_t { kRowsArg = 0, kColsArg = 1, kValuesArg = 2, kDenseArg = 3 };

// Sums are in Acc<T> (kernels/common/half.h): widen() in, one narrow() out.

// ---- structure --------------------------------------------------------------------------

// Whether row r is one of the heavy rows: rows floor(h * rows / heavy_rows), h < heavy_rows.
D9M_HD inline bool is_heavy_row(const Geometry& g, std::int64_t r) {
  if (g.heavy_rows == 0) return false;
  // r is heavy iff some h has floor(h * rows / heavy_rows) == r; the candidate is the least h
  // with h * rows >= r * heavy_rows.
  const std::int64_t h = (r * g.heavy_rows + g.rows - 1) / g.rows;
  return h < g.heavy_rows && h * g.rows / g.heavy_rows == r;
}

// Nonzeros in row r.
D9M_HD inline std::int64_t row_nnz(const Geometry& g, std::int64_t r) {
  const std::int64_t k = is_heavy_row(g, r) ? (g.heavy_nnz == 0 ? g.cols : g.heavy_nnz) : g.nnz_per_row;
  return k < g.cols ? k : g.cols;
}

// The j-th of a row's k column strata: [j * cols / k, (j + 1) * cols / k), never empty for k <= cols.
D9M_HD inline void stratum(std::int64_t cols, std::int64_t k, std::int64_t j, std::int64_t& lo, std::int64_t& hi) {
  lo = j * cols / k;
  hi = (j + 1) * cols / k;
}

// ---- the products of op(A) times the dense operand ----------------------------------------

// Row of nonzero k in CSR: the last r with offsets[r] <= k (empty rows skipped).
D9M_HD inline std::int64_t csr_row_of(const std::int32_t* offsets, std::int64_t rows, std::int64_t k) {
  std::int64_t lo = 0, hi = rows;  // invariant: offsets[lo] <= k < offsets[hi]
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= k) lo = mid;
    else hi = mid;
  }
  return lo;
}

// First position p in sorted[0, n) with sorted[p] >= value.
D9M_HD inline std::int64_t lower_bound(const std::int32_t* sorted, std::int64_t n, std::int64_t value) {
  std::int64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The nonzeros [begin, end) of stored row r (CSR: its offsets; COO: its run of row indices).
D9M_HD inline void row_range(const Geometry& g, const std::int32_t* row_arg, std::int64_t r, std::int64_t& begin,
                             std::int64_t& end) {
  if (g.format == Format::csr) {
    begin = row_arg[r];
    end = row_arg[r + 1];
  } else {
    begin = lower_bound(row_arg, g.nnz, r);
    end = lower_bound(row_arg, g.nnz, r + 1);
  }
}

// The output row and the dense row that nonzero (r, c) joins: op(A)[t, s] = A[r, c].
D9M_HD inline void target_source(const Geometry& g, std::int64_t r, std::int64_t c, std::int64_t& target,
                                 std::int64_t& source) {
  target = g.transpose ? c : r;
  source = g.transpose ? r : c;
}

// The element of the dense operand that output column j reads from its source row s: b[s, j],
// or b[j, s] when b is stored transposed (adjoint_b).
D9M_HD inline std::int64_t dense_index(const Geometry& g, std::int64_t s, std::int64_t j) {
  return g.adjoint_b ? j * g.in_rows() + s : s * g.n + j;
}

// One product value * dense in the accumulation type.
template <class T>
D9M_HD inline Acc<T> product(T value, T dense) {
  return widen(value) * widen(dense);
}

}  // namespace d9m::sparse
