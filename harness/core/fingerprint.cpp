#include "harness/core/fingerprint.h"
#include "harness/core/json_text.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <sqlite3.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "harness/core/cuda_versions.h"
#include "harness/core/digest.h"
#include "harness/git_info.h"

namespace d9m {

using nlohmann::json;

const std::vector<std::string>& determinism_env_vars() {
  static const std::vector<std::string> vars = {
      "CUBLAS_WORKSPACE_CONFIG", "CUDA_LAUNCH_BLOCKING",  "CUDA_MODULE_LOADING", "CUDNN_DETERMINISTIC",
      "MKL_CBWR",                "MKL_NUM_THREADS",       "NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS",
      "TF_CUDNN_DETERMINISTIC",  "TF_DETERMINISTIC_OPS",  "XLA_FLAGS"};
  return vars;
}

std::string d9m_version() { return D9M_VERSION; }
std::string d9m_commit() { return D9M_GIT_COMMIT; }

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Processor", 0) == 0 || line.rfind("CPU part", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) {
        auto v = line.substr(p + 1);
        v.erase(0, v.find_first_not_of(' '));
        return v;
      }
    }
  }
  return "unknown";
}

std::string os_name() {
  std::ifstream in("/etc/os-release");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      auto v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  }
  return "unknown";
}

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "g++ " __VERSION__;
#else
  return "unknown";
#endif
}

// ---- GPU probe through the driver API, without linking it ---------------------------------

using CUresult = int;
using CUdevice = int;
struct CUuuid {
  unsigned char bytes[16];
};

struct Library {
  void* handle = nullptr;
  explicit Library(const char* name) : handle(dlopen(name, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle) dlclose(handle);
  }
  template <class F> F sym(const char* name) const {
    return handle ? reinterpret_cast<F>(dlsym(handle, name)) : nullptr;
  }
};

std::string uuid_string(const CUuuid& u) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += hex[u.bytes[i] >> 4];
    s += hex[u.bytes[i] & 15];
  }
  return s;
}

json mig_modes(unsigned count) {
  json modes = json::array();
  Library nvml("libnvidia-ml.so.1");
  auto init = nvml.sym<int (*)()>("nvmlInit_v2");
  auto by_index = nvml.sym<int (*)(unsigned, void**)>("nvmlDeviceGetHandleByIndex_v2");
  auto mig = nvml.sym<int (*)(void*, unsigned*, unsigned*)>("nvmlDeviceGetMigMode");
  auto shutdown = nvml.sym<int (*)()>("nvmlShutdown");
  if (!init || !by_index || !shutdown || init() != 0) return modes;
  for (unsigned i = 0; i < count; ++i) {
    void* dev = nullptr;
    unsigned current = 0, pending = 0;
    if (by_index(i, &dev) == 0 && mig && mig(dev, &current, &pending) == 0)
      modes.push_back(current ? "enabled" : "disabled");
    else
      modes.push_back("unsupported");
  }
  shutdown();
  return modes;
}

}  // namespace

GpuProbe probe_gpus() {
  GpuProbe p;
  Library cuda("libcuda.so.1");
  if (!cuda.handle) {
    p.status = "no device: libcuda.so.1 not found (no NVIDIA driver)";
    return p;
  }
  auto cu_init = cuda.sym<CUresult (*)(unsigned)>("cuInit");
  auto driver_version = cuda.sym<CUresult (*)(int*)>("cuDriverGetVersion");
  auto count = cuda.sym<CUresult (*)(int*)>("cuDeviceGetCount");
  auto get = cuda.sym<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
  auto name = cuda.sym<CUresult (*)(char*, int, CUdevice)>("cuDeviceGetName");
  auto attr = cuda.sym<CUresult (*)(int*, int, CUdevice)>("cuDeviceGetAttribute");
  auto total_mem = cuda.sym<CUresult (*)(std::size_t*, CUdevice)>("cuDeviceTotalMem_v2");
  auto uuid = cuda.sym<CUresult (*)(CUuuid*, CUdevice)>("cuDeviceGetUuid_v2");
  if (!cu_init || !driver_version || !count || !get || !name || !attr || !total_mem) {
    p.status = "no device: libcuda.so.1 lacks the driver API entry points";
    return p;
  }
  if (CUresult r = cu_init(0); r != 0) {
    p.status = "no device: cuInit failed with CUresult " + std::to_string(r);
    return p;
  }
  int n = 0, version = 0;
  driver_version(&version);
  if (count(&n) != 0 || n == 0) {
    p.status = "no device: the driver reports no CUDA device";
    return p;
  }
  p.driver = {{"cuda_driver_api", std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10)}};
  {
    Library nvml("libnvidia-ml.so.1");
    auto init = nvml.sym<int (*)()>("nvmlInit_v2");
    auto sys_version = nvml.sym<int (*)(char*, unsigned)>("nvmlSystemGetDriverVersion");
    auto shutdown = nvml.sym<int (*)()>("nvmlShutdown");
    char buf[96] = {};
    if (init && sys_version && shutdown && init() == 0) {
      if (sys_version(buf, sizeof buf) == 0) p.driver["version"] = buf;
      shutdown();
    }
  }
  const json migs = mig_modes(static_cast<unsigned>(n));
  for (int i = 0; i < n; ++i) {
    CUdevice dev = 0;
    if (get(&dev, i) != 0) continue;
    char nm[256] = {};
    name(nm, sizeof nm - 1, dev);
    int major = 0, minor = 0, sms = 0, ecc = 0;
    attr(&major, 75, dev);
    attr(&minor, 76, dev);
    attr(&sms, 16, dev);
    attr(&ecc, 32, dev);
    std::size_t mem = 0;
    total_mem(&mem, dev);
    p.devices.push_back({{"name", nm},
                         {"compute_capability", std::to_string(major) + "." + std::to_string(minor)},
                         {"sm_count", sms},
                         {"memory_bytes", mem},
                         {"ecc", ecc ? "enabled" : "disabled"},
                         {"mig", i < static_cast<int>(migs.size()) ? migs[static_cast<std::size_t>(i)] : json("unknown")}});
    CUuuid u{};
    p.uuids.push_back(uuid && uuid(&u, dev) == 0 ? uuid_string(u) : "unknown");
  }
  p.status = "ok";
  return p;
}

Fingerprint fingerprint_from_json(const json& j) { return {j, sha256_hex(json_text(j))}; }

Fingerprint collect_fingerprint(const GpuProbe& gpus, const LibraryVersionCache* cache) {
  utsname u{};
  uname(&u);
  json env = json::object();
  for (const auto& v : determinism_env_vars()) {
    const char* value = std::getenv(v.c_str());
    env[v] = value ? json(value) : json(nullptr);
  }
  json j = {
      {"schema", "d9m.fingerprint/1"},
      {"host",
       {{"cpu_model", cpu_model()},
        {"cpu_threads", std::thread::hardware_concurrency()},
        {"arch", u.machine},
        {"os", os_name()},
        {"kernel", std::string(u.sysname) + " " + u.release},
        {"glibc", gnu_get_libc_version()}}},
      {"build",
       {{"compiler", compiler()},
        {"cxx_flags", D9M_CXX_FLAGS},
        {"fp_flags", D9M_FP_FLAGS},
        {"build_type", D9M_BUILD_TYPE},
        {"cuda_built", D9M_CUDA_BUILT != 0}}},
      {"libraries",
       {{"sqlite", sqlite3_libversion()},
        {"xxhash", std::to_string(XXH_versionNumber() / 10000) + "." +
                       std::to_string(XXH_versionNumber() / 100 % 100) + "." + std::to_string(XXH_versionNumber() % 100)}}},
      {"environment", env},
      {"d9m", {{"version", d9m_version()}, {"commit", d9m_commit()}}},
      {"cuda", cuda_library_versions(cache)},
      {"gpus", gpus.devices},
      {"gpu_driver", gpus.driver},
  };
  return fingerprint_from_json(j);
}

}  // namespace d9m
