// TensorFlow's output size and padding for one spatial dimension (conv and pooling alike).
//   VALID: out = ceil((in - k_eff + 1) / stride), no padding
//   SAME:  out = ceil(in / stride), pad_total = max((out - 1) * stride + k_eff - in, 0),
//          pad_before = pad_total / 2 (the extra row or column goes after)
// k_eff = (k - 1) * dilation + 1.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/registry.h"

namespace d9m {

struct Window1d {
  std::int64_t in = 0, k = 1, stride = 1, dilation = 1;
  std::int64_t out = 0, pad_before = 0;
};

inline Window1d make_window(std::int64_t in, std::int64_t k, std::int64_t stride,
                            std::int64_t dilation, const std::string& padding,
                            const std::string& k_param) {
  Window1d w{in, k, stride, dilation, 0, 0};
  // Both factors are at most kMaxIntegerParam, so this cannot overflow; the window itself must
  // fit an int as its parameters do (cuDNN takes the padding, which can reach k_eff - 1, as int).
  const std::int64_t k_eff = (k - 1) * dilation + 1;
  if (k_eff > kMaxIntegerParam)
    throw InvalidConfig(k_param, "window of " + std::to_string(k_eff) + " ((" + k_param +
                                     " - 1) * dilation + 1) exceeds 2^31-1");
  if (padding == "SAME") {
    w.out = (in + stride - 1) / stride;
    const std::int64_t pad_total = std::max<std::int64_t>((w.out - 1) * stride + k_eff - in, 0);
    w.pad_before = pad_total / 2;
  } else {
    if (k_eff > in)
      throw InvalidConfig(k_param, "window of " + std::to_string(k_eff) +
                                       " exceeds the input extent " + std::to_string(in) +
                                       " with VALID padding");
    w.out = (in - k_eff + stride) / stride;
  }
  return w;
}

}  // namespace d9m
