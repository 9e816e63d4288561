// CUDA variants of the crop_and_resize family.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/op_helpers.h"
#include "kernels/crop_and_resize/crop_and_resize.h"

namespace d9m::crop_and_resize {
namespace {

void crop_ordered(const KernelArgs& a) {
  const Geometry g = a.problem.geom<Geometry>();
  const float* image = a.in<float>(0);
  const float* boxes = a.in<float>(1);
  const std::int32_t* box_ind = a.in<std::int32_t>(2);
  float* crops = a.out<float>();
  cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()), [=] __device__(std::size_t i) {
    const auto e = static_cast<I>(i);
    const I c = e % g.c, x = (e / g.c) % g.crop_w, y = (e / g.c / g.crop_w) % g.crop_h, k = e / g.c / g.crop_w / g.crop_h;
    crops[i] = crop_value(g, image, boxes, box_ind, k, y, x, c);
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "crop_and_resize", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = crop_ordered, .bit_equal_to = "cpu.ordered"}});
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "crop_and_resize_grad_image", [](const KernelArgs& a, accumulate::Order o) {
      const auto& g = a.problem.geom<Geometry>();
      cuda::zero_output(a);
      accumulate::cuda::apply(o, a, static_cast<std::size_t>(g.boxes * g.crop_h * g.crop_w),
                              GradImageTaps{g, a.in<float>(0), a.in<float>(1), a.in<std::int32_t>(2)});
    }));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants(
    "crop_and_resize_grad_boxes", [](const KernelArgs& a, accumulate::Order o) {
      const auto& g = a.problem.geom<Geometry>();
      cuda::zero_output(a);
      accumulate::cuda::apply(o, a, static_cast<std::size_t>(g.boxes * g.crop_h * g.crop_w),
                              GradBoxesTaps{g, a.in<float>(0), a.in<float>(1), a.in<float>(2), a.in<std::int32_t>(3)});
    }));

}  // namespace d9m::crop_and_resize
