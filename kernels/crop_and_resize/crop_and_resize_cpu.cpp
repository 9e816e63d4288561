// CPU variants of the crop_and_resize family. The forward op writes each crop element once; the
// gradients are in scatter form with source = one crop pixel (k, y, x).
#include <cstring>

#include "kernels/common/accumulate.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/crop_and_resize/crop_and_resize.h"

namespace d9m::crop_and_resize {
namespace {

using I = std::int64_t;

struct Box {
  float y1, x1, y2, x2;
  I b;  // image index
};

Box box_at(const float* boxes, const std::int32_t* box_ind, I k) {
  return {boxes[4 * k], boxes[4 * k + 1], boxes[4 * k + 2], boxes[4 * k + 3], box_ind[k]};
}

// Forward rows [begin, end), row = (k, y).
void crop_rows(const KernelArgs& a, std::size_t begin, std::size_t end) {
  const auto& g = a.problem.geom<Geometry>();
  const float* image = a.in<float>(0);
  float* crops = a.out<float>();
  for (std::size_t row = begin; row < end; ++row) {
    const I k = static_cast<I>(row) / g.crop_h, y = static_cast<I>(row) % g.crop_h;
    const Box bx = box_at(a.in<float>(1), a.in<std::int32_t>(2), k);
    const AxisSample sy = axis(bx.y1, bx.y2, g.crop_h, g.h), sx = axis(bx.x1, bx.x2, g.crop_w, g.w);
    float* out_row = crops + static_cast<I>(row) * g.crop_w * g.c;
    const float in_y = sy.at(bx.y1, bx.y2, g.crop_h, g.h, y);
    if (outside(in_y, g.h)) {
      std::fill(out_row, out_row + g.crop_w * g.c, g.extrapolation_value);
      continue;
    }
    for (I x = 0; x < g.crop_w; ++x) {
      float* o = out_row + x * g.c;
      const float in_x = sx.at(bx.x1, bx.x2, g.crop_w, g.w, x);
      if (outside(in_x, g.w)) {
        std::fill(o, o + g.c, g.extrapolation_value);
        continue;
      }
      if (g.bilinear) {
        const I top = static_cast<I>(std::floor(in_y)), bottom = static_cast<I>(std::ceil(in_y));
        const I left = static_cast<I>(std::floor(in_x)), right = static_cast<I>(std::ceil(in_x));
        const float yl = in_y - static_cast<float>(top), xl = in_x - static_cast<float>(left);
        const float* tl = image + ((bx.b * g.h + top) * g.w + left) * g.c;
        const float* tr = image + ((bx.b * g.h + top) * g.w + right) * g.c;
        const float* bl = image + ((bx.b * g.h + bottom) * g.w + left) * g.c;
        const float* br = image + ((bx.b * g.h + bottom) * g.w + right) * g.c;
        for (I c = 0; c < g.c; ++c) {
          const float t = tl[c] + (tr[c] - tl[c]) * xl;
          const float bt = bl[c] + (br[c] - bl[c]) * xl;
          o[c] = t + (bt - t) * yl;
        }
      } else {
        const I cy = static_cast<I>(std::round(in_y)), cx = static_cast<I>(std::round(in_x));
        std::memcpy(o, image + ((bx.b * g.h + cy) * g.w + cx) * g.c, static_cast<std::size_t>(g.c) * sizeof(float));
      }
    }
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

// Visits in-range crop pixel s = (k, y, x) with its sample position: fn(k, y, x, box, in_y, in_x).
template <class Fn>
void sample(const Geometry& g, const float* boxes, const std::int32_t* box_ind, std::size_t s, Fn&& fn) {
  const auto px = static_cast<I>(s);
  const I x = px % g.crop_w, y = (px / g.crop_w) % g.crop_h, k = px / g.crop_w / g.crop_h;
  const Box bx = box_at(boxes, box_ind, k);
  const float in_y = axis(bx.y1, bx.y2, g.crop_h, g.h).at(bx.y1, bx.y2, g.crop_h, g.h, y);
  if (outside(in_y, g.h)) return;
  const float in_x = axis(bx.x1, bx.x2, g.crop_w, g.w).at(bx.x1, bx.x2, g.crop_w, g.w, x);
  if (outside(in_x, g.w)) return;
  fn(px, y, x, bx, in_y, in_x);
}

auto grad_image_taps(const KernelArgs& a) {
  return [&g = a.problem.geom<Geometry>(), grads = a.in<float>(0), boxes = a.in<float>(1),
          box_ind = a.in<std::int32_t>(2)](std::size_t s, auto& emit) {
    sample(g, boxes, box_ind, s, [&](I px, I, I, const Box& bx, float in_y, float in_x) {
      const float* dy = grads + px * g.c;
      auto at = [&](I yy, I xx, I c) { return static_cast<std::size_t>(((bx.b * g.h + yy) * g.w + xx) * g.c + c); };
      if (g.bilinear) {
        const I top = static_cast<I>(std::floor(in_y)), bottom = static_cast<I>(std::ceil(in_y));
        const I left = static_cast<I>(std::floor(in_x)), right = static_cast<I>(std::ceil(in_x));
        const float yl = in_y - static_cast<float>(top), xl = in_x - static_cast<float>(left);
        for (I c = 0; c < g.c; ++c) {
          const float dtop = (1 - yl) * dy[c];
          emit(at(top, left, c), (1 - xl) * dtop);
          emit(at(top, right, c), xl * dtop);
          const float dbottom = yl * dy[c];
          emit(at(bottom, left, c), (1 - xl) * dbottom);
          emit(at(bottom, right, c), xl * dbottom);
        }
      } else {
        const I cy = static_cast<I>(std::round(in_y)), cx = static_cast<I>(std::round(in_x));
        for (I c = 0; c < g.c; ++c) emit(at(cy, cx, c), dy[c]);
      }
    });
  };
}

auto grad_boxes_taps(const KernelArgs& a) {
  return [&g = a.problem.geom<Geometry>(), grads = a.in<float>(0), image = a.in<float>(1),
          boxes = a.in<float>(2), box_ind = a.in<std::int32_t>(3)](std::size_t s, auto& emit) {
    sample(g, boxes, box_ind, s, [&](I px, I y, I x, const Box& bx, float in_y, float in_x) {
      const float height_ratio = g.crop_h > 1 ? static_cast<float>(g.h - 1) / static_cast<float>(g.crop_h - 1) : 0.0f;
      const float width_ratio = g.crop_w > 1 ? static_cast<float>(g.w - 1) / static_cast<float>(g.crop_w - 1) : 0.0f;
      const I top = static_cast<I>(std::floor(in_y)), bottom = static_cast<I>(std::ceil(in_y));
      const I left = static_cast<I>(std::floor(in_x)), right = static_cast<I>(std::ceil(in_x));
      const float yl = in_y - static_cast<float>(top), xl = in_x - static_cast<float>(left);
      const auto k = static_cast<std::size_t>(px / g.crop_w / g.crop_h);
      const float* dy = grads + px * g.c;
      const float* tl = image + ((bx.b * g.h + top) * g.w + left) * g.c;
      const float* tr = image + ((bx.b * g.h + top) * g.w + right) * g.c;
      const float* bl = image + ((bx.b * g.h + bottom) * g.w + left) * g.c;
      const float* br = image + ((bx.b * g.h + bottom) * g.w + right) * g.c;
      const double half_h = 0.5 * static_cast<double>(g.h - 1), half_w = 0.5 * static_cast<double>(g.w - 1);
      for (I c = 0; c < g.c; ++c) {
        float image_grad_y = (1 - xl) * (bl[c] - tl[c]) + xl * (br[c] - tr[c]);
        float image_grad_x = (1 - yl) * (tr[c] - tl[c]) + yl * (br[c] - bl[c]);
        image_grad_y *= dy[c];
        image_grad_x *= dy[c];
        if (g.crop_h > 1) {
          emit(4 * k + 0, image_grad_y * (static_cast<float>(g.h - 1) - static_cast<float>(y) * height_ratio));
          emit(4 * k + 2, image_grad_y * (static_cast<float>(y) * height_ratio));
        } else {
          emit(4 * k + 0, static_cast<float>(image_grad_y * half_h));
          emit(4 * k + 2, static_cast<float>(image_grad_y * half_h));
        }
        if (g.crop_w > 1) {
          emit(4 * k + 1, image_grad_x * (static_cast<float>(g.w - 1) - static_cast<float>(x) * width_ratio));
          emit(4 * k + 3, image_grad_x * (static_cast<float>(x) * width_ratio));
        } else {
          emit(4 * k + 1, static_cast<float>(image_grad_x * half_w));
          emit(4 * k + 3, static_cast<float>(image_grad_x * half_w));
        }
      }
    });
  };
}

template <class Taps>
void grad(const KernelArgs& a, accumulate::Order order, Taps&& taps_of) {
  const auto& g = a.problem.geom<Geometry>();
  std::memset(a.output, 0, a.problem.output.bytes());
  accumulate::apply(order, a, static_cast<std::size_t>(g.boxes * g.crop_h * g.crop_w), taps_of(a));
}

}  // namespace

D9M_REGISTER_VARIANT({.op = "crop_and_resize", .name = "cpu.serial", .backend = Backend::cpu,
                      .claim = op::serial_claim(), .run = crop_serial});
D9M_REGISTER_VARIANT({.op = "crop_and_resize", .name = "cpu.ordered", .backend = Backend::cpu,
                      .claim = op::per_output_claim(), .run = crop_ordered});
static const bool registered_grad_image = accumulate::register_cpu_variants(
    "crop_and_resize_grad_image", [](const KernelArgs& a, accumulate::Order o) { grad(a, o, grad_image_taps); });
static const bool registered_grad_boxes = accumulate::register_cpu_variants(
    "crop_and_resize_grad_boxes", [](const KernelArgs& a, accumulate::Order o) { grad(a, o, grad_boxes_taps); });

}  // namespace d9m::crop_and_resize
