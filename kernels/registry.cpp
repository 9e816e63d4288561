#include "kernels/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace d9m {

const ParamValue& Params::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error("parameter '" + name + "' was not validated");
  return it->second;
}
std::int64_t Params::integer(const std::string& name) const { return std::get<std::int64_t>(at(name)); }
bool Params::boolean(const std::string& name) const { return std::get<bool>(at(name)); }
double Params::real(const std::string& name) const { return std::get<double>(at(name)); }
const std::string& Params::choice(const std::string& name) const { return std::get<std::string>(at(name)); }

std::string to_string(Backend b) {
  switch (b) {
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
    case Backend::torch: return "torch";
  }
  return "cpu";
}

std::string to_string(Determinism d) {
  switch (d) {
    case Determinism::deterministic: return "deterministic";
    case Determinism::nondeterministic: return "nondeterministic";
    case Determinism::unknown: return "unknown";
  }
  return "unknown";
}

std::string to_string(ClaimSource s) {
  switch (s) {
    case ClaimSource::design: return "design";
    case ClaimSource::vendor_doc: return "vendor-doc";
    case ClaimSource::vendor_api: return "vendor-api";
  }
  return "design";
}

std::string to_string(Role r) {
  switch (r) {
    case Role::unset: return "unset";
    case Role::reference: return "reference";
    case Role::atomic: return "atomic";
    case Role::ordered: return "ordered";
    case Role::vendor: return "vendor";
    case Role::autotune: return "autotune";
    case Role::control: return "control";
    case Role::program: return "program";
    case Role::framework: return "framework";
  }
  return "unset";
}

std::optional<Role> role_from_string(const std::string& s) {
  for (Role r : {Role::reference, Role::atomic, Role::ordered, Role::vendor, Role::autotune, Role::control, Role::program, Role::framework})
    if (s == to_string(r)) return r;
  return std::nullopt;
}

Registry& Registry::global() {
  static Registry registry;  // function-local: safe from static-initialisation order
  return registry;
}

// A duplicate registration, or a variant without a role, is a programming error that would make
// results ambiguous; it is reported and the process stops before main, where every developer
// sees it at once.
[[noreturn]] static void refuse(const std::string& what) {
  std::fprintf(stderr, "d9m: %s\n", what.c_str());
  std::abort();
}

std::optional<std::string> batch_param(const OpDef& op) {
  if (!op.batch) return std::nullopt;
  // The axes may depend on the parameters (matmul's layout), the parameter's name does not:
  // any valid values name it.
  Params p;
  for (const auto& s : op.params) {
    if (s.default_value) p.set(s.name, *s.default_value);
    else if (s.kind == ParamKind::integer) p.set(s.name, s.min);
    else if (s.kind == ParamKind::boolean) p.set(s.name, false);
    else if (s.kind == ParamKind::real) p.set(s.name, 0.0);
    else p.set(s.name, s.choices.empty() ? std::string() : s.choices.front());
  }
  return op.batch(p).param;
}

double tolerance_for(const OpDef& op, DType dtype, const std::string& math) {
  // Scaled by the unit roundoff: f32 2^-24, f16 2^-11, bf16 2^-8, f64 2^-53. TF32 keeps f16's
  // 10 explicit significand bits in its products.
  if (math == "tf32" && dtype == DType::f32) return op.tolerance * 0x1p13;
  switch (dtype) {
    case DType::f16: return op.tolerance * 0x1p13;
    case DType::bf16: return op.tolerance * 0x1p16;
    case DType::f64: return op.tolerance * 0x1p-29;
    default: return op.tolerance;
  }
}

double long_sum_tolerance(const OpDef& op, const Problem& p) {
  if (!op.sum_terms) return 0;
  const double u = p.output.dtype == DType::f64 ? 0x1p-53 : 0x1p-24;
  return kSumRoundoffUnits * u * std::sqrt(static_cast<double>(std::max<std::int64_t>(op.sum_terms(p), 1)));
}

double tolerance_for(const OpDef& op, const Problem& p) {
  return std::max(tolerance_for(op, p.output.dtype, p.math), long_sum_tolerance(op, p));
}

double allowed_difference(const OpDef& op, const Problem& p, double max_ref) {
  return op.agreement ? op.agreement(p, max_ref) : tolerance_for(op, p) * (1 + max_ref);
}

double accepted_wide_difference(const OpDef& op, const Problem& p, const VariantDef& v, double max_ref) {
  const double roundoff = p.output.dtype == DType::bf16 ? 0x1p-8 : p.output.dtype == DType::f16 ? 0x1p-11 : 0;
  Problem f32 = p;
  f32.output.dtype = DType::f32;
  double accumulation = allowed_difference(op, f32, max_ref);
  if (is_outside_code(v.role)) accumulation = std::max(accumulation, 1e-3 * (1 + max_ref));
  return kWideRoundoffUnits * (roundoff * max_ref + 0x1p-24) + accumulation;
}

bool is_outside_code(Role r) { return r == Role::vendor || r == Role::autotune || r == Role::framework || r == Role::program; }

double accepted_difference(const OpDef& op, const Problem& p, const VariantDef& v, double max_ref, bool on_device) {
  double rule = allowed_difference(op, p, max_ref);
  if (is_outside_code(v.role)) {
    // TF32 only on a device: no CPU library uses it.
    const std::string math = on_device && p.output.dtype == DType::f32 && p.math == "default" ? "tf32" : p.math;
    if (!op.agreement) rule = std::max(tolerance_for(op, p.output.dtype, math), long_sum_tolerance(op, p)) * (1 + max_ref);
    // Another implementation's rounding: 1e-3 (1e-5 in f64), or a few units of a 16-bit dtype's roundoff.
    OpDef roundoff;
    roundoff.tolerance = 1e-6;
    const double floor = p.output.dtype == DType::f64 ? 1e-5 : std::max(1e-3, tolerance_for(roundoff, p.output.dtype));
    rule = std::max(rule, floor * (1 + max_ref));
  }
  return on_device ? std::max(rule, 1e-5 * (1 + max_ref)) : rule;
}

bool Registry::add(OpDef op) {
  if (find_op(op.name)) refuse("op " + op.name + " is registered twice");
  if (op.dtypes.empty() || op.dtypes.front() != DType::f32 ||
      std::any_of(op.dtypes.begin(), op.dtypes.end(), [](DType t) { return !is_float(t); }))
    refuse("op " + op.name + ": its dtypes must be float types, f32 first (the default)");
  if (op.math_modes.empty() || op.math_modes.front() != "default") refuse("op " + op.name + ": its math modes must start with \"default\"");
  for (const auto& p : op.params)
    if (p.name == "dtype" || p.name == "math") refuse("op " + op.name + ": \"" + p.name + "\" is a config field, not a parameter");
  ops_.push_back(std::move(op));
  return true;
}

bool Registry::add(std::vector<VariantDef> variants) {
  for (auto& v : variants) {
    if (find_variant(v.op, v.name)) refuse("variant " + v.op + "/" + v.name + " is registered twice");
    if (v.role == Role::unset) refuse("variant " + v.op + "/" + v.name + " is registered without a role");
    if (v.role == Role::reference && !v.invariance)
      v.invariance = Claim{Determinism::deterministic, ClaimSource::design,
                           "one thread computes each output in a fixed order that no other row of the batch changes"};
    variants_.push_back(std::move(v));
  }
  return true;
}

const OpDef* Registry::find_op(const std::string& name) const {
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const OpDef& o) { return o.name == name; });
  return it == ops_.end() ? nullptr : &*it;
}

const VariantDef* Registry::find_variant(const std::string& op, const std::string& name) const {
  auto it = std::find_if(variants_.begin(), variants_.end(),
                         [&](const VariantDef& v) { return v.op == op && v.name == name; });
  return it == variants_.end() ? nullptr : &*it;
}

std::vector<const VariantDef*> Registry::variants_of(const std::string& op) const {
  std::vector<const VariantDef*> out;
  for (const auto& v : variants_)
    if (v.op == op) out.push_back(&v);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return out;
}

}  // namespace d9m
