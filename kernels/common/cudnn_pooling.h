// The legacy cuDNN max-pooling backward as d9m's variant pair: cudnn.max (CUDNN_POOLING_MAX) and
// cudnn.max_deterministic (CUDNN_POOLING_MAX_DETERMINISTIC), each one cudnnPoolingBackward per
// trial on descriptors its family sets up once (maxpool2d_bwd's 4-D NHWC ones, max_pool3d_bwd's
// 5-D NCDHW ones). cuDNN reads x, y and dy and finds each window's maximum itself. Built with
// CUDA only (cudnn_pooling.cu).
#pragma once
#include <cudnn.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/common/cudnn_util.h"

namespace d9m::cudnn {

struct PoolingState {
  Handle handle;
  TensorDesc x_desc, y_desc;
  PoolDesc pool;
};

// Where the op's arguments hold cuDNN's x (the forward's input), y (its output) and dy.
struct PoolingArguments {
  int x = 0, y = 1, dy = 2;
};

// describe(mode, problem, state) sets the state's descriptors for the config, or throws
// Unsupported where cuDNN cannot express it (the case is UNSUPPORTED).
using DescribePooling = std::function<void(cudnnPoolingMode_t, const Problem&, PoolingState&)>;

std::vector<VariantDef> max_pooling_backward_variants(const std::string& op, PoolingArguments args, DescribePooling describe);

}  // namespace d9m::cudnn
