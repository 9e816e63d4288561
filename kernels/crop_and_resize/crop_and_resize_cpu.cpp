// CPU variants of the crop_and_resize family. The forward op writes each crop element once; the
// gradients are in scatter form with source = one crop pixel (k, y, x).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/common/accumulate.h"
#include "kernels/common/float_dispatch.h"
#include "kernels/common/op_helpers.h"
#include "kernels/common/parallel.h"
#include "kernels/crop_and_resize/crop_and_resize.h"

namespace d9m::crop_and_resize {
namespace {

// Forward rows [begin, end), row = (k, y); T is the image's storage type (crops are float).
template <class T>
void crop_rows(const KernelArgs& a, std::size_t begin, std::size_t end) {
  const auto& g = a.problem.geom<Geometry>();
  const T* image = a.in<T>(0);
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

template <class T>
void crop_serial(const KernelArgs& a, T) {
  const auto& g = a.problem.geom<Geometry>();
  crop_rows<T>(a, 0, static_cast<std::size_t>(g.boxes * g.crop_h));
}

template <class T>
void crop_ordered(const KernelArgs& a, T) {
  const auto& g = a.problem.geom<Geometry>();
  parallel_blocks(*a.exec.pool, static_cast<std::size_t>(g.boxes * g.crop_h), 4,
                  [&](std::size_t b, std::size_t e) { crop_rows<T>(a, b, e); });
}

std::size_t crop_pixels(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  return static_cast<std::size_t>(g.boxes * g.crop_h * g.crop_w);
}

// grad_image adds in the dtype (its output's); grad_boxes in float (its output is f32).
void grad_image(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());  // +0 in every float type
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<T>(order, a, crop_pixels(a),
                         GradImageTaps<T>{a.problem.geom<Geometry>(), a.in<float>(0), a.in<float>(1), a.in<std::int32_t>(2)});
  });
}

void grad_boxes(const KernelArgs& a, accumulate::Order order) {
  std::memset(a.output, 0, a.problem.output.bytes());
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    accumulate::apply<float>(order, a, crop_pixels(a),
                             GradBoxesTaps<T>{a.problem.geom<Geometry>(), a.in<float>(0), a.in<T>(1), a.in<float>(2),
                                              a.in<std::int32_t>(3)});
  });
}

// The gather form (crop_and_resize.h). Each call first lists, per image row, the crop rows whose
// samples touch it, in increasing (k, y): a counting sort of the crop rows by the (at most two)
// image rows they touch, so that an image row visits only its own crop rows, not every box's
// (tall images under many boxes made the full scan 100x the scatter form). Then a task per few
// image rows replays them. The lists' buffers come from prepare().
struct GatherLists {
  std::vector<std::int64_t> start;      // per image row (b * h + iy), and one past the last
  std::vector<std::int64_t> cursor;     // per image row, where its next crop row goes
  std::vector<std::int64_t> crop_rows;  // k * crop_h + y, grouped by image row
};

void list_crop_rows(const Geometry& g, const float* boxes, const std::int32_t* box_ind, GatherLists& l) {
  std::fill(l.start.begin(), l.start.end(), 0);
  I rows[2];
  auto each = [&](auto&& visit) {
    for (I k = 0; k < g.boxes; ++k) {
      if (box_ind[k] < 0 || box_ind[k] >= g.batch) continue;  // no row of the image: nothing to gather
      for (I y = 0; y < g.crop_h; ++y)
        for (int n = rows_touched(g, boxes, box_ind, k, y, rows), i = 0; i < n; ++i) visit(box_ind[k] * g.h + rows[i], k * g.crop_h + y);
    }
  };
  each([&](I image_row, I) { ++l.start[static_cast<std::size_t>(image_row) + 1]; });
  for (std::size_t r = 1; r < l.start.size(); ++r) l.start[r] += l.start[r - 1];
  std::copy(l.start.begin(), l.start.end() - 1, l.cursor.begin());
  each([&](I image_row, I crop_row) { l.crop_rows[static_cast<std::size_t>(l.cursor[static_cast<std::size_t>(image_row)]++)] = crop_row; });
}

void grad_image_gathered(const KernelArgs& a) {
  const auto& g = a.problem.geom<Geometry>();
  auto& lists = *static_cast<GatherLists*>(a.state);
  const float* grads = a.in<float>(0);
  const float* boxes = a.in<float>(1);
  const auto* box_ind = a.in<std::int32_t>(2);
  list_crop_rows(g, boxes, box_ind, lists);
  with_float_type(a.problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = a.out<T>();
    parallel_blocks(*a.exec.pool, static_cast<std::size_t>(g.batch * g.h), 2, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        T* row = out + static_cast<I>(r) * g.w * g.c;
        std::fill(row, row + g.w * g.c, T{0});
        for (std::int64_t i = lists.start[r]; i < lists.start[r + 1]; ++i) {
          const I crop_row = lists.crop_rows[static_cast<std::size_t>(i)];
          gather_crop_row(g, grads, boxes, box_ind, crop_row / g.crop_h, crop_row % g.crop_h, static_cast<I>(r) / g.h,
                          static_cast<I>(r) % g.h, 0, g.c, row);
        }
      }
    });
  });
}

}  // namespace

D9M_REGISTER_VARIANTS({{.op = "crop_and_resize_grad_image", .name = "cpu.gather", .backend = Backend::cpu, .role = Role::ordered,
                        .claim = gather_claim(), .run = grad_image_gathered,
                        .prepare = [](const Problem& p, const ExecContext&) {
                          const auto& g = p.geom<Geometry>();
                          auto l = std::make_shared<GatherLists>();
                          l->start.resize(static_cast<std::size_t>(g.batch * g.h) + 1);
                          l->cursor.resize(static_cast<std::size_t>(g.batch * g.h));
                          l->crop_rows.resize(static_cast<std::size_t>(2 * g.boxes * g.crop_h));
                          return Prepared{l, std::nullopt};
                        },
                        .bit_equal_to = "cpu.serial",
                        .memory = [](const Problem& p) {
                          const auto& g = p.geom<Geometry>();
                          return std::optional<WorkingMemory>{
                              {static_cast<std::uint64_t>(16 * (g.batch * g.h + 1) + 16 * g.boxes * g.crop_h), "the crop rows listed per image row"}};
                        }}});
D9M_REGISTER_VARIANTS({{.op = "crop_and_resize", .name = "cpu.serial", .backend = Backend::cpu, .role = Role::reference,
                       .claim = op::serial_claim(), .run = typed([](const KernelArgs& a, auto t) { crop_serial(a, t); })}});
D9M_REGISTER_VARIANTS({{.op = "crop_and_resize", .name = "cpu.ordered", .backend = Backend::cpu, .role = Role::ordered,
                       .claim = op::per_output_claim(), .run = typed([](const KernelArgs& a, auto t) { crop_ordered(a, t); }),
                       .bit_equal_to = "cpu.serial"}});
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("crop_and_resize_grad_image", grad_image));
D9M_REGISTER_VARIANTS(accumulate::cpu_fixed_point_variant("crop_and_resize_grad_image", grad_image));
D9M_REGISTER_VARIANTS(accumulate::cpu_variants("crop_and_resize_grad_boxes", grad_boxes));

}  // namespace d9m::crop_and_resize
