// JSON text from values that may hold anything a store can hold: invalid UTF-8 (a corrupted or
// hostile file) is written as U+FFFD instead of throwing. On valid UTF-8 the output is
// byte-identical to a plain dump, so content-addressed ids and chain links do not change.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace d9m {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace d9m
