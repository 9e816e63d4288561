// The stack a run executes on (DESIGN.md "Fingerprint"): canonical JSON with sorted keys of
// everything that can change results; its id is the SHA-256 of that JSON. Things that identify
// one machine rather than a stack (host name, device UUIDs) go with the run instead, so that
// identical machines share one stack column.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/library_version.h"

namespace d9m {

struct GpuProbe {
  nlohmann::json devices = nlohmann::json::array();  // fingerprint fields per device
  nlohmann::json driver = nullptr;                   // driver versions, or null
  std::vector<std::string> uuids;                    // per device, for the run record
  std::string status;                                // "ok" or why there is no device
};

// Asks the CUDA driver (and NVML, for MIG) through dlopen, so a build without CUDA still
// records the GPUs of the machine it runs on. Never throws; no driver means no device.
GpuProbe probe_gpus();

struct Fingerprint {
  nlohmann::json json;  // canonical content
  std::string id;       // SHA-256 of json.dump()
  std::string canonical() const { return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
};

// The environment variables that change determinism somewhere in the stack.
const std::vector<std::string>& determinism_env_vars();

// `cache`: where the loaded versions of cuBLAS and cuSPARSE may come from instead of loading them
// (a store's, Store::library_version_cache()); null asks the libraries themselves.
Fingerprint collect_fingerprint(const GpuProbe& gpus, const LibraryVersionCache* cache = nullptr);
Fingerprint fingerprint_from_json(const nlohmann::json& j);

std::string host_name();
std::string d9m_version();
std::string d9m_commit();  // "abc1234" or "abc1234-dirty", "unknown" outside a git checkout

}  // namespace d9m
