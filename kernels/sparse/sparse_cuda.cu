// CUDA variants of the sparse family, d9m's own kernels:
//   cuda.atomic   one thread per (nonzero, column of the dense operand) adds its product into
//                 its output with atomicAdd, in the accumulation type (the output itself for
//                 f32 and f64, an f32 buffer rounded afterwards for f16 and bf16): the shape of
//                 TensorFlow's sparse_tensor_dense_matmul GPU kernel, in hardware order.
//   cuda.ordered  one thread per output element gathers its products in ascending nonzero
//                 index, starting from 0: for A from the row's own range (CSR offsets, or a
//                 binary search of the sorted COO row indices); for A^T from the nonzero indices
//                 sorted by column with CUB's radix sort, which is stable, so each column keeps
//                 ascending index. The same float operations per output as cpu.serial, so its
//                 bits (contraction is off on both sides).
#include <cub/device/device_radix_sort.cuh>

#include <type_traits>

#include "kernels/common/cuda_check.h"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/sparse/sparse.h"

namespace d9m::sparse {
namespace {

template <class T>
struct Operands {
  Geometry g;
  const std::int32_t* row_arg;  // row offsets (CSR) or row indices (COO)
  const std::int32_t* cols;
  const T* values;
  const T* dense;
};

template <class T>
Operands<T> operands(const KernelArgs& a) {
  return {a.problem.geom<Geometry>(), a.in<std::int32_t>(kRowsArg), a.in<std::int32_t>(kColsArg), a.in<T>(kValuesArg),
          a.in<T>(kDenseArg)};
}

__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }

template <class T>
__global__ void atomic_kernel(Operands<T> v, Acc<T>* acc) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= v.g.nnz * v.g.n) return;
  const std::int64_t k = i / v.g.n, j = i % v.g.n;
  const std::int64_t r = v.g.format == Format::csr ? csr_row_of(v.row_arg, v.g.rows, k) : v.row_arg[k];
  std::int64_t t, s;
  target_source(v.g, r, v.cols[k], t, s);
  atomic_add(acc + t * v.g.n + j, product(v.values[k], v.dense[dense_index(v.g, s, j)]));
}

template <class T>
__global__ void narrow_kernel(std::int64_t n, const Acc<T>* acc, T* out) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (o < n) out[o] = narrow<T>(acc[o]);
}

template <class T>
void atomic(const KernelArgs& a) {
  const Operands<T> v = operands<T>(a);
  const cudaStream_t s = cuda::stream_of(a);
  const auto outputs = static_cast<std::size_t>(v.g.outputs());
  // f32 and f64 add into the output itself; the 16-bit types into an f32 buffer, rounded once.
  constexpr bool in_place = std::is_same_v<T, Acc<T>>;
  DeviceBuffer buffer(in_place ? 0 : outputs * sizeof(Acc<T>), s);
  Acc<T>* acc = in_place ? reinterpret_cast<Acc<T>*>(a.output) : buffer.get<Acc<T>>();
  D9M_CUDA_CHECK(cudaMemsetAsync(acc, 0, outputs * sizeof(Acc<T>), s));  // +0 in f32 and f64
  const auto threads = static_cast<std::size_t>(v.g.nnz * v.g.n);
  if (threads > 0) {
    atomic_kernel<T><<<blocks_for(threads), 256, 0, s>>>(v, acc);
    D9M_CUDA_CHECK_LAUNCH();
  }
  if (!in_place && outputs > 0) {
    narrow_kernel<T><<<blocks_for(outputs), 256, 0, s>>>(v.g.outputs(), acc, a.out<T>());
    D9M_CUDA_CHECK_LAUNCH();
  }
}

// Output element o = t * n + j of op(A) b, from A's own rows.
template <class T>
__global__ void gather_rows_kernel(Operands<T> v, T* out) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (o >= v.g.outputs()) return;
  const std::int64_t t = o / v.g.n, j = o % v.g.n;
  std::int64_t begin, end;
  row_range(v.g, v.row_arg, t, begin, end);
  Acc<T> acc = 0;
  for (std::int64_t k = begin; k < end; ++k) acc = acc + product(v.values[k], v.dense[dense_index(v.g, v.cols[k], j)]);
  out[o] = narrow<T>(acc);
}

// Output element o = c * n + j of A^T b: column c's nonzeros are order[p] for the positions p
// where sorted_cols[p] == c, in ascending nonzero index (the sort is stable).
template <class T>
__global__ void gather_columns_kernel(Operands<T> v, const std::int32_t* sorted_cols, const std::int32_t* order,
                                      const std::int32_t* row_of, T* out) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (o >= v.g.outputs()) return;
  const std::int64_t c = o / v.g.n, j = o % v.g.n;
  const std::int64_t begin = lower_bound(sorted_cols, v.g.nnz, c), end = lower_bound(sorted_cols, v.g.nnz, c + 1);
  Acc<T> acc = 0;
  for (std::int64_t p = begin; p < end; ++p) {
    const std::int64_t k = order[p];
    acc = acc + product(v.values[k], v.dense[dense_index(v.g, row_of[k], j)]);
  }
  out[o] = narrow<T>(acc);
}

// CSR's row of every nonzero (COO stores it), and the nonzero indices 0..nnz-1 to be sorted.
__global__ void rows_and_indices_kernel(const std::int32_t* offsets, std::int64_t rows, std::int64_t nnz,
                                        std::int32_t* row_of, std::int32_t* index) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= nnz) return;
  if (row_of) row_of[k] = static_cast<std::int32_t>(csr_row_of(offsets, rows, k));
  index[k] = static_cast<std::int32_t>(k);
}

int bits_for(std::int64_t values) {
  int bits = 1;
  while (bits < 31 && (std::int64_t{1} << bits) < values) ++bits;
  return bits;
}

template <class T>
void ordered(const KernelArgs& a) {
  const Operands<T> v = operands<T>(a);
  const cudaStream_t s = cuda::stream_of(a);
  const auto outputs = static_cast<std::size_t>(v.g.outputs());
  if (outputs == 0) return;
  if (!v.g.transpose) {
    gather_rows_kernel<T><<<blocks_for(outputs), 256, 0, s>>>(v, a.out<T>());
    D9M_CUDA_CHECK_LAUNCH();
    return;
  }
  const auto nnz = static_cast<std::size_t>(v.g.nnz);
  const bool csr = v.g.format == Format::csr;
  DeviceBuffer rows(csr ? nnz * sizeof(std::int32_t) : 0, s), index(nnz * sizeof(std::int32_t), s);
  DeviceBuffer sorted_cols(nnz * sizeof(std::int32_t), s), order(nnz * sizeof(std::int32_t), s);
  if (nnz > 0) {
    rows_and_indices_kernel<<<blocks_for(nnz), 256, 0, s>>>(v.row_arg, v.g.rows, v.g.nnz, csr ? rows.get<std::int32_t>() : nullptr,
                                                            index.get<std::int32_t>());
    D9M_CUDA_CHECK_LAUNCH();
    // Column indices are in [0, cols): as unsigned keys their low bits_for(cols) bits sort them.
    const auto* keys_in = reinterpret_cast<const std::uint32_t*>(v.cols);
    auto* keys_out = sorted_cols.get<std::uint32_t>();
    const int items = static_cast<int>(v.g.nnz);  // at most 2^31-1 (sparse_ops.cpp)
    std::size_t temp_bytes = 0;
    D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, index.get<std::int32_t>(),
                                                   order.get<std::int32_t>(), items, 0, bits_for(v.g.cols), s));
    DeviceBuffer temp(temp_bytes, s);
    D9M_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys_in, keys_out, index.get<std::int32_t>(),
                                                   order.get<std::int32_t>(), items, 0, bits_for(v.g.cols), s));
  }
  gather_columns_kernel<T><<<blocks_for(outputs), 256, 0, s>>>(v, sorted_cols.get<std::int32_t>(), order.get<std::int32_t>(),
                                                               csr ? rows.get<std::int32_t>() : v.row_arg, a.out<T>());
  D9M_CUDA_CHECK_LAUNCH();
}

std::vector<VariantDef> variants(const std::string& op) {
  return {{.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic("a thread per (nonzero, dense column) adds its product with atomicAdd in hardware "
                                         "scheduling order (f32 accumulator for 16-bit types)"),
           .run = typed([](const KernelArgs& a, auto tag) { atomic<decltype(tag)>(a); })},
          {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("a thread per output gathers its products in ascending nonzero index (A^T: nonzeros "
                                      "stably radix-sorted by column with CUB); the bits of cpu.serial"),
           .run = typed([](const KernelArgs& a, auto tag) { ordered<decltype(tag)>(a); }),
           .bit_equal_to = "cpu.serial"}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("spmv"));
D9M_REGISTER_VARIANTS(variants("spmm"));
D9M_REGISTER_VARIANTS(variants("sparse_dense_matmul"));

}  // namespace d9m::sparse
