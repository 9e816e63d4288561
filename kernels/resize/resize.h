// resize family, TensorFlow semantics (tf.raw_ops), NHWC, float32:
//   resize_bilinear(images[N,H,W,C], size=[OH,OW], align_corners, half_pixel_centers) -> [N,OH,OW,C]
//   resize_bilinear_grad(grads[N,OH,OW,C], original_image[N,H,W,C], ...)             -> [N,H,W,C]
//   resize_nearest(images, size, align_corners, half_pixel_centers)                  -> [N,OH,OW,C]
//   resize_nearest_grad(grads[N,OH,OW,C], size=[H,W], ...)                           -> [N,H,W,C]
// scale = (align_corners && out > 1) ? (in - 1) / (out - 1) : in / out   (float, as TF)
// Bilinear source coordinate of output index i:
//   half_pixel_centers ? (i + 0.5) * scale - 0.5 : i * scale
//   lower = max(floor(c), 0), upper = min(ceil(c), in - 1), lerp = c - floor(c)
//   forward: top = tl + (tr - tl) * xl; bottom = bl + (br - bl) * xl; out = top + (bottom - top) * yl
//   grad:    each grads element g adds g*(1-yl)*(1-xl), g*(1-yl)*xl, g*yl*(1-xl), g*yl*xl to
//            (lower,lower), (lower,upper), (upper,lower), (upper,upper), in that order
// Nearest source index: c = half_pixel_centers ? (i + 0.5) * scale : i * scale;
//   min(align_corners ? round(c) : floor(c), in - 1), then max(., 0) with half_pixel_centers.
// The grads share the forward mapping (grads are at the resized size).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace d9m::resize {

struct Axis {
  std::vector<std::int64_t> lower, upper;  // bilinear taps per output index
  std::vector<float> lerp;
  std::vector<std::int64_t> nearest;       // nearest tap per output index
};

struct Geometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;  // h, w: small side; oh, ow: resized
  Axis y, x;
};

inline float resize_scale(std::int64_t in, std::int64_t out, bool align_corners) {
  return (align_corners && out > 1) ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                                    : static_cast<float>(in) / static_cast<float>(out);
}

inline Axis make_axis(std::int64_t in, std::int64_t out, bool align_corners, bool half_pixel) {
  Axis a;
  const float scale = resize_scale(in, out, align_corners);
  for (std::int64_t i = 0; i < out; ++i) {
    const float fi = static_cast<float>(i);
    const float c = half_pixel ? (fi + 0.5f) * scale - 0.5f : fi * scale;
    const float cf = std::floor(c);
    a.lower.push_back(std::max<std::int64_t>(static_cast<std::int64_t>(cf), 0));
    a.upper.push_back(std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(c)), in - 1));
    a.lerp.push_back(c - cf);
    const float cn = half_pixel ? (fi + 0.5f) * scale : fi * scale;
    std::int64_t k = std::min<std::int64_t>(
        static_cast<std::int64_t>(align_corners ? std::round(cn) : std::floor(cn)), in - 1);
    if (half_pixel) k = std::max<std::int64_t>(k, 0);
    a.nearest.push_back(k);
  }
  return a;
}

}  // namespace d9m::resize
