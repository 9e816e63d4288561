// The padding gradients: parameters, tensors and inputs (padding.h has the semantics).
#include <string>
#include <tuple>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/padding/padding.h"

namespace d9m::padding {
namespace {

std::vector<ParamSpec> params() {
  return {op::integer("n", "batch"), op::integer("c", "channels"), op::integer("h", "input height"),
          op::integer("w", "input width"), op::integer_or("pad_left", 0, "columns added on the left", 0),
          op::integer_or("pad_right", 0, "columns added on the right", 0),
          op::integer_or("pad_top", 0, "rows added on top", 0), op::integer_or("pad_bottom", 0, "rows added at the bottom", 0)};
}

Problem plan(const Params& p, Mode mode) {
  Geometry g;
  g.n = p.integer("n");
  g.c = p.integer("c");
  g.mode = mode;
  g.y = {p.integer("h"), p.integer("pad_top"), p.integer("pad_bottom")};
  g.x = {p.integer("w"), p.integer("pad_left"), p.integer("pad_right")};
  if (mode == Mode::reflect) {
    // PyTorch: "Padding size should be less than the corresponding input dimension".
    for (const auto& [name, pad, size] : {std::tuple{"pad_left", g.x.lo, g.x.in}, std::tuple{"pad_right", g.x.hi, g.x.in},
                                          std::tuple{"pad_top", g.y.lo, g.y.in}, std::tuple{"pad_bottom", g.y.hi, g.y.in}})
      if (pad >= size) throw InvalidConfig(name, std::string(name) + " must be less than the input size it reflects (PyTorch's check)");
  }
  // PyTorch's kernels index with int: keep every tensor within 2^31 elements.
  if (op::checked_product({g.n, g.c, g.y.out(), g.x.out()}, "pad_bottom") > kMaxIntegerParam)
    throw InvalidConfig("n", "PyTorch's padding kernels index with int: tensors stay below 2^31 elements");
  return Problem{{op::f32("grad_output", {g.n, g.c, g.y.out(), g.x.out()})}, op::f32("grad_input", {g.n, g.c, g.y.in, g.x.in}), g};
}

void fill(const Problem&, FillMode mode, std::vector<FillTarget>& in) { fill::floats(in[0], mode); }

OpDef pad_op(std::string name, std::string summary, Mode mode) {
  return OpDef{.name = std::move(name), .family = "padding", .summary = std::move(summary), .params = params(),
               .tolerance = 1e-5,  // sums of gradients: rounding only
               .dtypes = op::all_float_dtypes(),
               .plan = [mode](const Params& p) { return plan(p, mode); },
               .fill = fill,
               .batch = [](const Params&) { return BatchAxes{"n", {0}, 0}; }};
}

}  // namespace

D9M_REGISTER_OP(pad_op("reflection_pad2d_bwd",
                       "PyTorch ReflectionPad2d backward (NCHW): each gradient added at its reflected input element", Mode::reflect));
D9M_REGISTER_OP(pad_op("replication_pad2d_bwd",
                       "PyTorch ReplicationPad2d backward (NCHW): each gradient added at its clamped input element", Mode::replicate));

}  // namespace d9m::padding
