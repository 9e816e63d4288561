// CUDA variants of the crop_and_resize family.
#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/elementwise_cuda.cuh"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/crop_and_resize/crop_and_resize.h"

namespace d9m::crop_and_resize {
namespace {

template <class T>
void crop_ordered(const KernelArgs& a, T) {
  const Geometry g = a.problem.geom<Geometry>();
  const T* image = a.in<T>(0);
  const float* boxes = a.in<float>(1);
  const std::int32_t* box_ind = a.in<std::int32_t>(2);
  float* crops = a.out<float>();
  cuda::for_each_index(a, static_cast<std::size_t>(a.problem.output.numel()), [=] __device__(std::size_t i) {
    const auto e = static_cast<I>(i);
    const I c = e % g.c, x = (e / g.c) % g.crop_w, y = (e / g.c / g.crop_w) % g.crop_h, k = e / g.c / g.crop_w / g.crop_h;
    crops[i] = crop_value(g, image, boxes, box_ind, k, y, x, c);
  });
}

std::size_t crop_pixels(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  return static_cast<std::size_t>(g.boxes * g.crop_h * g.crop_w);
}

// grad_image adds in the dtype (atomicAdd on __half, as TensorFlow's GpuAtomicAdd on T);
// grad_boxes in float.
void grad_image(const KernelArgs& a, accumulate::Order o) {
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::cuda::apply<T>(o, a, crop_pixels(a),
                               GradImageTaps<T>{a.problem.geom<Geometry>(), a.in<float>(0), a.in<float>(1), a.in<std::int32_t>(2)});
  });
}

void grad_boxes(const KernelArgs& a, accumulate::Order o) {
  cuda::zero_output(a);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::cuda::apply<float>(o, a, crop_pixels(a),
                                   GradBoxesTaps<T>{a.problem.geom<Geometry>(), a.in<float>(0), a.in<T>(1), a.in<float>(2),
                                                    a.in<std::int32_t>(3)});
  });
}

// The gather form (crop_and_resize.h): a thread per (image row, channel), each zeroing and
// replaying its elements of the row.
template <class T>
void grad_image_gathered(const KernelArgs& a) {
  const Geometry g = a.problem.geom<Geometry>();
  T* out = a.out<T>();
  const float* grads = a.in<float>(0);
  const float* boxes = a.in<float>(1);
  const std::int32_t* box_ind = a.in<std::int32_t>(2);
  cuda::for_each_index(a, static_cast<std::size_t>(g.batch * g.h * g.c), [=] __device__(std::size_t i) {
    const I c = static_cast<I>(i) % g.c, r = static_cast<I>(i) / g.c;
    T* row = out + r * g.w * g.c;
    for (I x = 0; x < g.w; ++x) row[x * g.c + c] = T{0};
    // Every crop row of every box is offered (gather_crop_row skips those that miss the row):
    // the device form has no per-row lists yet, so its cost grows with rows times boxes.
    for (I k = 0; k < g.boxes; ++k)
      for (I y = 0; y < g.crop_h; ++y) gather_crop_row(g, grads, boxes, box_ind, k, y, r / g.h, r % g.h, c, c + 1, row);
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "crop_and_resize_grad_image", .name = "cuda.gather", .backend = Backend::cuda, .role = Role::ordered,
                        .claim = gather_claim(),
                        .run = typed([](const KernelArgs& a, auto tag) { grad_image_gathered<decltype(tag)>(a); }),
                        .bit_equal_to = "cpu.serial"}});
D9M_REGISTER_VARIANTS({{.op = "crop_and_resize", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = typed([](const KernelArgs& a, auto t) { crop_ordered(a, t); }),
                       .bit_equal_to = "cpu.ordered"}});
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("crop_and_resize_grad_image", grad_image));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("crop_and_resize_grad_image", grad_image));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("crop_and_resize_grad_boxes", grad_boxes));

}  // namespace d9m::crop_and_resize
