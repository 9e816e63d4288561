// embedding_bag_bwd: parameters, tensors and inputs (embedding.h has the semantics).
#include <algorithm>
#include <limits>
#include <string>

#include "kernels/common/fill.h"
#include "kernels/common/op_helpers.h"
#include "kernels/embedding/embedding.h"

namespace d9m::embedding {
namespace {

Geometry geometry(const Params& p) {
  Geometry g;
  g.num_embeddings = p.integer("num_embeddings");
  g.dim = p.integer("dim");
  g.indices = p.integer("indices");
  g.bags = p.integer("bags");
  const std::string& mode = p.choice("mode");
  g.mode = mode == "mean" ? Mode::mean : mode == "max" ? Mode::max : Mode::sum;
  g.per_sample_weights = p.boolean("per_sample_weights");
  if (g.per_sample_weights && g.mode != Mode::sum)
    throw InvalidConfig("per_sample_weights", "PyTorch supports per_sample_weights with mode sum only");
  const std::int64_t padding = p.integer("padding_idx");
  if (padding >= g.num_embeddings) throw InvalidConfig("padding_idx", "padding_idx must be -1 (none) or a row below num_embeddings");
  g.padding_idx = static_cast<std::int32_t>(padding);
  g.bag_size = p.integer("bag_size");
  if (g.bag_size > 0 && g.indices != g.bags * g.bag_size)
    throw InvalidConfig("bag_size", "indices must be bags x bag_size (" + std::to_string(g.bags) + " x " + std::to_string(g.bag_size) +
                                        "), not " + std::to_string(g.indices));
  if (g.num_embeddings > std::numeric_limits<std::int32_t>::max())
    throw InvalidConfig("num_embeddings", "at most 2^31 - 1 (int32 indices)");
  if (g.indices >= std::numeric_limits<std::int32_t>::max()) throw InvalidConfig("indices", "below 2^31 - 1 (int32 offsets)");
  g.zipf_ids = p.choice("ids") == "zipf";
  op::checked_product({g.num_embeddings, g.dim}, "dim");
  op::checked_product({g.bags, g.dim}, "dim");
  op::checked_product({g.indices, g.dim}, "indices");
  return g;
}

Problem plan(const Params& p) {
  const Geometry g = geometry(p);
  std::vector<TensorDesc> in = {op::i32("indices", {g.indices}), op::i32("offsets", {g.bags})};
  if (g.mode == Mode::max) {
    in.push_back(op::f32("weight", {g.num_embeddings, g.dim}));
    in.push_back(op::i32("max_indices", {g.bags, g.dim}));
  }
  in.push_back(op::f32("grad", {g.bags, g.dim}));
  if (g.per_sample_weights) in.push_back(op::f32("per_sample_weights", {g.indices}));
  Problem problem{std::move(in), op::f32("grad_weight", {g.num_embeddings, g.dim}), g};
  // Mode max is in scatter form (MaxGrads: each bag and feature sends at most its max row's
  // gradient), so its ordered forms get the bound; sum and mean sort rows of their own.
  if (g.mode == Mode::max) return op::scattering(std::move(problem), {g.bags, g.dim}, "dim");
  return problem;
}

constexpr unsigned kGradBinades = 16;

// offsets[0] = 0, the others drawn in [0, I] and sorted: bag sizes vary around I / B and some
// bags are empty. With a bag_size k, offsets[b] = b k: nn.Embedding's backward is bags of one.
void fill_offsets(FillTarget& t, std::int64_t indices, std::int64_t bag_size) {
  if (bag_size > 0) {
    auto* o = static_cast<std::int32_t*>(t.data);
    for (std::int64_t b = 0; b < t.desc.numel(); ++b) o[b] = static_cast<std::int32_t>(b * bag_size);
    return;
  }
  fill::integers(t, 0, static_cast<std::int32_t>(indices + 1));
  auto* o = static_cast<std::int32_t*>(t.data);
  const auto n = static_cast<std::size_t>(t.desc.numel());
  std::sort(o, o + n);
  if (n) o[0] = 0;
}

// A float as the config's dtype holds it, for comparisons: f16 and bf16 round (and may tie values
// that differ in f32); f64 inputs keep the f32 values' order and ties (harness/core/inputs.h adds
// bits below float's that never cross to a neighbour), and f32 is itself.
float as_held(float v, DType dtype) {
  switch (dtype) {
    case DType::f16: return to_float(half_from_float(v));
    case DType::bf16: return to_float(bfloat16_from_float(v));
    default: return v;
  }
}

void fill(const Problem& pr, FillMode mode, std::vector<FillTarget>& in) {
  const Geometry& g = pr.geom<Geometry>();
  if (g.zipf_ids) fill::zipf_integers(in[0], static_cast<std::int32_t>(g.num_embeddings));
  else fill::integers(in[0], 0, static_cast<std::int32_t>(g.num_embeddings));
  fill_offsets(in[1], g.indices, g.bag_size);
  std::size_t next = 2;
  if (g.mode == Mode::max) {
    // The weight in exact mode is small integers: many ties, which the first-maximum rule breaks.
    fill::floats(in[2], mode);
    const auto* weight = static_cast<const float*>(in[2].data);
    auto* max_indices = static_cast<std::int32_t*>(in[3].data);
    const auto value = [&](std::int32_t row, std::int64_t f) { return as_held(weight[row * g.dim + f], pr.dtype); };
    for (std::int64_t b = 0; b < g.bags; ++b)
      for (std::int64_t f = 0; f < g.dim; ++f)
        max_indices[b * g.dim + f] = bag_argmax(g, static_cast<const std::int32_t*>(in[0].data),
                                                static_cast<const std::int32_t*>(in[1].data), b, f, value);
    next = 4;
  }
  // The gradient over 16 binades, as real gradients spread: values of [-1, 1) on float's 2^-23 grid
  // would add exactly in f32 until a sum passes 2, and a race would not show.
  fill::mixed_magnitude_floats(in[next], mode, kGradBinades);
  if (g.per_sample_weights) fill::floats(in[next + 1], mode);
}

// Every gradient element sums at most one contribution per index (per bag in mode max): registry.h
// long_sum_tolerance. (Found by review: 160,000 indices into 4 rows failed cpu.atomic's values.)
std::int64_t sum_terms(const Problem& p) {
  const Geometry& g = p.geom<Geometry>();
  return g.mode == Mode::max ? g.bags : g.indices;
}

}  // namespace

D9M_REGISTER_OP(OpDef{
    .name = "embedding_bag_bwd", .family = "embedding",
    .summary = "PyTorch's EmbeddingBag weight gradient, mode sum, mean (sorted partial sums) or max (atomicAdd at the argmax)",
    .params = {op::integer("num_embeddings", "rows of the table (E)"), op::integer("dim", "features per row (D)"),
               op::integer("indices", "indices over all bags (I)"), op::integer("bags", "bags (B)"),
               op::choice_or("mode", "sum", {"sum", "mean", "max"}, "EmbeddingBag's mode"),
               op::boolean_or("per_sample_weights", false, "a weight per index (mode sum only)"),
               op::integer_or("padding_idx", -1, "a row whose entries contribute nothing (-1: none)", -1),
               op::added_later(op::integer_or("bag_size", 0,
                                              "indices per bag: 0 random sizes (offsets drawn in [0, indices] and sorted, some "
                                              "bags empty), k > 0 every bag k (indices = bags x k; 1 is nn.Embedding's backward)", 0)),
               op::added_later(op::choice_or("ids", "uniform", {"uniform", "zipf"},
                                             "how the indices are drawn: uniform in [0, num_embeddings), or zipf, row k about "
                                             "k + 1 times rarer than row 0 (as token ids)"))},
    .tolerance = 1e-5,
    .dtypes = op::all_float_dtypes(),
    .plan = plan,
    .fill = fill,
    .sum_terms = sum_terms});

}  // namespace d9m::embedding
