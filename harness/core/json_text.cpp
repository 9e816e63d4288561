#include "harness/core/json_text.h"

#include <optional>

#include "harness/core/error.h"

namespace d9m {

namespace {

// "LINE:COLUMN" of a byte offset, both from 1.
std::string position_of(const std::string& text, std::size_t byte) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// The offset of the bracket that nests one level deeper than kMaxJsonDepth, if any. Brackets
// inside strings do not count; whatever else is malformed is left to the parser.
std::optional<std::size_t> too_deep_at(const std::string& text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

// Refuses nesting deeper than kMaxJsonDepth before the parser builds it, naming the bracket that
// goes one level too deep.
void check_depth(const std::string& text, const std::string& source) {
  if (const auto at = too_deep_at(text))
    fail_usage(source + ":" + position_of(text, *at) + ": nested more than " + std::to_string(kMaxJsonDepth) +
               " levels deep (arrays and objects)");
}

}  // namespace

nlohmann::json parse_json_input(const std::string& text, const std::string& source) {
  // nlohmann's parser takes a NUL byte for the end of the text: whatever followed one (the rest
  // of a catalogue) was silently ignored. JSON has no place for a raw NUL.
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    fail_usage(source + ":" + position_of(text, nul) + ": a NUL byte; JSON text has none (a binary file, or one cut and padded?)");
  check_depth(text, source);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann reports the byte just past the offending token; the message after its prefix
    // says what was expected.
    std::string what = e.what();
    if (auto p = what.find(": syntax error"); p != std::string::npos) what = what.substr(p + 2);
    fail_usage(source + ":" + position_of(text, e.byte == 0 ? 0 : e.byte - 1) + ": " + what);
  } catch (const nlohmann::json::exception& e) {
    // Not a syntax error but still unreadable, e.g. a number beyond double range (found by fuzzing).
    std::string what = e.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    fail_usage(source + ": " + what);
  }
}

nlohmann::json parse_stored_json(const std::string& text) {
  if (too_deep_at(text)) return nullptr;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

std::string json_type_name(const nlohmann::json& j) {
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  return std::string(j.is_string() ? "a string" : j.is_boolean() ? "a boolean" : j.is_array() ? "an array" : j.is_object() ? "an object" : "null");
}

void JsonFields::fail(const std::string& path, const std::string& what) const { fail_usage(source_ + ": " + path + ": " + what); }

const nlohmann::json& JsonFields::field(const nlohmann::json& obj, const std::string& path, const char* key) const {
  auto it = obj.find(key);
  if (it == obj.end()) fail(path, std::string("missing required field \"") + key + "\"");
  return *it;
}

std::string JsonFields::string_field(const nlohmann::json& obj, const std::string& path, const char* key) const {
  const nlohmann::json& v = field(obj, path, key);
  if (!v.is_string()) fail(path + "." + key, "expected a string, got " + json_type_name(v));
  return v.get<std::string>();
}

const nlohmann::json& JsonFields::array_field(const nlohmann::json& obj, const std::string& path, const char* key) const {
  const nlohmann::json& v = field(obj, path, key);
  if (!v.is_array()) fail(path + "." + key, "expected an array, got " + json_type_name(v));
  return v;
}

const nlohmann::json& JsonFields::object(const nlohmann::json& v, const std::string& path) const {
  if (!v.is_object()) fail(path, "expected an object, got " + json_type_name(v));
  return v;
}

}  // namespace d9m
