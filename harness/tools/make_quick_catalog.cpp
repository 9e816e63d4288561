// Build step: writes the quick profile's catalogue text (core/quick_profile.h) from the default
// catalogue, for cmake/EmbedText.cmake to embed. Usage: make_quick_catalog <default.json> <out.json>.
// The output is rewritten only when it changes, so that what embeds it is not rebuilt for nothing.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>

#include "harness/core/quick_profile.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_quick_catalog <default.json> <out.json>\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "make_quick_catalog: cannot read %s\n", argv[1]);
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string quick;
  try {
    quick = d9m::quick_catalog_text(text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_quick_catalog: %s: %s\n", argv[1], e.what());
    return 1;
  }
  std::ifstream old(argv[2], std::ios::binary);
  if (old && std::string((std::istreambuf_iterator<char>(old)), std::istreambuf_iterator<char>()) == quick) return 0;
  std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
  out << quick;
  out.close();
  if (!out) {
    std::fprintf(stderr, "make_quick_catalog: cannot write %s\n", argv[2]);
    return 1;
  }
  return 0;
}
