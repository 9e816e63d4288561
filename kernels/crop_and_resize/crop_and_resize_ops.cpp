#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/crop_and_resize/crop_and_resize.h"

namespace d9m::crop_and_resize {
namespace {

std::vector<ParamSpec> params(bool with_method, bool with_extrapolation) {
  std::vector<ParamSpec> p{op::integer("batch", "images in the batch"), op::integer("h", "image height"),
                           op::integer("w", "image width"), op::integer("c", "channels"),
                           op::integer("boxes", "number of boxes"), op::integer("crop_h", "crop height"),
                           op::integer("crop_w", "crop width")};
  if (with_method) p.push_back(op::choice_or("method", "bilinear", {"bilinear", "nearest"}, "sampling"));
  if (with_extrapolation)
    p.push_back(op::real_or("extrapolation_value", 0.0, "value of samples outside the image"));
  return p;
}

Geometry geometry(const Params& p, bool with_method, bool with_extrapolation = false) {
  return {p.integer("batch"), p.integer("h"), p.integer("w"), p.integer("c"), p.integer("boxes"),
          p.integer("crop_h"), p.integer("crop_w"), !with_method || p.choice("method") == "bilinear",
          with_extrapolation ? static_cast<float>(p.real("extrapolation_value")) : 0.0f};
}

// Random boxes: coordinates in [-0.25, 1.25), so some samples fall outside the image (and
// extrapolate) and some boxes are flipped. Exact boxes: coordinates k / (extent - 1) in
// [0, 1], so that with extent - 1 and crop - 1 powers of two every sample position and lerp
// weight is dyadic and every product and sum in the op is exact.
void fill_boxes(FillTarget& t, const Geometry& g, FillMode mode) {
  const CounterRng rng(t.seed, t.stream);
  auto* b = static_cast<float*>(t.data);
  for (std::int64_t i = 0; i < g.boxes * 4; ++i) {
    const auto k = static_cast<std::uint64_t>(i);
    if (mode == FillMode::random) {
      b[i] = rng.unit_symmetric(k) * 0.75f + 0.5f;
    } else {
      const std::int64_t extent = (i % 2 == 0) ? g.h : g.w;  // y1, x1, y2, x2
      const auto steps = static_cast<std::uint32_t>(std::max<std::int64_t>(extent - 1, 1));
      b[i] = static_cast<float>(rng.below(k, steps + 1)) / static_cast<float>(steps);
    }
  }
}

// (image or grads, boxes, box_ind): the arguments of the forward op and of grad_image.
void fill_tensor_boxes_indices(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  const auto& g = pr.geom<Geometry>();
  fill::floats(in[0], mode);
  fill_boxes(in[1], g, mode);
  fill::integers(in[2], 0, static_cast<std::int32_t>(g.batch));
}

Shape image_shape(const Geometry& g) { return {g.batch, g.h, g.w, g.c}; }
Shape crops_shape(const Geometry& g) { return {g.boxes, g.crop_h, g.crop_w, g.c}; }

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "crop_and_resize", .family = "crop_and_resize",
    .summary = "CropAndResize: bilinear or nearest samples of normalised boxes (NHWC)",
    .params = params(true, true), .tolerance = 0.0, .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p, true, true);
      return Problem{{op::f32("image", image_shape(g)), op::f32_always("boxes", {g.boxes, 4}), op::i32("box_ind", {g.boxes})},
                     op::f32_always("crops", crops_shape(g)), g};
    },
    .fill = fill_tensor_boxes_indices,
    // The boxes are the batch (ROIAlign's region proposals): the image is shared by every box.
    .batch = [](const Params&) { return BatchAxes{"boxes", {-1, 0, 0}, 0}; }});

D9M_REGISTER_OP(OpDef{
    .name = "crop_and_resize_grad_image", .family = "crop_and_resize",
    .summary = "CropAndResizeGradImage: crop gradients scattered back onto the image",
    .params = params(true, false), .tolerance = 1e-5, .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p, true);
      // Four taps per crop element (one with nearest).
      return op::scattering(Problem{{op::f32_always("grads", crops_shape(g)), op::f32_always("boxes", {g.boxes, 4}), op::i32("box_ind", {g.boxes})},
                                    op::f32("output", image_shape(g)), g},
                            {4, g.boxes, g.crop_h, g.crop_w, g.c}, "boxes");
    },
    // TensorFlow computes each contribution in float (float grads times float weights) and adds
    // it in T. At f64 that is a sum of 24-bit terms in a 53-bit accumulator, exact (and blind
    // to order) unless the terms span more than about 29 binades: grads spread over 32 binades
    // make the race show, as the wide gradients of a real network would.
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      fill_tensor_boxes_indices(pr, mode, in);
      if (pr.dtype == DType::f64) fill::mixed_magnitude_floats(in[0], mode, 32);
    }});

D9M_REGISTER_OP(OpDef{
    .name = "crop_and_resize_grad_boxes", .family = "crop_and_resize",
    .summary = "CropAndResizeGradBoxes: gradient w.r.t. the box coordinates (bilinear)",
    .params = params(false, false), .tolerance = 1e-4, .dtypes = op::all_float_dtypes(),
    .plan = [](const Params& p) {
      const Geometry g = geometry(p, false);
      // Four box coordinates per crop element.
      return op::scattering(Problem{{op::f32_always("grads", crops_shape(g)), op::f32("image", image_shape(g)),
                                     op::f32_always("boxes", {g.boxes, 4}), op::i32("box_ind", {g.boxes})},
                                    op::f32_always("output", {g.boxes, 4}), g},
                            {4, g.boxes, g.crop_h, g.crop_w, g.c}, "boxes");
    },
    .fill = [](const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
      const auto& g = pr.geom<Geometry>();
      fill::floats(in[0], mode);
      fill::floats(in[1], mode);
      fill_boxes(in[2], g, mode);
      fill::integers(in[3], 0, static_cast<std::int32_t>(g.batch));
    },
    .batch = [](const Params&) { return BatchAxes{"boxes", {0, -1, 0, 0}, 0}; }});

}  // namespace d9m::crop_and_resize
