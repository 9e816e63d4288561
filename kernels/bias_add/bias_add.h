// bias_add family, TensorFlow semantics, NHWC (data_format="NHWC"):
//   bias_add(value[N,H,W,C], bias[C])   -> output[n,h,w,c] = value[n,h,w,c] + bias[c]
//   bias_add_grad(out_backprop[N,H,W,C]) -> output[c] = sum over n,h,w of out_backprop[n,h,w,c]
// The reference sums rows (n,h,w) in increasing flat order, starting from +0.
#pragma once
#include <cstdint>

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

}  // namespace d9m::bias_add
