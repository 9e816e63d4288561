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
//
// Precision, as TensorFlow types the ops: image (and grad_image's output) take the config's
// dtype; boxes, crops, grads and grad_boxes' output are float32 at every dtype. Image values are
// read as float (static_cast<float>), every computation is in float, and grad_image rounds each
// contribution to the dtype and adds it there (static_cast<T> then +=, or GpuAtomicAdd on T).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/common/half.h"
#include "kernels/common/keyed_lists.h"
#include "kernels/common/hd.h"
#include "kernels/registry.h"

namespace d9m::crop_and_resize {

using I = std::int64_t;

struct Geometry {
  I batch = 0, h = 0, w = 0, c = 0, boxes = 0, crop_h = 0, crop_w = 0;
  bool bilinear = true;
  float extrapolation_value = 0.0f;
};

struct Box {
  float y1, x1, y2, x2;
  I b;  // image index
};

D9M_HD inline Box box_at(const float* boxes, const std::int32_t* box_ind, I k) {
  return {boxes[4 * k], boxes[4 * k + 1], boxes[4 * k + 2], boxes[4 * k + 3], box_ind[k]};
}

// Sample coordinate of crop index i along one axis of extent `extent` (H or W), as TensorFlow.
D9M_HD inline float sample_at(float lo, float hi, I crop, I extent, I i) {
  if (crop > 1) {
    const float scale = (hi - lo) * static_cast<float>(extent - 1) / static_cast<float>(crop - 1);
    return lo * static_cast<float>(extent - 1) + static_cast<float>(i) * scale;
  }
  return static_cast<float>(0.5 * (lo + hi) * static_cast<double>(extent - 1));
}

D9M_HD inline bool outside(float v, I extent) { return v < 0 || v > static_cast<float>(extent - 1); }

// A sample's taps along an axis of `extent` pixels: floor and ceil of the coordinate and the lerp
// (bilinear), or the nearest pixel. outside() admits v <= float(extent - 1), and above 2^24 that
// float can be `extent` itself (2^24 + 3 rounds to 2^24 + 4): the taps are clamped to the last
// pixel, as resize.h's are, so that no form reads or writes past the image, where TensorFlow's
// kernel would. Below 2^24 the clamp never acts.
struct AxisTaps {
  I lo, hi;
  float lerp;
};
D9M_HD inline AxisTaps axis_taps(float v, I extent) {
  const auto floor_v = static_cast<I>(floorf(v)), ceil_v = static_cast<I>(ceilf(v));
  const I lo = floor_v < extent - 1 ? floor_v : extent - 1, hi = ceil_v < extent - 1 ? ceil_v : extent - 1;
  return {lo, hi, v - static_cast<float>(lo)};
}
D9M_HD inline I nearest_pixel(float v, I extent) {
  const auto at = static_cast<I>(roundf(v));
  return at < extent - 1 ? at : extent - 1;
}

// Forward value of crop element (k, y, x, c); T is the image's storage type.
template <class T>
D9M_HD inline float crop_value(const Geometry& g, const T* image, const float* boxes,
                               const std::int32_t* box_ind, I k, I y, I x, I c) {
  const Box bx = box_at(boxes, box_ind, k);
  const float in_y = sample_at(bx.y1, bx.y2, g.crop_h, g.h, y);
  if (outside(in_y, g.h)) return g.extrapolation_value;
  const float in_x = sample_at(bx.x1, bx.x2, g.crop_w, g.w, x);
  if (outside(in_x, g.w)) return g.extrapolation_value;
  if (!g.bilinear) {
    const I cy = nearest_pixel(in_y, g.h), cx = nearest_pixel(in_x, g.w);
    return to_float(image[((bx.b * g.h + cy) * g.w + cx) * g.c + c]);
  }
  const AxisTaps ty = axis_taps(in_y, g.h), tx = axis_taps(in_x, g.w);
  const I top = ty.lo, bottom = ty.hi, left = tx.lo, right = tx.hi;
  const float yl = ty.lerp, xl = tx.lerp;
  const float tl = to_float(image[((bx.b * g.h + top) * g.w + left) * g.c + c]);
  const float tr = to_float(image[((bx.b * g.h + top) * g.w + right) * g.c + c]);
  const float bl = to_float(image[((bx.b * g.h + bottom) * g.w + left) * g.c + c]);
  const float br = to_float(image[((bx.b * g.h + bottom) * g.w + right) * g.c + c]);
  const float t = tl + (tr - tl) * xl;
  const float bt = bl + (br - bl) * xl;
  return t + (bt - t) * yl;
}

// Crop pixel s = (k, y, x) with its box and sample position; false when it falls outside the
// image (such samples send no gradient).
struct Sample {
  I px, k, y, x;
  Box box;
  float in_y, in_x;
};

D9M_HD inline bool sample_of(const Geometry& g, const float* boxes, const std::int32_t* box_ind, std::size_t s, Sample& out) {
  out.px = static_cast<I>(s);
  out.x = out.px % g.crop_w;
  out.y = (out.px / g.crop_w) % g.crop_h;
  out.k = out.px / g.crop_w / g.crop_h;
  out.box = box_at(boxes, box_ind, out.k);
  out.in_y = sample_at(out.box.y1, out.box.y2, g.crop_h, g.h, out.y);
  if (outside(out.in_y, g.h)) return false;
  out.in_x = sample_at(out.box.x1, out.box.x2, g.crop_w, g.w, out.x);
  return !outside(out.in_x, g.w);
}

// What a bilinear sample of gradient d sends its four corners, in the order the scatter form
// emits them (top-left, top-right, bottom-left, bottom-right), each rounded to T. The scatter
// and gather forms both take their values from here, so their bits can only differ in order.
template <class T>
struct CornerValues {
  T tl, tr, bl, br;
};
template <class T>
D9M_HD inline CornerValues<T> corner_values(float yl, float xl, float d) {
  const float dtop = (1 - yl) * d, dbottom = yl * d;
  return {from_float<T>((1 - xl) * dtop), from_float<T>(xl * dtop), from_float<T>((1 - xl) * dbottom), from_float<T>(xl * dbottom)};
}

// Scatter form of crop_and_resize_grad_image: source = crop pixel (k, y, x); T is the output's
// storage type, each float contribution rounded to it.
template <class T>
struct GradImageTaps {
  Geometry g;
  const float* grads;
  const float* boxes;
  const std::int32_t* box_ind;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    Sample sm;
    if (!sample_of(g, boxes, box_ind, s, sm)) return;
    const float in_y = sm.in_y, in_x = sm.in_x;
    const float* dy = grads + sm.px * g.c;
    const I base = sm.box.b * g.h;
    if (g.bilinear) {
      const AxisTaps ty = axis_taps(in_y, g.h), tx = axis_taps(in_x, g.w);
      for (I c = 0; c < g.c; ++c) {
        const CornerValues<T> v = corner_values<T>(ty.lerp, tx.lerp, dy[c]);
        emit(static_cast<std::size_t>(((base + ty.lo) * g.w + tx.lo) * g.c + c), v.tl);
        emit(static_cast<std::size_t>(((base + ty.lo) * g.w + tx.hi) * g.c + c), v.tr);
        emit(static_cast<std::size_t>(((base + ty.hi) * g.w + tx.lo) * g.c + c), v.bl);
        emit(static_cast<std::size_t>(((base + ty.hi) * g.w + tx.hi) * g.c + c), v.br);
      }
    } else {
      const I cy = nearest_pixel(in_y, g.h), cx = nearest_pixel(in_x, g.w);
      for (I c = 0; c < g.c; ++c) emit(static_cast<std::size_t>(((base + cy) * g.w + cx) * g.c + c), from_float<T>(dy[c]));
    }
  }
};

// The gather form of crop_and_resize_grad_image (cpu.gather, cuda.gather): each image row
// (b, iy) replays, in the scatter form's order (box, crop row, crop column, then the corners),
// every crop pixel whose sample touches the row, and adds only what lands in it. Each element so
// receives exactly its contributions in the reference order: cpu.serial's bits, with no atomics.
//
// gather_crop_row replays crop row (k, y) of box k for image row (b, iy), channels [c0, c1); a
// crop row that does not touch the image row (another image, a sample outside, other taps) adds
// nothing, so a caller may offer any superset of the touching crop rows, in increasing (k, y).
// The check is sample_at's, as the scatter form computes it, so flipped and degenerate boxes need
// no closed form. `row` is out[b, iy, 0, 0].
template <class T>
D9M_HD void gather_crop_row(const Geometry& g, const float* grads, const float* boxes, const std::int32_t* box_ind, I k, I y, I b, I iy,
                            I c0, I c1, T* row) {
  if (box_ind[k] != b) return;
  const Box bx = box_at(boxes, box_ind, k);
  const float in_y = sample_at(bx.y1, bx.y2, g.crop_h, g.h, y);
  if (outside(in_y, g.h)) return;
  const AxisTaps ty = axis_taps(in_y, g.h);
  if (g.bilinear ? ty.lo != iy && ty.hi != iy : nearest_pixel(in_y, g.h) != iy) return;
  for (I x = 0; x < g.crop_w; ++x) {
    const float in_x = sample_at(bx.x1, bx.x2, g.crop_w, g.w, x);
    if (outside(in_x, g.w)) continue;
    const float* dy = grads + ((k * g.crop_h + y) * g.crop_w + x) * g.c;
    if (!g.bilinear) {
      T* at = row + nearest_pixel(in_x, g.w) * g.c;
      for (I c = c0; c < c1; ++c) at[c] = add(at[c], from_float<T>(dy[c]));
      continue;
    }
    const AxisTaps tx = axis_taps(in_x, g.w);
    T* left = row + tx.lo * g.c;
    T* right = row + tx.hi * g.c;
    for (I c = c0; c < c1; ++c) {
      const CornerValues<T> v = corner_values<T>(ty.lerp, tx.lerp, dy[c]);
      if (ty.lo == iy) {
        left[c] = add(left[c], v.tl);
        right[c] = add(right[c], v.tr);
      }
      if (ty.hi == iy) {
        left[c] = add(left[c], v.bl);
        right[c] = add(right[c], v.br);
      }
    }
  }
}

// The image rows crop row (k, y) touches: its sample's top and bottom taps (one where they
// coincide), or its nearest row; none where the sample falls outside. Returns how many (0-2).
D9M_HD inline int rows_touched(const Geometry& g, const float* boxes, const std::int32_t* box_ind, I k, I y, I rows[2]) {
  const Box bx = box_at(boxes, box_ind, k);
  const float in_y = sample_at(bx.y1, bx.y2, g.crop_h, g.h, y);
  if (outside(in_y, g.h)) return 0;
  if (!g.bilinear) {
    rows[0] = nearest_pixel(in_y, g.h);
    return 1;
  }
  const AxisTaps ty = axis_taps(in_y, g.h);
  rows[0] = ty.lo;
  rows[1] = ty.hi;
  return ty.hi == ty.lo ? 1 : 2;
}

// The device gather lists 2 * boxes * crop_h (image row, crop row) pairs (keyed_lists.h).
inline std::optional<std::string> gather_unsupported(const Problem& p) {
  const auto& g = p.geom<Geometry>();
  return keyed_lists::unsupported(static_cast<std::uint64_t>(2 * g.boxes * g.crop_h), static_cast<std::uint64_t>(g.batch * g.h),
                                  "(image row, crop row) pairs", "image rows");
}
inline std::uint64_t gather_list_bytes(const Geometry& g) {
  return keyed_lists::bytes(static_cast<std::uint64_t>(2 * g.boxes * g.crop_h), static_cast<std::uint64_t>(g.batch * g.h));
}

inline Claim gather_claim() {
  return {Determinism::deterministic, ClaimSource::design,
          "each image row replays the crop pixels that sample it, in the reference order, keeping what lands in it: "
          "no atomics"};
}

// Scatter form of crop_and_resize_grad_boxes: source = crop pixel (k, y, x); it adds to the
// four coordinates of box k, in TensorFlow's order y1, y2, x1, x2 per channel. T is the image's
// storage type; the output is float.
template <class T>
struct GradBoxesTaps {
  Geometry g;
  const float* grads;
  const T* image;
  const float* boxes;
  const std::int32_t* box_ind;

  template <class Emit>
  D9M_HD void operator()(std::size_t s, Emit& emit) const {
    Sample sm;
    if (!sample_of(g, boxes, box_ind, s, sm)) return;
    const float in_y = sm.in_y, in_x = sm.in_x;
    const I px = sm.px, y = sm.y, x = sm.x, k = sm.k;
    const Box& bx = sm.box;
    const float height_ratio = g.crop_h > 1 ? static_cast<float>(g.h - 1) / static_cast<float>(g.crop_h - 1) : 0.0f;
    const float width_ratio = g.crop_w > 1 ? static_cast<float>(g.w - 1) / static_cast<float>(g.crop_w - 1) : 0.0f;
    const AxisTaps ty = axis_taps(in_y, g.h), tx = axis_taps(in_x, g.w);
    const I top = ty.lo, bottom = ty.hi, left = tx.lo, right = tx.hi;
    const float yl = ty.lerp, xl = tx.lerp;
    const auto kk = static_cast<std::size_t>(k);
    const float* dy = grads + px * g.c;
    const T* tl_row = image + ((bx.b * g.h + top) * g.w + left) * g.c;
    const T* tr_row = image + ((bx.b * g.h + top) * g.w + right) * g.c;
    const T* bl_row = image + ((bx.b * g.h + bottom) * g.w + left) * g.c;
    const T* br_row = image + ((bx.b * g.h + bottom) * g.w + right) * g.c;
    const double half_h = 0.5 * static_cast<double>(g.h - 1), half_w = 0.5 * static_cast<double>(g.w - 1);
    for (I c = 0; c < g.c; ++c) {
      const float tl = to_float(tl_row[c]), tr = to_float(tr_row[c]), bl = to_float(bl_row[c]), br = to_float(br_row[c]);
      float image_grad_y = (1 - xl) * (bl - tl) + xl * (br - tr);
      float image_grad_x = (1 - yl) * (tr - tl) + yl * (br - bl);
      image_grad_y *= dy[c];
      image_grad_x *= dy[c];
      if (g.crop_h > 1) {
        emit(4 * kk + 0, image_grad_y * (static_cast<float>(g.h - 1) - static_cast<float>(y) * height_ratio));
        emit(4 * kk + 2, image_grad_y * (static_cast<float>(y) * height_ratio));
      } else {
        emit(4 * kk + 0, static_cast<float>(image_grad_y * half_h));
        emit(4 * kk + 2, static_cast<float>(image_grad_y * half_h));
      }
      if (g.crop_w > 1) {
        emit(4 * kk + 1, image_grad_x * (static_cast<float>(g.w - 1) - static_cast<float>(x) * width_ratio));
        emit(4 * kk + 3, image_grad_x * (static_cast<float>(x) * width_ratio));
      } else {
        emit(4 * kk + 1, static_cast<float>(image_grad_x * half_w));
        emit(4 * kk + 3, static_cast<float>(image_grad_x * half_w));
      }
    }
  }
};

}  // namespace d9m::crop_and_resize
