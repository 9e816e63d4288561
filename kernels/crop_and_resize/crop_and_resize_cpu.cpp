// CPU variants of the crop_and_resize family. The forward op writes each crop element once; the
// gradients are in scatter form with source = one crop pixel (k, y, x).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/crop_and_resize/crop_and_resize.h"

namespace d9m::crop_and_resize {
namespace {

// Forward rows [begin, end), row = (k, y).
void crop_rows(const KernelArgs& a, std::size_t begin, std::size_t end) {
  const auto& g = a.problem.geom<Geometry>();
  const float* image = a.in<float>(0);
  const float* boxes = a.in<float>(1);
  const auto* box_ind = a.in<std::int32_t>(2);
  float* crops = a.out<float>();
  for (std::size_t row = begin; row < end; ++row) {
    const I k = static_cast<I>(row) / g.crop_h, y = static_cast<I>(row) % g.crop_h;
    for (I x = 0; x < g.crop_w; ++x)
      for (I c = 0; c < g.c; ++c)
        crops[((static_cast<I>(row)) * g.crop_w + x) * g.c + c] = crop_value(g, image, boxes, box_ind, k, y, x, c);
  }
}

void crop_serial(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  crop_rows(a, 0, static_cast<std::size_t>(g.boxes * g.crop_h));
}

void crop_ordered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  parallel_blocks(*a.exec.pool, static_cast<std::size_t>(g.boxes * g.crop_h), 4,
                  [&](std::size_t b, std::size_t e) { crop_rows(a, b, e); });
}

GradImageTaps grad_image_taps(const KernelArgs& a) {
  return {a.problem.geom<Geometry>(), a.in<float>(0), a.in<float>(1), a.in<std::int32_t>(2)};
}

GradBoxesTaps grad_boxes_taps(const KernelArgs& a) {
  return {a.problem.geom<Geometry>(), a.in<float>(0), a.in<float>(1), a.in<float>(2), a.in<std::int32_t>(3)};
}

template <class Taps>
void grad(const KernelArgs& a, accumulate::Order order, Taps&& taps_of) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::apply(order, a, static_cast<std::size_t>(g.boxes * g.crop_h * g.crop_w), taps_of(a));
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "crop_and_resize", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                       .claim = op::serial_claim(), .run = crop_serial}});
D9M_REGISTER_VARIANTS({{.op = "crop_and_resize", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = crop_ordered, .bit_equal_to = "cpu.serial"}});
D9M_REGISTER_VARIANTS(accumulate::cpu_variants(
    "crop_and_resize_grad_image", [](const KernelArgs& a, accumulate::Order o) { grad(a, o, grad_image_taps); }));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants(
    "crop_and_resize_grad_boxes", [](const KernelArgs& a, accumulate::Order o) { grad(a, o, grad_boxes_taps); }));

}  // namespace d9m::crop_and_resize
