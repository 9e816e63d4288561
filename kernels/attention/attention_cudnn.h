// The cuDNN frontend the attention family's cuDNN variants were compiled against (the pinned
// nvidia-cudnn-frontend wheel), for the stack fingerprint: CUDNN_FRONTEND_VERSION as
// attention_cudnn.cpp saw it, major * 10000 + minor * 100 + patch. Defined there, so only in a
// CUDA build.
#pragma once

namespace d9m::attention {
int cudnn_frontend_version();
}
