// libFuzzer target: the catalogue parser. Any bytes must end in a catalogue or a d9m::Error
// (usage, with a location); anything else (another exception, a crash, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/core/catalog.h"
#include "harness/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    d9m::parse_catalog(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json", d9m::Registry::global());
  } catch (const d9m::Error&) {
  }
  return 0;
}
