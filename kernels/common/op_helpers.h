// Small builders that keep op declarations readable.
#pragma once
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/registry.h"

namespace d9m::op {

inline ParamSpec integer(std::string name, std::string doc, std::int64_t min = 1) {
  return {std::move(name), ParamKind::integer, std::nullopt, min, {}, std::move(doc)};
}
inline ParamSpec integer_or(std::string name, std::int64_t dflt, std::string doc, std::int64_t min = 1) {
  return {std::move(name), ParamKind::integer, ParamValue{dflt}, min, {}, std::move(doc)};
}
// A parameter added to an existing op (ParamSpec::added_later).
inline ParamSpec added_later(ParamSpec spec) {
  spec.added_later = true;
  return spec;
}
inline ParamSpec boolean_or(std::string name, bool dflt, std::string doc) {
  return {std::move(name), ParamKind::boolean, ParamValue{dflt}, 0, {}, std::move(doc)};
}
inline ParamSpec real_or(std::string name, double dflt, std::string doc) {
  return {std::move(name), ParamKind::real, ParamValue{dflt}, 0, {}, std::move(doc)};
}
inline ParamSpec choice_or(std::string name, std::string dflt, std::vector<std::string> choices,
                           std::string doc) {
  return {std::move(name), ParamKind::choice, ParamValue{std::move(dflt)}, 0, std::move(choices),
          std::move(doc)};
}

// Products of parameters inside plan() are checked: a config whose sizes multiply past 2^62 is
// an InvalidConfig naming the parameter, never signed overflow.
inline std::int64_t checked_product(std::initializer_list<std::int64_t> factors, const std::string& param) {
  std::int64_t p = 1;
  for (std::int64_t f : factors)
    if (__builtin_mul_overflow(p, f, &p) || p > (std::int64_t{1} << 62))
      throw InvalidConfig(param, "the sizes multiply beyond 2^62 elements");
  return p;
}

// A problem in scatter form with the most contributions its sources can emit
// (Problem::contributions), a product of sizes checked like any other.
inline Problem scattering(Problem p, std::initializer_list<std::int64_t> factors, const std::string& param) {
  p.contributions = static_cast<std::uint64_t>(checked_product(factors, param));
  return p;
}

// The tensor of an elementwise op (activation, optim): a size `n` and optional extra dims h, w, c
// (default 1), so one op takes a flat [n] vector, an [n, h] matrix or an NHWC conv output. Its
// shape is [n, h, w, c] without the trailing extra dims equal to 1: n alone is [n], n and c > 1
// is [n, 1, 1, c].
inline std::vector<ParamSpec> elementwise_params() {
  return {integer("n", "size (the first dim)"), integer_or("h", 1, "second dim (1: none)"),
          integer_or("w", 1, "third dim (1: none)"), integer_or("c", 1, "fourth dim (1: none)")};
}
inline Shape elementwise_shape(const Params& p) {
  Shape s = {p.integer("n"), p.integer("h"), p.integer("w"), p.integer("c")};
  checked_product({s[0], s[1], s[2], s[3]}, "n");
  while (s.size() > 1 && s.back() == 1) s.pop_back();
  return s;
}

// f32 first (the default), then the others: an op whose variants all run at every precision.
inline std::vector<DType> all_float_dtypes() { return {DType::f32, DType::f16, DType::bf16, DType::f64}; }

inline TensorDesc f32(std::string name, Shape shape) { return {std::move(name), DType::f32, std::move(shape)}; }
// A float32 tensor at every config dtype (TensorDesc::keeps_f32).
inline TensorDesc f32_always(std::string name, Shape shape) { return {std::move(name), DType::f32, std::move(shape), true}; }
inline TensorDesc i32(std::string name, Shape shape) { return {std::move(name), DType::i32, std::move(shape)}; }

inline Claim deterministic(std::string reason) {
  return {Determinism::deterministic, ClaimSource::design, std::move(reason)};
}
inline Claim nondeterministic(std::string reason) {
  return {Determinism::nondeterministic, ClaimSource::design, std::move(reason)};
}

// Claims every CPU family shares, so the wording is the same across the report.
inline Claim serial_claim() { return deterministic("one thread adds in the reference order"); }
inline Claim atomic_claim() {
  return nondeterministic("float atomic adds from worker threads in scheduler order");
}
inline Claim replay_claim() {
  return deterministic("stable bucketing by output replays the reference order per output");
}
inline Claim fixed_point_claim() {
  return deterministic("contributions rounded onto one grid and summed as 128-bit integers: the atomic adds commute, so any order gives the same bits");
}
inline Claim gather_claim() {
  return deterministic("each output sums the contributions it receives, enumerated in the reference order: no atomics, "
                       "no sort, no working memory");
}
inline Claim per_output_claim() {
  return deterministic("each output is written by one task with the reference formula");
}

}  // namespace d9m::op
