// CUDA variants of the pool family:
//   cuda.atomic   PyTorch's atomic kernels' thread layout (pool.h): for the adaptive pools blocks
//                 (N C, max(16 / C, 1)) of threads (32, 8), each thread striding over the plane's
//                 outputs (8 gridDim.y rows, 32 columns apart); for the 3-D pools a thread per
//                 output element, blocks (32, 8) over (OW, OH) and grid z over slices x OD in
//                 chunks of 65535. Each output's contributions are atomicAdds in the dtype.
//   cuda.ordered  one thread per grad_input element gathers its windows in increasing order
//                 (pool.h): cpu.serial's bits, no sort, memory of the output only.
#include <algorithm>
#include <climits>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/pool/pool.h"

namespace d9m::pool {
namespace {

// atomic_adaptive_average_gradinput / atomicadaptivemaxgradinput: plane blockIdx.x.
template <class T, class En>
__global__ void adaptive_atomic_kernel(std::int64_t out_h, std::int64_t out_w, T* out, En en) {
  accumulate::cuda::AtomicEmit<T> emit{out};
  const std::int64_t plane = blockIdx.x;
  for (std::int64_t oh = blockIdx.y * blockDim.y + threadIdx.y; oh < out_h; oh += blockDim.y * gridDim.y)
    for (std::int64_t ow = threadIdx.x; ow < out_w; ow += blockDim.x)
      en(static_cast<std::size_t>((plane * out_h + oh) * out_w + ow), emit);
}

template <class T, class En>
void adaptive_atomic(const KernelArgs& a, const Adaptive2d& g, En en) {
  const std::int64_t planes = g.n * g.c;
  if (planes > INT_MAX) throw Unsupported("more than 2^31-1 planes: PyTorch's grid puts one in each block of grid x");
  const dim3 blocks(static_cast<unsigned>(planes), static_cast<unsigned>(std::max<std::int64_t>(16 / g.c, 1))), threads(32, 8);
  adaptive_atomic_kernel<T><<<blocks, threads, 0, cuda::stream_of(a)>>>(g.y.out, g.x.out, a.out<T>(), en);
  D9M_CUDA_CHECK_LAUNCH();
}

// avg_pool3d_cuda_update_grad_input_atomic / max_pool3d_with_indices_backward_single_out_frame:
// column blockIdx.x * 32 + threadIdx.x, row blockIdx.y * 8 + threadIdx.y, slice x frame
// blockIdx.z + offset_z.
template <class T, class En>
__global__ void pool3d_atomic_kernel(Pool3d g, std::int64_t offset_z, T* out, En en) {
  const std::int64_t ow = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t oh = blockIdx.y * static_cast<std::int64_t>(blockDim.y) + threadIdx.y;
  const std::int64_t z = blockIdx.z + offset_z;  // slice * OD + od
  if (ow >= g.x.out || oh >= g.y.out) return;
  accumulate::cuda::AtomicEmit<T> emit{out};
  en(static_cast<std::size_t>((z * g.y.out + oh) * g.x.out + ow), emit);
}

template <class T, class En>
void pool3d_atomic(const KernelArgs& a, const Pool3d& g, En en) {
  const std::int64_t total_z = g.n * g.c * g.z.out;
  const dim3 block(32, 8);
  const auto gx = static_cast<unsigned>((g.x.out + 31) / 32), gy = static_cast<unsigned>((g.y.out + 7) / 8);
  if (gy > 65535) throw Unsupported("more than 65535 blocks of 8 output rows: PyTorch's grid y");
  for (std::int64_t offset = 0; offset < total_z; offset += 65535) {
    const dim3 grid(gx, gy, static_cast<unsigned>(std::min<std::int64_t>(total_z - offset, 65535)));
    pool3d_atomic_kernel<T><<<grid, block, 0, cuda::stream_of(a)>>>(g, offset, a.out<T>(), en);
    D9M_CUDA_CHECK_LAUNCH();
  }
}

enum class Kind { adaptive_avg, adaptive_max, avg3d, max3d };

void atomic_run(const KernelArgs& a, Kind op) {
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* grad = a.in<T>(0);
    if (op == Kind::adaptive_avg) {
      const auto& g = a.problem.geom<Adaptive2d>();
      adaptive_atomic<T>(a, g, AdaptiveAvgGrads<T>{g, grad});
    } else if (op == Kind::adaptive_max) {
      const auto& g = a.problem.geom<Adaptive2d>();
      adaptive_atomic<T>(a, g, IndexedGrads<T>{g.plane_in(), g.plane_out(), grad, a.in<std::int32_t>(2)});
    } else if (op == Kind::avg3d) {
      const auto& g = a.problem.geom<Pool3d>();
      pool3d_atomic<T>(a, g, AvgPool3dGrads<T>{g, grad});
    } else {
      const auto& g = a.problem.geom<Pool3d>();
      pool3d_atomic<T>(a, g, IndexedGrads<T>{g.plane_in(), g.plane_out(), grad, a.in<std::int32_t>(2)});
    }
  });
}

// Device lambdas may not live in a generic lambda: one function per dtype.
template <class T>
void ordered_typed(const KernelArgs& a, Kind op) {
  const T* grad = a.in<T>(0);
  T* out = a.out<T>();
  const auto n = static_cast<std::size_t>(a.problem.output.numel());
  if (op == Kind::adaptive_avg) {
    const Adaptive2d g = a.problem.geom<Adaptive2d>();
    cuda::for_each_index(a, n, [=] __device__(std::size_t e) {
      const auto i = static_cast<std::int64_t>(e);
      out[e] = adaptive_avg_gather(g, grad, i / g.plane_in(), i / g.x.in % g.y.in, i % g.x.in);
    });
  } else if (op == Kind::adaptive_max) {
    const Adaptive2d g = a.problem.geom<Adaptive2d>();
    const auto* idx = a.in<std::int32_t>(2);
    cuda::for_each_index(a, n, [=] __device__(std::size_t e) {
      const auto i = static_cast<std::int64_t>(e);
      out[e] = adaptive_max_gather(g, grad, idx, i / g.plane_in(), i / g.x.in % g.y.in, i % g.x.in);
    });
  } else if (op == Kind::avg3d) {
    const Pool3d g = a.problem.geom<Pool3d>();
    cuda::for_each_index(a, n, [=] __device__(std::size_t e) {
      const auto i = static_cast<std::int64_t>(e);
      out[e] = avg3d_gather(g, grad, i / g.plane_in(), i / (g.x.in * g.y.in) % g.z.in, i / g.x.in % g.y.in, i % g.x.in);
    });
  } else {
    const Pool3d g = a.problem.geom<Pool3d>();
    const auto* idx = a.in<std::int32_t>(2);
    cuda::for_each_index(a, n, [=] __device__(std::size_t e) {
      const auto i = static_cast<std::int64_t>(e);
      out[e] = max3d_gather(g, grad, idx, i / g.plane_in(), i / (g.x.in * g.y.in) % g.z.in, i / g.x.in % g.y.in, i % g.x.in);
    });
  }
}

void ordered_run(const KernelArgs& a, Kind op) {
  with_float_type(a.problem.dtype, [&](auto tag) { ordered_typed<decltype(tag)>(a, op); });
}

std::vector<VariantDef> variants(const std::string& op, Kind kind) {
  return {{.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic,
           .claim = op::nondeterministic("atomicAdd in hardware scheduling order (PyTorch's kernel: a thread per output)"),
           .run = [kind](const KernelArgs& a) { atomic_run(a, kind); }},
          {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
           .claim = op::deterministic("one thread per input gathers the windows that cover it in increasing window order "
                                      "(bit-equal to cpu.serial)"),
           .run = [kind](const KernelArgs& a) { ordered_run(a, kind); }, .bit_equal_to = "cpu.serial"}};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("adaptive_avg_pool2d_bwd", Kind::adaptive_avg));
D9M_REGISTER_VARIANTS(variants("adaptive_max_pool2d_bwd", Kind::adaptive_max));
D9M_REGISTER_VARIANTS(variants("avg_pool3d_bwd", Kind::avg3d));
D9M_REGISTER_VARIANTS(variants("max_pool3d_bwd", Kind::max3d));

}  // namespace d9m::pool
