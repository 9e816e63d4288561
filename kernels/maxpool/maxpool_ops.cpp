#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {
namespace {

// Integers exact in every dtype (bf16 holds those up to 256).
constexpr std::int64_t kMaxLevels = 256;

Geometry geometry(const Params& p) {
  const auto& pad = p.choice("padding");
  Geometry g{p.integer("n"), p.integer("c"),
             make_window(p.integer("h"), p.integer("ksize_h"), p.integer("stride_h"), 1, pad, "ksize_h"),
             make_window(p.integer("w"), p.integer("ksize_w"), p.integer("stride_w"), 1, pad, "ksize_w"), p.integer("levels")};
  if (g.levels > kMaxLevels) throw InvalidConfig("levels", "at most " + std::to_string(kMaxLevels) + " levels are exact in bf16");
  return g;
}

// orig_input (maxpool2d_bwd) and input (maxpool2d): on the random grid in both modes, since max
// pooling only selects (exactness only concerns the sums of maxpool2d_bwd's grad). Argmax ties are
// then rare (at f32; the 16-bit dtypes round some neighbours onto one value), and where they occur
// every variant breaks them the same way. With `levels` L it takes the integers [0, L) instead, so
// that most windows tie and the first-maximum rule decides.
void fill_pool_input(FillTarget& t, const Geometry& g) {
  if (g.levels > 0) {
    const CounterRng rng(t.seed, t.stream);
    auto* x = static_cast<float*>(t.data);
    for (std::int64_t i = 0; i < t.desc.numel(); ++i)
      x[i] = static_cast<float>(rng.below(static_cast<std::uint64_t>(i), static_cast<std::uint32_t>(g.levels)));
  } else {
    fill::floats(t, FillMode::random);
  }
}

void fill_bwd(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  // orig_output is maxpool2d of the f32 values (pool_at, maxpool2d's own code): rounding to the
  // dtype is monotone and keeps equal values equal, so it is the pool of the rounded input too.
  const auto& g = pr.geom<Geometry>();
  fill_pool_input(in[0], g);
  const auto* x = static_cast<const float*>(in[0].data);
  auto* y = static_cast<float*>(in[1].data);
  for (std::int64_t o = 0; o < in[1].desc.numel(); ++o) y[o] = pool_at<float>(g, x, o);
  fill::floats(in[2], mode);
}

// The parameters of both ops: one config gives a forward and its backward.
std::vector<ParamSpec> params() {
  return {op::integer("n", "batch"), op::integer("h", "height"), op::integer("w", "width"),
          op::integer("c", "channels"), op::integer("ksize_h", "window height"),
          op::integer("ksize_w", "window width"), op::integer("stride_h", "vertical stride"),
          op::integer("stride_w", "horizontal stride"),
          op::choice_or("padding", "VALID", {"VALID", "SAME"}, "TensorFlow padding"),
          op::added_later(op::integer_or("levels", 0, "the pooled input (orig_input, input): 0 random values, L > 0 the integers [0, L), so maxima tie", 0))};
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "maxpool2d_bwd",
    .family = "maxpool",
    .summary = "MaxPoolGrad: each window's grad added at its first maximum in orig_input (NHWC)",
    .params = params(),
    .tolerance = 1e-5,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      const Shape in{g.n, g.y.in, g.x.in, g.c}, out{g.n, g.y.out, g.x.out, g.c};
      // One contribution per window, at its argmax.
      return op::scattering(Problem{{op::f32("orig_input", in), op::f32("orig_output", out), op::f32("grad", out)},
                                    op::f32("output", in), g},
                            {g.n, g.y.out, g.x.out, g.c}, "h");
    },
    .fill = fill_bwd,
    .batch = [](const Params&) { return BatchAxes{"n", {0, 0, 0}, 0}; },
    // Which maximum is "first" is the op's definition (TensorFlow's); a library chooses its own.
    // A 16-bit input rounds some random neighbours onto one value, so those configs tie too.
    .implementation_choice = [](const Problem& p) -> std::optional<std::string> {
      if (p.geom<Geometry>().levels == 0 && dtype_size(p.dtype) != 2) return std::nullopt;
      return std::string("which of tied maxima receives the gradient (") +
             (p.geom<Geometry>().levels ? "the fill draws from a few levels so that maxima tie" : "16-bit inputs round neighbours onto one value") +
             "): a library's choice among them is its own";
    },
});

D9M_REGISTER_OP(OpDef{
    .name = "maxpool2d",
    .family = "maxpool",
    .summary = "MaxPool: each window's first maximum (NHWC); the orig_output of maxpool2d_bwd",
    .params = params(),
    .tolerance = 0.0,
    .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p);
      return Problem{{op::f32("input", {g.n, g.y.in, g.x.in, g.c})}, op::f32("output", {g.n, g.y.out, g.x.out, g.c}), g};
    },
    .fill = [](const Problem& pr, FillMode, std::vector<FillTarget>& in) { fill_pool_input(in[0], pr.geom<Geometry>()); },
    .batch = [](const Params&) { return BatchAxes{"n", {0}, 0}; },
});

}  // namespace d9m::maxpool
