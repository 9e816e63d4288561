// JSON text from values that may hold anything a store can hold: invalid UTF-8 (a corrupted or
// hostile file) is written as U+FFFD instead of throwing. On valid UTF-8 the output is
// byte-identical to a plain dump, so content-addressed ids and chain links do not change.
// And JSON documents from outside (catalogues, baselines): parsed with a depth limit, their
// fields read with messages that name the file and the field path.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace d9m {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Deeper than any document d9m reads (a catalogue nests 4 levels) and far from what recursion
// can survive: parsing is iterative, but printing, copying and comparing a value recurse once
// per level, and 100,000 levels overflowed the stack.
inline constexpr int kMaxJsonDepth = 64;

// `text` as JSON, from `source` (a file name, for messages). A syntax error, a number beyond
// double range or nesting deeper than kMaxJsonDepth is Error(usage) "SOURCE:LINE:COLUMN: what".
nlohmann::json parse_json_input(const std::string& text, const std::string& source);

// JSON a store holds (fingerprints, parameters, manifest details), which d9m wrote but anyone may
// have edited: the value, or null when the text is not JSON or nests deeper than kMaxJsonDepth,
// which printing or copying the value could not survive (`d9m verify` names such rows; a report
// must still render). Never throws.
nlohmann::json parse_stored_json(const std::string& text);

// What a value is, for messages: "an integer", "a number", "a string", "an array", ...
std::string json_type_name(const nlohmann::json& j);

// Reads the fields of a parsed document; every failure is Error(usage) "SOURCE: PATH: what",
// PATH being where the value sits ("configs[3].params.h", "(root)" for the document).
class JsonFields {
 public:
  explicit JsonFields(std::string source) : source_(std::move(source)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& what) const;
  // obj[key] (obj is at `path`), which must exist.
  const nlohmann::json& field(const nlohmann::json& obj, const std::string& path, const char* key) const;
  std::string string_field(const nlohmann::json& obj, const std::string& path, const char* key) const;
  // obj[key], an array (empty allowed).
  const nlohmann::json& array_field(const nlohmann::json& obj, const std::string& path, const char* key) const;
  // `v` at `path`, an object.
  const nlohmann::json& object(const nlohmann::json& v, const std::string& path) const;

 private:
  std::string source_;
};

}  // namespace d9m
