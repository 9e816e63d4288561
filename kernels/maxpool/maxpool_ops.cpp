#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/maxpool/maxpool.h"

namespace d9m::maxpool {
namespace {

Geometry geometry(const Params& p) {
  const auto& pad = p.choice("padding");
  return {p.integer("n"), p.integer("c"),
          make_window(p.integer("h"), p.integer("ksize_h"), p.integer("stride_h"), 1, pad, "ksize_h"),
          make_window(p.integer("w"), p.integer("ksize_w"), p.integer("stride_w"), 1, pad, "ksize_w")};
}

void fill(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  // orig_input stays on the random grid in both modes: argmax ties are then rare, and where
  // they occur every variant breaks them the same way. Exactness only concerns the sums of grad.
  fill::floats(in[0], FillMode::random);
  const auto& g = pr.geom<Geometry>();
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
               op::choice_or("padding", "VALID", {"VALID", "SAME"}, "TensorFlow padding")},
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
