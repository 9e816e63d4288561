// Small text helpers the renderers share (numbers, durations, lists, Markdown cells).
#pragma once
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace d9m::format {

inline std::string num(const char* printf_format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

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

// A Markdown table cell that cannot break the table.
inline std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
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

}  // namespace d9m::format
