// The audit's look at a case's values, beside its bits. Repeatability says a variant gives the
// same bits every time; it does not say they are the op's bits. A library kernel that is wrong
// but repeatable (the H200 audit found PyTorch's deterministic reflection_pad2d backward to be one,
// reports/h200-2026-11-26/NOTES.md) would be DETERMINISTIC, and could be offered as the fix for a
// nondeterministic variant. So the first trial's output of every case is compared with the op's
// serial reference on the same inputs, within the tolerance the variant is held to
// (kernels/registry.h accepted_difference), and a case whose values differ fails the verdict.
// A 16-bit output is first compared with the op computed in f64 and rounded once, at a few units
// of roundoff (accepted_wide_difference); a rule that an all-zero output would pass (at 16 bits,
// half the output) is no check, and the case is unchecked with the reason (ValueChecker,
// harness/exec/value_checker.h).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/inputs.h"
#include "kernels/common/half.h"

namespace d9m {

struct ValueCheck {
  enum class Outcome { agrees, differs, unchecked };
  Outcome outcome = Outcome::unchecked;
  std::string reference;        // the variant whose output was the reference (the serial one, or one claiming its bits)
  std::int64_t elements = 0;    // elements compared
  std::int64_t beyond = 0;      // elements farther than `allowed` from the reference (a NaN against a number counts)
  std::int64_t first_beyond = -1;  // the first of them, or -1
  double max_abs = 0;           // max |output - reference|, infinite where a NaN or an infinity meets a number
  double allowed = 0;           // accepted_difference() at this output's max |reference|
  std::string reason;           // unchecked: why
  // For a variant claiming another's bits, where that variant computed the reference on the same
  // inputs: whether the output's bits are its bits (absent otherwise, and in checks stored before
  // schema 10).
  std::optional<bool> claimed_bits;

  // The canonical JSON the store keeps in case_runs.value_check (schema 9; the hash chain covers it).
  std::string to_json_text() const;
  // Throws std::invalid_argument on text that is not such JSON.
  static ValueCheck from_json_text(const std::string& text);
};

std::string to_string(ValueCheck::Outcome o);  // "agrees", "differs", "unchecked"

// `output` against `reference` (same dtype and size: otherwise every element is beyond), with
// allowed(max|reference| over its finite elements) as the largest accepted difference. Equal
// values (two NaNs, two equal infinities included) agree.
ValueCheck compare_values(const HostTensor& output, const HostTensor& reference, const std::string& reference_name,
                          const std::function<double(double max_ref)>& allowed);

// One check for several runs of a case: the worst of them (differs > agrees > unchecked), the
// largest difference among equals; its claimed bits false where any run's were, else true where
// any run's were (a run whose reference was computed by another variant has none).
ValueCheck combine(const std::vector<ValueCheck>& runs);

// x rounded once to nearest, ties to even (through f32 rounded to odd: rounding to nearest twice
// could miss the nearest 16-bit value by one unit).
Half half_from_double(double x);
BFloat16 bfloat16_from_double(double x);

// Element i of a tensor as a double (16-bit floats widened exactly).
double value_at(const HostTensor& t, std::int64_t i);

// A tensor's elements as doubles (16-bit floats widened exactly), and the largest |a[i] - b[i]|,
// infinite where exactly one of a pair is NaN or the sizes differ: for tests and tools.
std::vector<double> values_of(const HostTensor& t);
double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace d9m
