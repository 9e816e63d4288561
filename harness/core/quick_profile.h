// The quick profile's catalogue text: the configs and pipelines of the default catalogue marked
// "quick", as a catalogue of its own (its own digest, its own indices). It is made at build time
// (harness/tools/make_quick_catalog.cpp) and embedded, so that `d9m run --profile quick`, and each
// of its worker processes, parse only the quick configs and never the default catalogue's text.
// A unit test holds the embedded text equal to this function's result on the embedded default.
#pragma once
#include <string>

namespace d9m {

// Throws std::runtime_error if `default_text` is not a JSON object with a "configs" array, or
// marks no config "quick". The catalogue's own checks are parse_catalog's.
std::string quick_catalog_text(const std::string& default_text);

}  // namespace d9m
