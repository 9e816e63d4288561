// bias_add family, TensorFlow semantics, NHWC (data_format="NHWC"):
//   bias_add(value[N,H,W,C], bias[C])   -> output[n,h,w,c] = value[n,h,w,c] + bias[c]
//   bias_add_grad(out_backprop[N,H,W,C]) -> output[c] = sum over n,h,w of out_backprop[n,h,w,c]
// The reference sums rows (n,h,w) in increasing flat order, starting from +0.
// At every float dtype: sums and adds are in the dtype, one rounding per add (kernels/common/half.h
// add(): a 16-bit add through f32 rounds once, as __hadd does), as atomicAdd on __half adds.
// One variant departs from that on purpose: cuda.shared_atomic is TensorFlow's custom GPU kernel,
// which sums per block in f32 at 16 bits (bias_add_cuda.cu says how). The value check holds it to
// the op's rule like every variant; it claims no other variant's bits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace d9m::bias_add {

struct Geometry {
  std::int64_t rows = 0;  // N*H*W
  std::int64_t channels = 0;
};

// cpu.ordered for bias_add_grad: rows are cut into fixed blocks of kRowsPerBlock; each block is
// summed in row order, then the block sums in block order. The same order on a GPU is one
// thread per (block, channel) and a second pass, which is why the block size is part of the
// contract and not a tuning knob.
inline constexpr std::int64_t kRowsPerBlock = 256;

// Scatter form of bias_add_grad: source = one row (n,h,w); it adds its C values to the C outputs.
template <class T>
struct GradRows {
  std::int64_t channels;
  const T* out_backprop;

  template <class Emit>
  D9M_HD void operator()(std::size_t row, Emit& emit) const {
    const auto c = static_cast<std::size_t>(channels);
    for (std::size_t k = 0; k < c; ++k) emit(k, out_backprop[row * c + k]);
  }
};

// bias_add as 2*N*H*W*C separate adds onto -0 (the atomic variants): sources [0, n) add value,
// sources [n, 2n) add the broadcast bias. Two commutative addends: any order, the same bits.
template <class T>
struct BiasSplat {
  std::size_t elements;
  std::int64_t channels;
  const T* value;
  const T* bias;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    if (s < elements) emit(s, value[s]);
    else emit(s - elements, bias[(s - elements) % static_cast<std::size_t>(channels)]);
  }
};

}  // namespace d9m::bias_add
