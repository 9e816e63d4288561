// The pool family's ops: parameters, tensors and inputs (pool.h has the semantics).
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/pool/pool.h"

namespace d9m::pool {
namespace {

// ---- parameters and geometry ----------------------------------------------------------------

// The max pools' input values: v(r) = (128 + r % 128) 2^(r / 128 - 21) for r < kDistinct, strictly
// increasing in r, with 8 significant bits and inside f16's normal range [2^-14, 2^15]: exact in
// f16, bf16, f32 and f64 alike. So the f32 values the fill ranks are the values every dtype's
// kernels see (and f64's offsets keep order and equality, inputs.h), and the forward's indices
// computed here hold at every precision.
constexpr std::int64_t kDistinct = 29 * 128;

float level_value(std::int64_t r) {
  return std::ldexp(static_cast<float>(128 + r % 128), static_cast<int>(r / 128) - 21);
}

ParamSpec levels_param() {
  return op::integer_or("levels", 0, "input values: 0 all distinct within a plane (of up to 3712 elements; unique maxima), "
                                     "L > 0 drawn from L levels (ties between maxima)", 0);
}

std::int64_t levels_of(const Params& p) {
  const std::int64_t levels = p.integer("levels");
  if (levels > kDistinct)
    throw InvalidConfig("levels", "at most " + std::to_string(kDistinct) + " levels are exact in f16 and bf16");
  return levels;
}

std::vector<ParamSpec> adaptive_params(bool max) {
  std::vector<ParamSpec> p = {op::integer("n", "batch"), op::integer("c", "channels"), op::integer("h", "input height"),
                              op::integer("w", "input width"), op::integer("out_h", "output height (output_size[0])"),
                              op::integer("out_w", "output width (output_size[1])")};
  if (max) p.push_back(levels_param());
  return p;
}

Adaptive2d adaptive_geometry(const Params& p, bool max) {
  Adaptive2d g;
  g.n = p.integer("n");
  g.c = p.integer("c");
  g.y = {p.integer("h"), p.integer("out_h")};
  g.x = {p.integer("w"), p.integer("out_w")};
  if (max) g.levels = levels_of(p);
  op::checked_product({g.n, g.c, g.y.in, g.x.in}, "h");
  op::checked_product({g.n, g.c, g.y.out, g.x.out}, "out_h");
  if (max && g.plane_in() > (std::int64_t{1} << 31) - 1)
    throw InvalidConfig("h", "a plane of more than 2^31-1 elements: its indices do not fit int32");
  return g;
}

std::vector<ParamSpec> pool3d_params(bool max) {
  std::vector<ParamSpec> p = {op::integer("n", "batch"), op::integer("c", "channels"), op::integer("d", "input depth"),
                              op::integer("h", "input height"), op::integer("w", "input width")};
  for (const char* dim : {"d", "h", "w"}) p.push_back(op::integer(std::string("kernel_") + dim, std::string("window extent along ") + dim));
  for (const char* dim : {"d", "h", "w"}) p.push_back(op::integer(std::string("stride_") + dim, std::string("stride along ") + dim));
  for (const char* dim : {"d", "h", "w"})
    p.push_back(op::integer_or(std::string("padding_") + dim, 0, std::string("padding on both sides along ") + dim, 0));
  if (max)
    for (const char* dim : {"d", "h", "w"})
      p.push_back(op::integer_or(std::string("dilation_") + dim, 1, std::string("dilation along ") + dim));
  p.push_back(op::boolean_or("ceil_mode", false, "PyTorch's ceil_mode: a last, partial window where the floor leaves input over"));
  if (max) {
    p.push_back(levels_param());
  } else {
    p.push_back(op::boolean_or("count_include_pad", true, "PyTorch's count_include_pad: divide by the padded window's size"));
    p.push_back(op::integer_or("divisor_override", 0, "PyTorch's divisor_override (0: none)", 0));
  }
  return p;
}

// One dimension of avg_pool3d / max_pool3d, with ATen's output extent and shape checks.
Pool1d pool1d(const Params& p, const std::string& dim, bool max, bool ceil_mode) {
  Pool1d w;
  w.in = p.integer(dim);
  w.k = p.integer("kernel_" + dim);
  w.stride = p.integer("stride_" + dim);
  w.pad = p.integer("padding_" + dim);
  w.dilation = max ? p.integer("dilation_" + dim) : 1;
  if (w.pad > w.k / 2)
    throw InvalidConfig("padding_" + dim, "PyTorch requires padding <= kernel / 2 (" + std::to_string(w.pad) + " > " +
                                              std::to_string(w.k) + " / 2)");
  if (!max && w.in < w.k)
    throw InvalidConfig("kernel_" + dim, "avg_pool3d: the input (" + std::to_string(w.in) + ") is smaller than the kernel");
  const std::int64_t span = op::checked_product({w.dilation, w.k - 1}, "dilation_" + dim) + 1;
  w.out = floor_div(w.in + 2 * w.pad - span + (ceil_mode ? w.stride - 1 : 0), w.stride) + 1;
  if (ceil_mode && (w.out - 1) * w.stride >= w.in + w.pad) --w.out;
  if (w.out < 1)
    throw InvalidConfig("kernel_" + dim, "the output extent along " + dim + " is " + std::to_string(w.out) + ": the window does not fit");
  if (max)  // every window needs a tap inside the input, or its index would point outside
    for (std::int64_t o = 0; o < w.out; ++o)
      if (w.max_lo(o) >= w.max_hi(o))
        throw InvalidConfig("dilation_" + dim, "window " + std::to_string(o) + " along " + dim + " has no tap inside the input");
  return w;
}

Pool3d pool3d_geometry(const Params& p, bool max) {
  Pool3d g;
  g.n = p.integer("n");
  g.c = p.integer("c");
  const bool ceil_mode = p.boolean("ceil_mode");
  g.z = pool1d(p, "d", max, ceil_mode);
  g.y = pool1d(p, "h", max, ceil_mode);
  g.x = pool1d(p, "w", max, ceil_mode);
  if (max) {
    g.levels = levels_of(p);
  } else {
    g.count_include_pad = p.boolean("count_include_pad");
    g.divisor_override = p.integer("divisor_override");
  }
  op::checked_product({g.n, g.c, g.z.in, g.y.in, g.x.in}, "d");
  op::checked_product({g.n, g.c, g.z.out, g.y.out, g.x.out}, "d");
  if (max && g.plane_in() > (std::int64_t{1} << 31) - 1)
    throw InvalidConfig("d", "a plane of more than 2^31-1 elements: its indices do not fit int32");
  return g;
}

// ---- inputs ---------------------------------------------------------------------------------

// The max pools' input, plane by plane: levels 0 gives each plane's elements distinct values (a
// random permutation of the ranks, CounterRng-driven Fisher-Yates), so every window has one
// maximum; levels L draws each element's rank from [0, L), so maxima tie. Either way the values
// are exact in every dtype (level_value).
void fill_max_input(FillTarget& t, std::int64_t plane, std::int64_t levels) {
  const CounterRng rng(t.seed, t.stream);
  auto* x = static_cast<float*>(t.data);
  const auto n = static_cast<std::uint64_t>(t.desc.numel());
  if (levels > 0) {
    for (std::uint64_t i = 0; i < n; ++i) x[i] = level_value(rng.below(i, static_cast<std::uint32_t>(levels)));
    return;
  }
  const auto size = static_cast<std::uint64_t>(plane);
  std::vector<std::int64_t> rank(size);
  for (std::uint64_t base = 0; base < n; base += size) {
    std::iota(rank.begin(), rank.end(), std::int64_t{0});
    for (std::uint64_t j = size - 1; j > 0; --j) std::swap(rank[j], rank[rng.below(base + j, static_cast<std::uint32_t>(j + 1))]);
    for (std::uint64_t j = 0; j < size; ++j) x[base + j] = level_value(rank[j] % kDistinct);
  }
}

// grad_output in [-1, 1) (random) or small integers (exact); the forward's input, indices and,
// for max_pool3d, its output.
void fill_adaptive_max(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  const auto& g = pr.geom<Adaptive2d>();
  fill::floats(in[0], mode);
  fill_max_input(in[1], g.plane_in(), g.levels);
  const auto* x = static_cast<const float*>(in[1].data);
  auto* idx = static_cast<std::int32_t*>(in[2].data);
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane)
    for (std::int64_t oh = 0; oh < g.y.out; ++oh)
      for (std::int64_t ow = 0; ow < g.x.out; ++ow)
        idx[(plane * g.y.out + oh) * g.x.out + ow] = adaptive_argmax(g, x + plane * g.plane_in(), oh, ow);
}

void fill_max3d(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  const auto& g = pr.geom<Pool3d>();
  fill::floats(in[0], mode);
  fill_max_input(in[1], g.plane_in(), g.levels);
  const auto* x = static_cast<const float*>(in[1].data);
  auto* idx = static_cast<std::int32_t*>(in[2].data);
  auto* y = static_cast<float*>(in[3].data);
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane)
    for (std::int64_t od = 0; od < g.z.out; ++od)
      for (std::int64_t oh = 0; oh < g.y.out; ++oh)
        for (std::int64_t ow = 0; ow < g.x.out; ++ow) {
          const std::int64_t o = ((plane * g.z.out + od) * g.y.out + oh) * g.x.out + ow;
          idx[o] = pool3d_argmax(g, x + plane * g.plane_in(), od, oh, ow);
          y[o] = x[plane * g.plane_in() + idx[o]];
        }
}

// Sums of a few window gradients per input: rounding only.
constexpr double kTolerance = 1e-5;

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "adaptive_avg_pool2d_bwd", .family = "pool",
    .summary = "PyTorch adaptive_avg_pool2d backward (NCHW): grad_output / kW / kH added to every input of its adaptive window",
    .params = adaptive_params(false),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Adaptive2d g = adaptive_geometry(p, false);
      return Problem{{op::f32("grad_output", {g.n, g.c, g.y.out, g.x.out})}, op::f32("grad_input", {g.n, g.c, g.y.in, g.x.in}), g};
    },
    .fill = [](const Problem&, FillMode mode, std::vector<FillTarget>& in) { fill::floats(in[0], mode); },
    .batch = [](const Params&) { return BatchAxes{"n", {0}, 0}; }});

D9M_REGISTER_OP(OpDef{
    .name = "adaptive_max_pool2d_bwd", .family = "pool",
    .summary = "PyTorch adaptive_max_pool2d backward (NCHW): grad_output added at the forward's index (first maximum)",
    .params = adaptive_params(true),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Adaptive2d g = adaptive_geometry(p, true);
      const Shape in{g.n, g.c, g.y.in, g.x.in}, out{g.n, g.c, g.y.out, g.x.out};
      return Problem{{op::f32("grad_output", out), op::f32("input", in), op::i32("indices", out)}, op::f32("grad_input", in), g};
    },
    .fill = fill_adaptive_max,
    .batch = [](const Params&) { return BatchAxes{"n", {0, 0, 0}, 0}; }});

D9M_REGISTER_OP(OpDef{
    .name = "avg_pool3d_bwd", .family = "pool",
    .summary = "PyTorch avg_pool3d backward (NCDHW): grad_output / divisor added to every input of its clipped window",
    .params = pool3d_params(false),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Pool3d g = pool3d_geometry(p, false);
      return Problem{{op::f32("grad_output", {g.n, g.c, g.z.out, g.y.out, g.x.out})},
                     op::f32("grad_input", {g.n, g.c, g.z.in, g.y.in, g.x.in}), g};
    },
    .fill = [](const Problem&, FillMode mode, std::vector<FillTarget>& in) { fill::floats(in[0], mode); },
    .batch = [](const Params&) { return BatchAxes{"n", {0}, 0}; }});

D9M_REGISTER_OP(OpDef{
    .name = "max_pool3d_bwd", .family = "pool",
    .summary = "PyTorch max_pool3d_with_indices backward (NCDHW, dilation): grad_output added at the forward's index (first maximum)",
    .params = pool3d_params(true),
    .tolerance = kTolerance,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Pool3d g = pool3d_geometry(p, true);
      const Shape in{g.n, g.c, g.z.in, g.y.in, g.x.in}, out{g.n, g.c, g.z.out, g.y.out, g.x.out};
      return Problem{{op::f32("grad_output", out), op::f32("input", in), op::i32("indices", out), op::f32("output", out)},
                     op::f32("grad_input", in), g};
    },
    .fill = fill_max3d,
    .batch = [](const Params&) { return BatchAxes{"n", {0, 0, 0, 0}, 0}; },
    .implementation_choice = [](const Problem& p) -> std::optional<std::string> {
      if (p.geom<Pool3d>().levels == 0) return std::nullopt;
      return "which of tied maxima receives the gradient (the fill draws from a few levels so that maxima tie): a library "
             "that finds the maximum again, rather than reading the forward's index, chooses its own";
    }});

}  // namespace d9m::pool
