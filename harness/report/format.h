// Small text helpers the renderers share (numbers, durations, lists, Markdown cells).
#pragma once
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/value_check.h"

namespace d9m::format {

inline std::string num(const char* printf_format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

// A cost ratio: 1.11x, 0.39x; two significant digits below 0.1 (0.0039x), where two decimals would
// print a real ratio as 0.00x (an atomic bias-gradient of 27 ms against its 0.11 ms ordered form on
// an H200, reports/h200-2026-11-28).
inline std::string ratio(double v) { return num(v < 0.1 && v > 0 ? "%.2gx" : "%.2fx", v); }

// 812 ns, 3.4 us, 1.25 ms, 2.00 s; "-" when unknown.
inline std::string duration(std::optional<std::int64_t> ns) {
  if (!ns) return "-";
  const double v = static_cast<double>(*ns);
  if (v < 1e3) return num("%.0f ns", v);
  if (v < 1e6) return num("%.1f us", v / 1e3);
  if (v < 1e9) return num("%.2f ms", v / 1e6);
  return num("%.2f s", v / 1e9);
}

inline std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

template <class T> std::string join_numbers(const std::vector<T>& v) {
  std::vector<std::string> s;
  for (auto x : v) s.push_back(std::to_string(x));
  return join(s, ", ");
}

// A Markdown table cell that cannot break the table, nor open an HTML tag in a renderer.
inline std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else if (c == '<') out += "&lt;";
    else out += c;
  }
  return out;
}

// "D (design)", "ND (vendor-api)", "mixed (vendor-api)".
inline std::string short_claim(const std::string& determinism, const std::string& source) {
  const std::string d = determinism == "deterministic" ? "D" : determinism == "nondeterministic" ? "ND"
                        : determinism == "mixed"        ? "mixed"
                                                        : "?";
  return d + " (" + source + ")";
}

// A case's value check in words: "agrees (up to 3e-07; 1e-05 allowed)", "differs: 3 of 100
// elements beyond the 1e-05 allowed, up to 2 (first: element 7)", "unchecked: why"; "-" without one.
inline std::string values_text(const std::optional<ValueCheck>& c) {
  if (!c) return "-";
  switch (c->outcome) {
    case ValueCheck::Outcome::agrees:
      // The reference says which rule held: the op's own, or at 16 bits the f64 one.
      return "agrees with " + c->reference + " (up to " + num("%.3g", c->max_abs) + "; " + num("%.3g", c->allowed) + " allowed)";
    case ValueCheck::Outcome::differs:
      return "differs from " + c->reference + ": " + std::to_string(c->beyond) + " of " + std::to_string(c->elements) + " elements beyond the " +
             num("%.3g", c->allowed) + " allowed, up to " + num("%.3g", c->max_abs) + " (first: element " +
             std::to_string(c->first_beyond) + ")";
    case ValueCheck::Outcome::unchecked: return "unchecked: " + c->reason;
  }
  return "-";
}

}  // namespace d9m::format
