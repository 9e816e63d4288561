// crop_and_resize family, TensorFlow semantics (CropAndResize and its two gradients), NHWC:
//   crop_and_resize(image[B,H,W,C], boxes[K,4], box_ind[K], crop_size=[CH,CW], method,
//                   extrapolation_value) -> crops[K,CH,CW,C]
//   crop_and_resize_grad_image(grads[K,CH,CW,C], boxes, box_ind, image_size, method) -> [B,H,W,C]
//   crop_and_resize_grad_boxes(grads, image, boxes, box_ind) -> [K,4]   (bilinear only, as TF)
// Boxes are normalised [y1, x1, y2, x2]; y1 > y2 flips the crop. For crop row y (CH > 1):
//   height_scale = (y2 - y1) * (H - 1) / (CH - 1),  in_y = y1 * (H - 1) + y * height_scale
// and in_y = 0.5 * (y1 + y2) * (H - 1) when CH == 1 (likewise for x). A sample outside
// [0, H-1] x [0, W-1] takes extrapolation_value in the forward op and sends no gradient.
// bilinear: top = floor(in_y), bottom = ceil(in_y), y_lerp = in_y - top (likewise x);
// nearest: round(in_y), round(in_x). The formulas and their evaluation order follow
// TensorFlow's CPU kernels (crop_and_resize_op.cc), including its double-precision 0.5 terms.
#pragma once
#include <cmath>
#include <cstdint>

namespace d9m::crop_and_resize {

struct Geometry {
  std::int64_t batch = 0, h = 0, w = 0, c = 0, boxes = 0, crop_h = 0, crop_w = 0;
  bool bilinear = true;
  float extrapolation_value = 0.0f;
};

// Sample coordinate of crop index i along one axis of extent `extent` (H or W).
struct AxisSample {
  float scale = 0.0f;  // height_scale / width_scale
  float at(float lo, float hi, std::int64_t crop, std::int64_t extent, std::int64_t i) const {
    return crop > 1 ? lo * static_cast<float>(extent - 1) + static_cast<float>(i) * scale
                    : static_cast<float>(0.5 * (lo + hi) * static_cast<double>(extent - 1));
  }
};

inline AxisSample axis(float lo, float hi, std::int64_t crop, std::int64_t extent) {
  return {crop > 1 ? (hi - lo) * static_cast<float>(extent - 1) / static_cast<float>(crop - 1) : 0.0f};
}

inline bool outside(float v, std::int64_t extent) { return v < 0 || v > static_cast<float>(extent - 1); }

}  // namespace d9m::crop_and_resize
