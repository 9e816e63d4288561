// Text compiled into the binary (generated from files by cmake/EmbedText.cmake).
#pragma once
#include <string>

namespace d9m::embedded {

const std::string& default_catalog_json();  // suites/catalog/default.json
const std::string& models_catalog_json();   // suites/catalog/models.json
const std::string& quick_catalog_json();    // made from default.json at build time (core/quick_profile.h)
const std::string& store_schema_sql();      // harness/store_schema.sql

}  // namespace d9m::embedded
