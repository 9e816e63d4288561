#include "harness/core/escape.h"

namespace d9m {

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += "\xEF\xBF\xBD";
        else out += c;
    }
  }
  return out;
}

std::string csv_field(const std::string& s) {
  std::string v = s;
  if (!v.empty() && (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@')) {
    // Numbers such as -1.5 are data, not formulas: leave them as they are.
    bool numeric = v.size() > 1;
    for (std::size_t i = 1; i < v.size(); ++i) numeric &= (v[i] >= '0' && v[i] <= '9') || v[i] == '.' || v[i] == 'e';
    if (!(numeric && v[0] == '-')) v = "'" + v;
  }
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace d9m
