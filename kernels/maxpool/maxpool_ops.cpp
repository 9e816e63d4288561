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

void fill(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  // orig_input stays on the random grid in both modes: argmax ties are then rare (at f32; the
  // 16-bit dtypes round some neighbours onto one value), and where they occur every variant
  // breaks them the same way. Exactness only concerns the sums of grad. With `levels` L it takes
  // the integers [0, L) instead, so that most windows tie and the first-maximum rule decides.
  // orig_output follows from the f32 values: rounding to the dtype is monotone and keeps equal
  // values equal, so it is the pool of the rounded input too.
  const auto& g = pr.geom<Geometry>();
  if (g.levels > 0) {
    const CounterRng rng(in[0].seed, in[0].stream);
    auto* x = static_cast<float*>(in[0].data);
    for (std::int64_t i = 0; i < in[0].desc.numel(); ++i)
      x[i] = static_cast<float>(rng.below(static_cast<std::uint64_t>(i), static_cast<std::uint32_t>(g.levels)));
  } else {
    fill::floats(in[0], FillMode::random);
  }
  const auto* x = static_cast<const float*>(in[0].data);
  auto* y = static_cast<float*>(in[1].data);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t oh = 0; oh < g.y.out; ++oh)
      for (std::int64_t ow = 0; ow < g.x.out; ++ow)
        for (std::int64_t c = 0; c < g.c; ++c) {
          const std::int64_t a = argmax<float>(g, x, n, oh, ow, c);
          y[((n * g.y.out + oh) * g.x.out + ow) * g.c + c] = a < 0 ? 0.0f : x[a];
        }
  fill::floats(in[2], mode);
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "maxpool2d_bwd",
    .family = "maxpool",
    .summary = "MaxPoolGrad: each window's grad added at its first maximum in orig_input (NHWC)",
    .params = {op::integer("n", "batch"), op::integer("h", "height"), op::integer("w", "width"),
               op::integer("c", "channels"), op::integer("ksize_h", "window height"),
               op::integer("ksize_w", "window width"), op::integer("stride_h", "vertical stride"),
               op::integer("stride_w", "horizontal stride"),
               op::choice_or("padding", "VALID", {"VALID", "SAME"}, "TensorFlow padding"),
               op::added_later(op::integer_or("levels", 0, "orig_input: 0 random values, L > 0 the integers [0, L), so maxima tie", 0))},
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
    .fill = fill,
    .batch = [](const Params&) { return BatchAxes{"n", {0, 0, 0}, 0}; },
});

}  // namespace d9m::maxpool
