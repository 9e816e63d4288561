#include "harness/core/value_check.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "harness/core/json_text.h"
#include "kernels/common/half.h"

namespace d9m {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Element i of t as a double (16-bit floats widen exactly).
double element(const HostTensor& t, std::int64_t i) {
  switch (t.desc().dtype) {
    case DType::f32: return t.as<float>()[i];
    case DType::f64: return t.as<double>()[i];
    case DType::f16: return to_float(t.as<Half>()[i]);
    case DType::bf16: return to_float(t.as<BFloat16>()[i]);
    case DType::i32: return t.as<std::int32_t>()[i];
  }
  return 0;
}

// |a - b|, 0 for equal values (two NaNs, two equal infinities), infinite where a NaN meets a number.
double difference(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0;
  if (std::isnan(a) || std::isnan(b)) return kInf;
  return std::fabs(a - b);
}

// JSON has no infinity: a difference that is one is written "inf".
nlohmann::json number(double x) { return std::isinf(x) ? nlohmann::json("inf") : nlohmann::json(x); }
// A difference as d9m writes it: a number >= 0, or "inf".
double number_of(const nlohmann::json& j, const char* field) {
  if (j.is_string() && j.get<std::string>() == "inf") return kInf;
  if (!j.is_number() || !(j.get<double>() >= 0)) throw std::invalid_argument(std::string(field) + " is not a difference d9m writes");
  return j.get<double>();
}
// An integer field in [lo, hi], not a float that would be truncated or overflow.
std::int64_t integer_of(const nlohmann::json& j, const char* field, std::int64_t lo, std::int64_t hi) {
  if (!j.is_number_integer() || j.get<std::int64_t>() < lo || j.get<std::int64_t>() > hi)
    throw std::invalid_argument(std::string(field) + " is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return j.get<std::int64_t>();
}

int weight(ValueCheck::Outcome o) {
  switch (o) {
    case ValueCheck::Outcome::differs: return 2;
    case ValueCheck::Outcome::agrees: return 1;
    case ValueCheck::Outcome::unchecked: return 0;
  }
  return 0;
}

}  // namespace

std::string to_string(ValueCheck::Outcome o) {
  switch (o) {
    case ValueCheck::Outcome::agrees: return "agrees";
    case ValueCheck::Outcome::differs: return "differs";
    case ValueCheck::Outcome::unchecked: return "unchecked";
  }
  return "unchecked";
}

ValueCheck compare_values(const HostTensor& output, const HostTensor& reference, const std::string& reference_name,
                          const std::function<double(double max_ref)>& allowed) {
  ValueCheck c;
  c.reference = reference_name;
  const std::int64_t n = reference.desc().numel();
  c.elements = n;
  double max_ref = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (const double x = element(reference, i); std::isfinite(x)) max_ref = std::max(max_ref, std::fabs(x));
  c.allowed = allowed(max_ref);
  if (output.desc().numel() != n || output.desc().dtype != reference.desc().dtype) {
    c.outcome = ValueCheck::Outcome::differs;
    c.beyond = n;
    c.first_beyond = 0;
    c.max_abs = kInf;
    return c;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = difference(element(output, i), element(reference, i));
    c.max_abs = std::max(c.max_abs, d);
    if (d > c.allowed && c.beyond++ == 0) c.first_beyond = i;
  }
  c.outcome = c.beyond ? ValueCheck::Outcome::differs : ValueCheck::Outcome::agrees;
  return c;
}

ValueCheck combine(const std::vector<ValueCheck>& runs) {
  ValueCheck worst;
  bool any = false;
  std::optional<bool> bits;  // false if any run saw other bits, else true if any saw the claimed ones
  for (const auto& c : runs) {
    if (!any || weight(c.outcome) > weight(worst.outcome) || (c.outcome == worst.outcome && c.max_abs > worst.max_abs)) worst = c;
    any = true;
    if (c.claimed_bits) bits = bits.value_or(true) && *c.claimed_bits;
  }
  worst.claimed_bits = bits;
  return worst;
}

std::string ValueCheck::to_json_text() const {
  nlohmann::json j{{"outcome", to_string(outcome)}, {"reference", reference}};
  if (outcome == Outcome::unchecked) {
    j["reason"] = reason;
  } else {
    j["elements"] = elements;
    j["beyond"] = beyond;
    j["first_beyond"] = first_beyond;
    j["max_abs"] = number(max_abs);
    j["allowed"] = number(allowed);
  }
  if (claimed_bits) j["claimed_bits"] = *claimed_bits;
  return json_text(j);
}

ValueCheck ValueCheck::from_json_text(const std::string& text) {
  ValueCheck c;
  try {
    const auto j = nlohmann::json::parse(text);
    const std::string o = j.at("outcome").get<std::string>();
    bool known = false;
    for (auto x : {Outcome::agrees, Outcome::differs, Outcome::unchecked})
      if (to_string(x) == o) c.outcome = x, known = true;
    if (!known) throw std::invalid_argument("the value check's outcome \"" + o + "\" is not one d9m writes");
    c.reference = j.at("reference").get<std::string>();
    if (c.outcome == Outcome::unchecked) {
      c.reason = j.at("reason").get<std::string>();
    } else {
      c.elements = integer_of(j.at("elements"), "elements", 0, std::numeric_limits<std::int64_t>::max());
      c.beyond = integer_of(j.at("beyond"), "beyond", 0, c.elements);
      c.first_beyond = integer_of(j.at("first_beyond"), "first_beyond", -1, c.elements - 1);
      c.max_abs = number_of(j.at("max_abs"), "max_abs");
      c.allowed = number_of(j.at("allowed"), "allowed");
      // What compare_values writes holds together: an outcome that its own numbers contradict
      // was edited (and its hash-chain link recomputed, or verify would have said so first).
      const bool beyond = c.beyond > 0;
      if (beyond != (c.outcome == Outcome::differs) || beyond != (c.first_beyond >= 0) || beyond != (c.max_abs > c.allowed))
        throw std::invalid_argument("the value check says " + o + ", which its numbers contradict");
    }
    if (j.contains("claimed_bits")) c.claimed_bits = j.at("claimed_bits").get<bool>();
  } catch (const nlohmann::json::exception& ex) {
    // The parser's message may quote the text's bytes, which need not be UTF-8: only its id.
    throw std::invalid_argument("the value check is not JSON that d9m writes (JSON error " + std::to_string(ex.id) + ")");
  }
  // Canonical: what d9m writes, byte for byte (no duplicate keys, nothing after the document).
  if (c.to_json_text() != text) throw std::invalid_argument("the value check is not in the canonical form d9m writes");
  return c;
}

namespace {

// x rounded to float's 24 bits by truncation, the last bit set where that was inexact (round to
// odd): rounding this to nearest at 11 or 8 bits is x rounded to nearest there (24 >= p + 2).
float rounded_to_odd(double x) {
  float f = static_cast<float>(x);
  if (!std::isfinite(f) || static_cast<double>(f) == x) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}

}  // namespace

Half half_from_double(double x) { return half_from_float(rounded_to_odd(x)); }
BFloat16 bfloat16_from_double(double x) { return bfloat16_from_float(rounded_to_odd(x)); }

double value_at(const HostTensor& t, std::int64_t i) { return element(t, i); }

std::vector<double> values_of(const HostTensor& t) {
  std::vector<double> out(static_cast<std::size_t>(t.desc().numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = element(t, static_cast<std::int64_t>(i));
  return out;
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return kInf;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return kInf;
      continue;
    }
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

}  // namespace d9m
