// CUDA variants of the segment family:
//   cuda.atomic   one thread per data element folds it into its output with an atomic: the
//                 hardware's atomicAdd for sum and mean (as TensorFlow's kernels), a
//                 compare-and-swap loop for prod and max; mean then divides by the counts, and
//                 max's empty segments, which started from the lowest value, are set to 0
//   cuda.ordered  one thread per output element gathers its segment's rows in increasing r
//                 (segment.h): cpu.serial's bits, no sort, memory of the output only
#include <type_traits>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/segment/segment.h"

namespace d9m::segment {
namespace {

// Compare-and-swap on the bits of *p until f(old) is stored: 16-bit atomicCAS (sm_70+) for
// the half types, 32- and 64-bit for float and double.
template <class T, class F>
__device__ void atomic_update(T* p, F f) {
  if constexpr (std::is_same_v<T, float>) {
    auto* a = reinterpret_cast<unsigned int*>(p);
    unsigned int old = *a, assumed;
    do {
      assumed = old;
      old = atomicCAS(a, assumed, __float_as_uint(f(__uint_as_float(assumed))));
    } while (assumed != old);
  } else if constexpr (std::is_same_v<T, double>) {
    auto* a = reinterpret_cast<unsigned long long*>(p);
    unsigned long long old = *a, assumed;
    do {
      assumed = old;
      old = atomicCAS(a, assumed, static_cast<unsigned long long>(__double_as_longlong(f(__longlong_as_double(static_cast<long long>(assumed))))));
    } while (assumed != old);
  } else {
    auto* a = reinterpret_cast<unsigned short*>(p);
    unsigned short old = *a, assumed;
    do {
      assumed = old;
      old = atomicCAS(a, assumed, f(T{assumed}).bits);
    } while (assumed != old);
  }
}

template <class T>
void atomic(const KernelArgs& a, T) {
  const Geometry g = a.problem.geom<Geometry>();
  const T* data = a.in<T>(0);
  const std::int32_t* ids = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  const T start = identity<T>(g.reduction);
  cuda::for_each_index(a, static_cast<std::size_t>(g.segments * g.depth), [=] __device__(std::size_t i) { out[i] = start; });
  cuda::for_each_index(a, static_cast<std::size_t>(g.rows * g.depth), [=] __device__(std::size_t i) {
    const auto e = static_cast<std::int64_t>(i);
    T* o = out + ids[e / g.depth] * g.depth + e % g.depth;
    const T v = data[i];
    if (g.reduction == Reduction::sum || g.reduction == Reduction::mean) accumulate::cuda::atomic_add(o, v);
    else atomic_update(o, [&](T acc) { return combine(g.reduction, acc, v); });
  });
  if (has_last_step(g.reduction))  // mean's division, max's empty segments
    cuda::for_each_index(a, static_cast<std::size_t>(g.segments * g.depth), [=] __device__(std::size_t i) {
      const auto s = static_cast<std::int64_t>(i) / g.depth;
      out[i] = last_step(g.reduction, out[i], segment_start(ids, g.rows, s + 1) - segment_start(ids, g.rows, s));
    });
}

template <class T>
void ordered(const KernelArgs& a, T) {
  const Geometry g = a.problem.geom<Geometry>();
  const T* data = a.in<T>(0);
  const std::int32_t* ids = a.in<std::int32_t>(1);
  T* out = a.out<T>();
  cuda::for_each_index(a, static_cast<std::size_t>(g.segments * g.depth), [=] __device__(std::size_t i) {
    const auto e = static_cast<std::int64_t>(i);
    out[i] = gather(g, data, ids, e / g.depth, e % g.depth);
  });
}

std::vector<VariantDef> variants(const std::string& op, Reduction r) {
  const Claim atomic_claim =
      r == Reduction::max ? op::deterministic("atomicCAS max: a maximum (without NaN or a tie of -0 and +0) is the same in any order")
      : r == Reduction::prod ? op::nondeterministic("atomicCAS multiplies in hardware scheduling order")
                             : op::nondeterministic("atomicAdd in hardware scheduling order");
  return {
      {.op = op, .name = "cuda.atomic", .backend = Backend::cuda, .role = Role::atomic, .claim = atomic_claim,
       .run = typed([](const KernelArgs& a, auto t) { atomic(a, t); })},
      {.op = op, .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
       .claim = op::deterministic("one thread per output gathers its segment's rows in increasing row order (bit-equal to cpu.serial)"),
       .run = typed([](const KernelArgs& a, auto t) { ordered(a, t); }), .bit_equal_to = "cpu.serial"},
  };
}

}  // namespace

D9M_REGISTER_VARIANTS(variants("segment_sum", Reduction::sum));
D9M_REGISTER_VARIANTS(variants("segment_mean", Reduction::mean));
D9M_REGISTER_VARIANTS(variants("segment_prod", Reduction::prod));
D9M_REGISTER_VARIANTS(variants("segment_max", Reduction::max));

}  // namespace d9m::segment
