// The sparse ops: parameters, tensors, and the generated sparse matrix (sparse.h).
#include <climits>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/sparse/sparse.h"

namespace d9m::sparse {
namespace {

// The matrix's structure, shared by every op of the family.
std::vector<ParamSpec> structure_params() {
  return {op::integer("rows", "rows of the sparse matrix A"), op::integer("cols", "columns of A"),
          op::integer_or("nnz_per_row", 8, "nonzeros in each ordinary row (at most cols)", 0),
          op::integer_or("heavy_rows", 0, "rows, spread evenly, with heavy_nnz nonzeros each", 0),
          op::integer_or("heavy_nnz", 0, "nonzeros in each heavy row; 0: every column", 0)};
}

std::vector<ParamSpec> params(bool matrix) {
  std::vector<ParamSpec> p = structure_params();
  p.push_back(op::choice_or("format", "csr", {"csr", "coo"}, "storage of A: csr (row offsets) or coo (row indices, sorted)"));
  p.push_back(op::boolean_or("transpose", false, "multiply by A^T instead of A"));
  if (matrix) p.push_back(op::integer("n", "columns of the dense operand b and of the product"));
  return p;
}

// TensorFlow's names: A is a SparseTensor (COO), adjoint_a and adjoint_b transpose A and b.
std::vector<ParamSpec> tf_params() {
  std::vector<ParamSpec> p = structure_params();
  p.push_back(op::integer("n", "columns of op(b) and of the product"));
  p.push_back(op::boolean_or("adjoint_a", false, "multiply by A^T (TF's adjoint_a)"));
  p.push_back(op::boolean_or("adjoint_b", false, "b is stored [n, K] and multiplied as b^T (TF's adjoint_b)"));
  return p;
}

Geometry structure(const Params& p) {
  Geometry g;
  g.rows = p.integer("rows");
  g.cols = p.integer("cols");
  g.nnz_per_row = p.integer("nnz_per_row");
  g.heavy_rows = p.integer("heavy_rows");
  g.heavy_nnz = p.integer("heavy_nnz");
  return g;
}

Problem plan(Geometry g, bool matrix) {
  if (g.nnz_per_row > g.cols) throw InvalidConfig("nnz_per_row", "more nonzeros per row than columns");
  if (g.heavy_nnz > g.cols) throw InvalidConfig("heavy_nnz", "more nonzeros per row than columns");
  if (g.heavy_rows > g.rows) throw InvalidConfig("heavy_rows", "more heavy rows than rows");
  const std::int64_t heavy = g.heavy_nnz == 0 ? g.cols : g.heavy_nnz;
  g.nnz = op::checked_product({g.rows - g.heavy_rows, g.nnz_per_row}, "nnz_per_row") +
          op::checked_product({g.heavy_rows, heavy}, "heavy_rows");
  // Indices and row offsets are int32 (cuSPARSE's CUSPARSE_INDEX_32I, TensorFlow's int32 ids).
  if (g.nnz > INT32_MAX) throw InvalidConfig("nnz_per_row", "more than 2^31-1 nonzeros: the indices are int32");
  op::checked_product({g.out_rows(), g.n}, matrix ? "n" : "rows");
  op::checked_product({g.in_rows(), g.n}, matrix ? "n" : "rows");
  TensorDesc row_arg = g.format == Format::csr ? op::i32("row_offsets", {g.rows + 1}) : op::i32("row_indices", {g.nnz});
  Shape dense = !matrix ? Shape{g.in_rows()} : g.adjoint_b ? Shape{g.n, g.in_rows()} : Shape{g.in_rows(), g.n};
  Shape out = matrix ? Shape{g.out_rows(), g.n} : Shape{g.out_rows()};
  return Problem{{std::move(row_arg), op::i32("col_indices", {g.nnz}), op::f32("values", {g.nnz}),
                  op::f32(matrix ? "b" : "x", dense)},
                 op::f32(matrix ? "product" : "y", out), g};
}

Problem plan(const Params& p, bool matrix) {
  Geometry g = structure(p);
  g.format = p.choice("format") == "coo" ? Format::coo : Format::csr;
  g.transpose = p.boolean("transpose");
  g.n = matrix ? p.integer("n") : 1;
  return plan(g, matrix);
}

Problem tf_plan(const Params& p) {
  Geometry g = structure(p);
  g.format = Format::coo;
  g.transpose = p.boolean("adjoint_a");
  g.adjoint_b = p.boolean("adjoint_b");
  g.n = p.integer("n");
  return plan(g, true);
}

// The structure (sparse.h) from the config alone, the columns from the seed (argument 1's
// stream, so a CSR and a COO config of the same seed hold the same matrix), the values and the
// dense operand as every family's floats.
void fill(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  const auto& g = pr.geom<Geometry>();
  auto* row_arg = static_cast<std::int32_t*>(in[kRowsArg].data);
  auto* cols = static_cast<std::int32_t*>(in[kColsArg].data);
  const CounterRng rng(in[kColsArg].seed, in[kColsArg].stream);
  std::int64_t at = 0;
  if (g.format == Format::csr) row_arg[0] = 0;
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const std::int64_t k = row_nnz(g, r);
    for (std::int64_t j = 0; j < k; ++j, ++at) {
      std::int64_t lo, hi;
      stratum(g.cols, k, j, lo, hi);
      cols[at] = static_cast<std::int32_t>(lo + rng.below(static_cast<std::uint64_t>(at), static_cast<std::uint32_t>(hi - lo)));
      if (g.format == Format::coo) row_arg[at] = static_cast<std::int32_t>(r);
    }
    if (g.format == Format::csr) row_arg[r + 1] = static_cast<std::int32_t>(at);
  }
  fill::floats(in[kValuesArg], mode);
  fill::floats(in[kDenseArg], mode);
}

// Summation order shows in the last bits only; 1e-5 relative covers rows of a few thousand
// nonzeros at f32, as for matmul's K.
constexpr double kTolerance = 1e-5;

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "spmv", .family = "sparse",
    .summary = "SpMV: y = op(A) x, A sparse (CSR or COO), op(A) = A or A^T (cusparseSpMV; sparse_dense_matmul with one column)",
    .params = params(false),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) { return plan(p, false); },
    .fill = fill});

D9M_REGISTER_OP(OpDef{
    .name = "spmm", .family = "sparse",
    .summary = "SpMM: product[M,n] = op(A) b, A sparse (CSR or COO), b dense row-major (cusparseSpMM; sparse_dense_matmul has TF's parameters)",
    .params = params(true),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) { return plan(p, true); },
    .fill = fill});

D9M_REGISTER_OP(OpDef{
    .name = "sparse_dense_matmul", .family = "sparse",
    .summary = "SparseTensorDenseMatMul: product = op(A) op(b), A a COO SparseTensor, adjoint_a / adjoint_b transpose (tf.sparse.sparse_dense_matmul)",
    .params = tf_params(),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = tf_plan,
    .fill = fill});

}  // namespace d9m::sparse
