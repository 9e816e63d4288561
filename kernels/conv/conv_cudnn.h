// What conv2d's cuDNN variants (conv_cudnn_forward.cu) tell tests about the stack they run on.
// Declared in plain C++ so that tests built without cuDNN's headers can ask; defined only in a
// CUDA build, and every function needs a device.
#pragma once
#include <cstdint>

#include "kernels/registry.h"

namespace d9m::conv {

// cudnn.engine0 ... cudnn.engine<kMaxForwardEngines - 1> are registered, statically, before any
// device is seen. The forward-convolution graph of a config offers engines with global indices
// 0 .. G-1 (CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT), G chosen by the cuDNN build: the
// variants past G are UNSUPPORTED, naming G. The largest forward-convolution engine index named
// in public code that we know of is 42 (TensorFlow's cuDNN errata filter excludes two knob
// settings of ConvFwd_eng42), so G is at least 43 on some cuDNN 8 builds; cuDNN 9.14 and 9.19
// on an H200 offered G = 81 (reports/h200-2026-11-26), past the 64 first registered, so 128 leave
// room. A GPU test fails if a stack's G exceeds 128, so that the registry grows before an engine
// goes unaudited.
inline constexpr int kMaxForwardEngines = 128;

// G for this config's forward-convolution operation graph on device 0.
std::int64_t cudnn_forward_engine_count(const Problem& p);

}  // namespace d9m::conv
