// CUDA variants of the crop_and_resize family.
#include <memory>

#include "kernels/common/accumulate_cuda.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/keyed_lists_cuda.h"
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

// The gather form (crop_and_resize.h) on the device, with per-row lists as the CPU's: each call
// keys every crop row's (at most two) touched image rows (item 2 * (k * crop_h + y) + slot, key
// b * h + iy, or none where the slot is unused), lists the items per image row
// (keyed_lists_cuda.h: a stable sort, so an image row's crop rows stay in increasing (k, y), the
// reference order), then runs a thread per (image row, channel) over its own crop rows only.
// The number of items, 2 * boxes * crop_h, is the plan's, so the lists' buffers come from
// prepare(): no allocation and no host round trip per trial. Before, each thread offered itself
// every crop row of every box, a cost that grew with image rows times boxes (the CPU form
// measured 100x its scatter form that way).
template <class T>
void grad_image_gathered(const KernelArgs& a) {
  const Geometry g = a.problem.geom<Geometry>();
  auto& lists = *static_cast<cuda::KeyedLists*>(a.state);
  T* out = a.out<T>();
  const float* grads = a.in<float>(0);
  const float* boxes = a.in<float>(1);
  const std::int32_t* box_ind = a.in<std::int32_t>(2);
  std::uint32_t* keys = lists.item_keys();
  const std::uint32_t none = lists.none();
  cuda::for_each_index(a, static_cast<std::size_t>(g.boxes * g.crop_h), [=] __device__(std::size_t cr) {
    const I k = static_cast<I>(cr) / g.crop_h, y = static_cast<I>(cr) % g.crop_h;
    I rows[2];
    // A box of no image (box_ind out of range) has no row to gather into, as on the CPU.
    const int n = box_ind[k] < 0 || box_ind[k] >= g.batch ? 0 : rows_touched(g, boxes, box_ind, k, y, rows);
    for (int slot = 0; slot < 2; ++slot) keys[2 * cr + slot] = slot < n ? static_cast<std::uint32_t>(box_ind[k] * g.h + rows[slot]) : none;
  });
  lists.list();
  const std::int32_t* items = lists.items_by_key();
  const std::int32_t* row_start = lists.starts();
  cuda::for_each_index(a, static_cast<std::size_t>(g.batch * g.h * g.c), [=] __device__(std::size_t i) {
    const I c = static_cast<I>(i) % g.c, r = static_cast<I>(i) / g.c;
    T* row = out + r * g.w * g.c;
    for (I x = 0; x < g.w; ++x) row[x * g.c + c] = T{0};
    for (std::int32_t j = row_start[r]; j < row_start[r + 1]; ++j) {
      const I cr = items[j] / 2;  // the crop row of item 2 * cr + slot
      gather_crop_row(g, grads, boxes, box_ind, cr / g.crop_h, cr % g.crop_h, r / g.h, r % g.h, c, c + 1, row);
    }
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "crop_and_resize_grad_image", .name = "cuda.gather", .backend = Backend::cuda, .role = Role::ordered,
                        .claim = gather_claim(),
                        .unsupported = [](const Problem& p) { return gather_unsupported(p); },
                        .run = typed([](const KernelArgs& a, auto tag) { grad_image_gathered<decltype(tag)>(a); }),
                        .prepare = [](const Problem& p, const ExecContext& e) {
                          const auto& g = p.geom<Geometry>();
                          auto lists = std::make_shared<cuda::KeyedLists>(static_cast<std::size_t>(2 * g.boxes * g.crop_h),
                                                                          static_cast<std::uint64_t>(g.batch * g.h),
                                                                          static_cast<cudaStream_t>(e.stream));
                          return Prepared{std::shared_ptr<void>(lists, lists.get()), std::nullopt};
                        },
                        .bit_equal_to = "cpu.serial",
                        .memory = [](const Problem& p) {
                          return std::optional<WorkingMemory>{
                              {gather_list_bytes(p.geom<Geometry>()), "the crop rows' sort keys and positions per image row, and CUB's scratch"}};
                        }}});
D9M_REGISTER_VARIANTS({{.op = "crop_and_resize", .name = "cuda.ordered", .backend = Backend::cuda, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = typed([](const KernelArgs& a, auto t) { crop_ordered(a, t); }),
                       .bit_equal_to = "cpu.ordered"}});
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("crop_and_resize_grad_image", grad_image));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_fixed_point_variant("crop_and_resize_grad_image", grad_image));
D9M_REGISTER_VARIANTS(accumulate::cuda::cuda_variants("crop_and_resize_grad_boxes", grad_boxes));

}  // namespace d9m::crop_and_resize
