// The configs of the cost benchmarks (gpu_bench.cu, cost_bench.cpp): one per op family with an
// output of 1 MiB or more (the default catalogue's configs are smaller: there the per-trial round
// trip, not the op, is what a trial costs). Each benchmark takes a config's index as its argument.
#pragma once
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/catalog.h"
#include "kernels/registry.h"

namespace d9m::bench {

inline constexpr const char* kBenchCatalog = R"({"schema": "d9m.catalog/1", "configs": [
 {"op": "bias_add", "name": "bench_8MiB", "params": {"n": 32, "h": 32, "w": 32, "c": 64}},
 {"op": "conv2d_bwd_data", "name": "bench_1MiB", "params": {"n": 8, "h": 32, "w": 32, "ci": 32, "co": 32, "kh": 3, "kw": 3}},
 {"op": "maxpool2d_bwd", "name": "bench_2MiB", "params": {"n": 8, "h": 64, "w": 64, "c": 16, "ksize_h": 3, "ksize_w": 3,
                                                          "stride_h": 1, "stride_w": 1, "padding": "SAME"}},
 {"op": "resize_bilinear_grad", "name": "bench_2MiB", "params": {"n": 8, "h": 64, "w": 64, "c": 16, "out_h": 128, "out_w": 128}},
 {"op": "scatter_add", "name": "bench_2MiB", "params": {"rows": 65536, "depth": 8, "updates": 65536}},
 {"op": "unsorted_segment_sum", "name": "bench_2MiB", "params": {"rows": 262144, "depth": 8, "num_segments": 65536}},
 {"op": "crop_and_resize_grad_image", "name": "bench_4MiB", "params": {"batch": 4, "h": 128, "w": 128, "c": 16, "boxes": 64,
                                                                       "crop_h": 17, "crop_w": 17}}]})";

inline const Catalog& bench_catalog() {
  static const Catalog cat = parse_catalog(kBenchCatalog, "<bench catalogue>", Registry::global());
  return cat;
}

inline std::string case_label(const CatalogConfig& cc) {
  return cc.op->name + "/" + cc.name + " (" + std::to_string(cc.problem.output.bytes() >> 10) + " KiB out)";
}

// One argument per config of kBenchCatalog, counted in its text: benchmarks register before the
// op registry is complete, so the catalogue cannot be parsed yet.
inline void case_args(benchmark::internal::Benchmark* b) {
  const std::string text = kBenchCatalog;
  std::int64_t configs = 0;
  for (std::size_t at = text.find("\"op\":"); at != std::string::npos; at = text.find("\"op\":", at + 1)) ++configs;
  for (std::int64_t i = 0; i < configs; ++i) b->Arg(i);
}

// The variants of an op on one backend that the cost benchmarks time against its atomic one:
// every variant claimed deterministic by design that may be offered as the fix (not the serial
// reference, not a control).
inline std::vector<const VariantDef*> deterministic_variants(const std::string& op, Backend backend) {
  std::vector<const VariantDef*> out;
  for (const auto* v : Registry::global().variants_of(op))
    if (v->backend == backend && v->role == Role::ordered && v->claim.determinism == Determinism::deterministic) out.push_back(v);
  return out;
}

// The cost benchmarks' counters: each deterministic variant's summed time over the atomic one's
// (`<variant>/atomic`) and the fastest one's (`best/atomic`).
inline void set_cost_counters(benchmark::State& state, const std::vector<const VariantDef*>& variants,
                              const std::vector<double>& times, double atomic_time) {
  for (std::size_t i = 0; i < variants.size(); ++i) state.counters[variants[i]->name + "/atomic"] = times[i] / atomic_time;
  if (!times.empty()) state.counters["best/atomic"] = *std::min_element(times.begin(), times.end()) / atomic_time;
}

}  // namespace d9m::bench
