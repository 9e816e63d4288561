// The reduce family's ops: parameters, tensors and inputs (reduce.h has the semantics).
#include <algorithm>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/reduce/reduce.h"

namespace d9m::reduce {
namespace {

// See reduce.h: the tolerance grows with sqrt(N) times the unit roundoff; this holds to N = 2^24.
constexpr double kTolerance = 1e-3;

ParamSpec length_param() { return op::integer("n", "elements of x (N)"); }

void fill_x(FillTarget& t, FillMode mode) { fill::mixed_magnitude_floats(t, mode, kInputBinades); }

// Segment lengths drawn from weights that span four orders of magnitude: segment s weighs 0
// (empty) with probability 3/16, else 1 + an integer below 2^r, r uniform in [3, 16). The
// offsets are the weights' running sums scaled to N (floor), so offsets[0] = 0, offsets[S] = N.
// run * N needs up to 2^78 (S < 2^31 weights below 2^16, N < 2^31): 128-bit, as GCC and Clang spell it.
__extension__ typedef unsigned __int128 Wide;

void fill_offsets(FillTarget& t, std::int64_t n) {
  const CounterRng rng(t.seed, t.stream);
  const std::int64_t segments = t.desc.numel() - 1;
  std::vector<std::uint64_t> weight(static_cast<std::size_t>(segments));
  Wide total = 0;
  for (std::int64_t s = 0; s < segments; ++s) {
    const auto u = static_cast<std::uint64_t>(s);
    const std::uint32_t r = rng.below(2 * u, 16);
    weight[static_cast<std::size_t>(s)] = r < 3 ? 0 : 1 + rng.below(2 * u + 1, std::uint32_t{1} << r);
    total += weight[static_cast<std::size_t>(s)];
  }
  if (total == 0) {  // every segment drew empty: spread N evenly instead
    std::fill(weight.begin(), weight.end(), 1);
    total = static_cast<Wide>(segments);
  }
  auto* off = static_cast<std::int32_t*>(t.data);
  Wide run = 0;
  for (std::int64_t s = 0; s < segments; ++s) {
    off[s] = static_cast<std::int32_t>(run * static_cast<std::uint64_t>(n) / total);
    run += weight[static_cast<std::size_t>(s)];
  }
  off[segments] = static_cast<std::int32_t>(n);
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "reduce_sum", .family = "reduce",
    .summary = "Sum: sum[1] = x[0] + ... + x[N-1] (cub::DeviceReduce::Sum)",
    .params = {length_param()},
    .tolerance = kTolerance,
    .dtypes = {DType::f32, DType::f64},
    .plan = [](const Params& p) {
      const std::int64_t n = p.integer("n");
      return Problem{{op::f32("x", {n})}, op::f32("sum", {1}), Geometry{n, 0}};
    },
    .fill = [](const Problem&, FillMode mode, std::vector<FillTarget>& in) { fill_x(in[0], mode); }});

D9M_REGISTER_OP(OpDef{
    .name = "cumsum", .family = "reduce",
    .summary = "Cumsum (inclusive): out[i] = x[0] + ... + x[i] (cub::DeviceScan; PyTorch's CUDA float cumsum, pytorch#75240)",
    .params = {length_param()},
    .tolerance = kTolerance,
    .dtypes = {DType::f32, DType::f64},
    .plan = [](const Params& p) {
      const std::int64_t n = p.integer("n");
      return Problem{{op::f32("x", {n})}, op::f32("out", {n}), Geometry{n, 0}};
    },
    .fill = [](const Problem&, FillMode mode, std::vector<FillTarget>& in) { fill_x(in[0], mode); }});

D9M_REGISTER_OP(OpDef{
    .name = "segmented_reduce", .family = "reduce",
    .summary = "SegmentSum over CSR offsets: sums[s] = x[offsets[s]] + ... + x[offsets[s+1]-1] (cub::DeviceSegmentedReduce::Sum)",
    .params = {length_param(), op::integer("segments", "number of segments (S); offsets[S+1] is drawn from the seed")},
    .tolerance = kTolerance,
    .dtypes = {DType::f32, DType::f64},
    .plan = [](const Params& p) {
      const std::int64_t n = p.integer("n"), s = p.integer("segments");
      if (s >= kMaxIntegerParam) throw InvalidConfig("segments", "offsets[segments + 1] must fit in int32 sizes");
      return Problem{{op::f32("x", {n}), op::i32("offsets", {s + 1})}, op::f32("sums", {s}), Geometry{n, s}};
    },
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      fill_x(in[0], mode);
      fill_offsets(in[1], pr.geom<Geometry>().n);
    }});

}  // namespace d9m::reduce
