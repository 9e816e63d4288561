#include "harness/core/quick_profile.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace d9m {

std::string quick_catalog_text(const std::string& default_text) {
  using nlohmann::json;
  json root = json::parse(default_text);
  if (!root.is_object() || !root.contains("configs") || !root["configs"].is_array())
    throw std::runtime_error("the default catalogue has no \"configs\" array");
  const auto marked = [](const json& entry) { return entry.is_object() && entry.contains("quick") && entry["quick"] == true; };
  json picked = json::array();
  for (const json& c : root["configs"])
    if (marked(c)) picked.push_back(c);
  if (picked.empty()) throw std::runtime_error("no config of the default catalogue is marked \"quick\"");
  root["configs"] = std::move(picked);
  if (root.contains("pipelines") && root["pipelines"].is_array()) {
    json pipelines = json::array();
    for (const json& p : root["pipelines"])
      if (marked(p)) pipelines.push_back(p);
    if (pipelines.empty()) root.erase("pipelines");
    else root["pipelines"] = std::move(pipelines);
  }
  root["description"] = "The quick profile: the configs and pipelines of the default catalogue marked \"quick\".";
  return root.dump(1);
}

}  // namespace d9m
