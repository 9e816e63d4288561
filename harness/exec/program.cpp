#include "harness/exec/program.h"

#include <cmath>
#include <csignal>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/files.h"
#include "harness/exec/child_wait.h"
#include "harness/core/fingerprint.h"
#include "harness/core/json_text.h"
#include "harness/exec/executor.h"

namespace d9m {

namespace {

using nlohmann::json;

std::string base_name(const std::string& p) {
  const auto slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string command_text(const std::vector<std::string>& cmd) {
  std::string out;
  for (const auto& a : cmd) out += (out.empty() ? "" : " ") + a;
  return out;
}

// A tensor of an output file: where its bytes are and what they are.
struct Tensor {
  std::string name, dtype, shape;
  std::size_t offset = 0, bytes = 0, itemsize = 1;
  std::optional<DType> d9m_dtype;  // when d9m knows the type (ULP distances)
};

std::optional<DType> dtype_of_code(const std::string& code) {
  if (code == "f4" || code == "F32") return DType::f32;
  if (code == "f2" || code == "F16") return DType::f16;
  if (code == "f8" || code == "F64") return DType::f64;
  if (code == "i4" || code == "I32") return DType::i32;
  if (code == "BF16") return DType::bf16;
  return std::nullopt;
}

std::size_t itemsize_of(const std::string& st_dtype) {
  static const std::map<std::string, std::size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1}, {"U8", 1},
      {"U16", 2}, {"U32", 4}, {"U64", 8}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  const auto it = sizes.find(st_dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);  // (appended, not concatenated: g++ 12 warned of a bound it imagined)
  }
  return out + "]";
}

// .npy (format 1.0-3.0): the header's descr and shape; C order only, little-endian or bytes.
Tensor npy_tensor(const std::string& file, const std::string& data) {
  auto bad = [&](const std::string& why) { fail_usage(file + ": not a .npy file d9m reads: " + why); };
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) bad("no \\x93NUMPY magic");
  const int major = static_cast<unsigned char>(data[6]);
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(data[8]) | static_cast<std::size_t>(static_cast<unsigned char>(data[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) bad("truncated header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(data[8 + i])) << (8 * i);
    start = 12;
  } else {
    bad("format version " + std::to_string(major));
  }
  if (start + header_len > data.size()) bad("the header runs past the end of the file");
  const std::string h = data.substr(start, header_len);
  auto value_of = [&](const std::string& key) {
    const auto k = h.find("'" + key + "'");
    if (k == std::string::npos) bad("no '" + key + "' in the header");
    const auto colon = h.find(':', k);
    if (colon == std::string::npos) bad("no value for '" + key + "'");
    return h.substr(colon + 1);
  };
  std::string descr = value_of("descr");
  const auto q1 = descr.find('\'');
  const auto q2 = q1 == std::string::npos ? q1 : descr.find('\'', q1 + 1);
  if (q2 == std::string::npos) bad("descr is not a string");
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  if (value_of("fortran_order").find("True") < value_of("fortran_order").find(',')) bad("Fortran order");
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|')) bad("descr " + descr + " (little-endian or single-byte types only)");
  std::string shape_part = value_of("shape");
  const auto open = shape_part.find('('), close = shape_part.find(')');
  if (open == std::string::npos || close == std::string::npos || close < open) bad("shape is not a tuple");
  std::vector<std::int64_t> shape;
  std::size_t n = 1;
  std::string digits;
  for (char c : shape_part.substr(open + 1, close - open - 1) + ",") {
    if (c >= '0' && c <= '9') {
      digits += c;
      if (digits.size() > 12) bad("a dimension is too large");
    } else if (c == ',' && !digits.empty()) {
      shape.push_back(std::stoll(digits));
      // (found by audit: a shape whose product wrapped past 2^64 matched 8 bytes of data)
      if (__builtin_mul_overflow(n, static_cast<std::size_t>(shape.back()), &n)) bad("its shape's element count overflows");
      digits.clear();
    } else if (c != ' ' && c != ',' && c != 'L') {
      bad("shape is not a tuple of integers");
    }
  }
  Tensor t;
  t.dtype = descr.substr(1);
  t.itemsize = static_cast<std::size_t>(std::atoi(descr.c_str() + 2));
  if (t.itemsize == 0 || t.itemsize > 16) bad("descr " + descr);
  t.shape = shape_text(shape);
  t.offset = start + header_len;
  if (__builtin_mul_overflow(n, t.itemsize, &t.bytes)) bad("its shape's byte count overflows");
  t.d9m_dtype = dtype_of_code(t.dtype);
  if (t.offset + t.bytes != data.size())
    bad("its data is " + std::to_string(data.size() - t.offset) + " bytes, the header says " + std::to_string(t.bytes));
  return t;
}

// .safetensors: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range.
std::vector<Tensor> safetensors_tensors(const std::string& file, const std::string& data) {
  auto bad = [&](const std::string& why) { fail_usage(file + ": not a .safetensors file d9m reads: " + why); };
  if (data.size() < 8) bad("shorter than its header length");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(data[i])) << (8 * i);
  if (n > data.size() - 8) bad("the header runs past the end of the file");
  json header;
  try {
    header = parse_json_input(data.substr(8, n), file + " (header)");
  } catch (const Error& e) {
    bad(e.what());
  }
  if (!header.is_object()) bad("the header is not a JSON object");
  std::vector<Tensor> out;
  const std::size_t base = 8 + n;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("data_offsets") ||
        !v["data_offsets"].is_array() || v["data_offsets"].size() != 2 || !v["data_offsets"][0].is_number_unsigned() ||
        !v["data_offsets"][1].is_number_unsigned())
      bad("tensor \"" + name + "\" needs a dtype and two data_offsets");
    Tensor t;
    t.name = name;
    t.dtype = v["dtype"].get<std::string>();
    t.itemsize = itemsize_of(t.dtype);
    if (!t.itemsize) bad("tensor \"" + name + "\" has dtype " + t.dtype);
    // The shape is what the reports show: it must say what the bytes are (found by audit: it was
    // never checked against the data_offsets).
    std::vector<std::int64_t> shape;
    if (!v.contains("shape") || !v["shape"].is_array()) bad("tensor \"" + name + "\" needs a shape (a list of sizes)");
    std::size_t elements = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned() || __builtin_mul_overflow(elements, d.get<std::uint64_t>(), &elements))
        bad("tensor \"" + name + "\"'s shape is not a list of sizes whose product fits 64 bits");
      shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
    }
    t.shape = shape_text(shape);
    const auto b = v["data_offsets"][0].get<std::uint64_t>(), e = v["data_offsets"][1].get<std::uint64_t>();
    if (b > e || e > data.size() - base) bad("tensor \"" + name + "\"'s data_offsets lie outside the file");
    if (std::size_t want = 0; __builtin_mul_overflow(elements, t.itemsize, &want) || want != e - b)
      bad("tensor \"" + name + "\" holds " + std::to_string(e - b) + " bytes, its shape and dtype say " +
          std::to_string(elements) + " x " + std::to_string(t.itemsize));
    t.offset = base + b;
    t.bytes = e - b;
    t.d9m_dtype = dtype_of_code(t.dtype);
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<Tensor> tensors_of(const std::string& file, const std::string& data) {
  if (ends_with(file, ".npy")) return {npy_tensor(file, data)};
  if (ends_with(file, ".safetensors")) return safetensors_tensors(file, data);
  Tensor raw;
  raw.dtype = "uint8";
  raw.shape = shape_text({static_cast<std::int64_t>(data.size())});
  raw.bytes = data.size();
  return {raw};
}

// Elements whose bytes differ; ULPs and |a-b| where d9m knows the type.
DiffStats diff_bytes(const Tensor& t, const char* a, const char* b) {
  if (t.d9m_dtype && t.bytes % dtype_size(*t.d9m_dtype) == 0)
    return diff_outputs(*t.d9m_dtype, a, b, static_cast<std::int64_t>(t.bytes / dtype_size(*t.d9m_dtype)));
  // Any other type of up to 8 bytes as the little-endian integer it is (raw files as bytes), the
  // distance of two integers being both their |a-b| and their ULPs: found by audit, raw bytes
  // that differed by up to 6 were stored as differing by 0. Signed where the type says so (numpy
  // 'i', safetensors 'I'); a wider type (complex) counts its elements only.
  DiffStats d;
  d.first_index = -1;
  const bool is_signed = !t.dtype.empty() && (t.dtype[0] == 'i' || t.dtype[0] == 'I');
  const auto value = [&](const char* p) {
    std::uint64_t u = 0;
    std::memcpy(&u, p, t.itemsize);  // little-endian (the formats' own, and this machine's)
    if (is_signed && t.itemsize < 8 && (u >> (8 * t.itemsize - 1) & 1)) u |= ~std::uint64_t{0} << (8 * t.itemsize);
    return u;
  };
  for (std::size_t i = 0; i < t.bytes / t.itemsize; ++i) {
    const char* x = a + i * t.itemsize;
    const char* y = b + i * t.itemsize;
    if (std::memcmp(x, y, t.itemsize) == 0) continue;
    if (d.count++ == 0) d.first_index = static_cast<std::int64_t>(i);
    if (t.itemsize > 8) continue;
    const std::uint64_t u = value(x), v = value(y);
    const bool less = is_signed ? static_cast<std::int64_t>(u) < static_cast<std::int64_t>(v) : u < v;
    const std::uint64_t dist = less ? v - u : u - v;  // modulo 2^64: exact for every pair
    d.max_abs = std::max(d.max_abs, static_cast<double>(dist));
    d.max_ulp = std::max(d.max_ulp, static_cast<std::int64_t>(std::min<std::uint64_t>(dist, INT64_MAX)));
  }
  return d;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// libd9m_device_digest.so of this build (bindings/, beside harness/ where the d9m binary is, in a
// build tree and in a ci/gpu-bundle.sh bundle alike), or "" where it has none: the PyTorch hook
// digests CUDA tensors on the GPU with it ($D9M_DEVICE_DIGEST_LIBRARY).
std::string device_digest_library() {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  std::string dir(exe, static_cast<std::size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& candidate : {dir + "/../bindings/libd9m_device_digest.so", dir + "/libd9m_device_digest.so"})
    if (::access(candidate.c_str(), R_OK) == 0) return candidate;
  return "";
}

// Runs the command once; Error(usage) when it does not exit 0.
// The trial running now, for a signal that ends d9m (found by audit: a SIGTERM to d9m left the
// program running, and its trace file behind): its process group is killed and the file removed,
// then d9m ends as the signal says. Only async-signal-safe calls.
volatile sig_atomic_t g_trial_group = 0;
char g_trace_file[64] = "";
extern "C" void end_trial_on_signal(int sig) {
  if (g_trial_group > 0) ::kill(-static_cast<pid_t>(g_trial_group), SIGKILL);
  if (g_trace_file[0]) ::unlink(g_trace_file);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// What every trial reads on its standard input: the same bytes, or none (found by review: the
// trials inherited d9m's stdin, so with `< input` or a pipe the first trial read it all and the
// later ones read nothing, a difference d9m then reported as the program's; from a terminal, a
// trial in its own process group was stopped by SIGTTIN). A regular file is read by every trial
// from where it stood when d9m started; anything else (a terminal, a pipe, a socket) cannot be
// replayed, and every trial reads /dev/null instead.
struct TrialStdin {
  bool replay = false;  // stdin is a regular file: seek back to `offset` in each trial
  off_t offset = 0;
};
TrialStdin trial_stdin() {
  TrialStdin in;
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
    const off_t at = ::lseek(STDIN_FILENO, 0, SEEK_CUR);
    if (at >= 0) in = {true, at};
  }
  return in;
}

void run_once(const std::vector<std::string>& cmd, std::int64_t trial, const std::string& trace_path, double timeout_s) {
  static const std::string digest_library = device_digest_library();  // found before any fork
  static const TrialStdin input = trial_stdin();                       // as d9m found it, before any trial read it
  const pid_t pid = ::fork();
  if (pid < 0) fail_environment(std::string("cannot start a process: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);  // a group of its own, which a timeout or d9m's end kills whole (its children too)
    if (input.replay) {
      if (::lseek(STDIN_FILENO, input.offset, SEEK_SET) != input.offset) {
        std::fprintf(stderr, "d9m: exec: cannot rewind standard input for trial %lld: %s\n", static_cast<long long>(trial),
                     std::strerror(errno));
        std::_Exit(127);
      }
    } else {
      // Not close-on-exec: where d9m's own stdin was closed, open() returns 0 itself, which must
      // stay open across exec (found by review: with O_CLOEXEC the trial had no stdin at all).
      const int null = ::open("/dev/null", O_RDONLY);
      if (null < 0 || (null != STDIN_FILENO && ::dup2(null, STDIN_FILENO) < 0)) {
        std::fprintf(stderr, "d9m: exec: cannot open /dev/null as standard input: %s\n", std::strerror(errno));
        std::_Exit(127);
      }
      if (null != STDIN_FILENO) ::close(null);
    }
    ::setenv("D9M_TRIAL", std::to_string(trial).c_str(), 1);
    ::setenv("D9M_TRACE", trace_path.c_str(), 1);
    if (!digest_library.empty()) ::setenv("D9M_DEVICE_DIGEST_LIBRARY", digest_library.c_str(), 0);  // the caller's wins
    std::vector<char*> argv;
    for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "d9m: exec: cannot run %s: %s\n", cmd[0].c_str(), std::strerror(errno));
    std::_Exit(127);
  }
  ::setpgid(pid, pid);  // (also here: whichever runs first)
  g_trial_group = pid;
  int status = 0;
  const std::string what = "trial " + std::to_string(trial) + ": `" + command_text(cmd) + "` ";
  if (timeout_s > 0) {
    const auto limit = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(timeout_s * 1000)));
    if (!wait_child_for(pid, status, limit)) {
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      g_trial_group = 0;
      fail_usage(what + "did not end within " + json(timeout_s).dump() + " s (--timeout); it was killed, with its process "
                 "group, and nothing was stored");
    }
  } else {
    while (::waitpid(pid, &status, 0) < 0)
      if (errno != EINTR) fail_environment(std::string("waiting for the program: ") + std::strerror(errno));
  }
  g_trial_group = 0;
  if (WIFSIGNALED(status)) fail_usage(what + "was killed by signal " + std::to_string(WTERMSIG(status)) + "; nothing was stored");
  if (WEXITSTATUS(status) == 127) fail_usage(what + "could not be started (exit 127); nothing was stored");
  if (WEXITSTATUS(status) != 0) fail_usage(what + "exited with status " + std::to_string(WEXITSTATUS(status)) + "; nothing was stored");
}

std::vector<std::string> expand(const std::vector<std::string>& globs, std::int64_t trial) {
  std::vector<std::string> files;
  for (const auto& g : globs) {
    glob_t gl{};
    const int rc = ::glob(g.c_str(), 0, nullptr, &gl);
    if (rc == GLOB_NOMATCH || gl.gl_pathc == 0) {
      ::globfree(&gl);
      fail_usage("trial " + std::to_string(trial) + ": --outputs '" + g + "' matched no file; nothing was stored");
    }
    for (std::size_t i = 0; i < gl.gl_pathc; ++i) files.emplace_back(gl.gl_pathv[i]);
    ::globfree(&gl);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

// The trace the hook wrote: one JSON object per line (bindings/python/d9m_torch).
std::vector<TraceRecord> read_trace(const std::string& path, std::int64_t trial) {
  std::vector<TraceRecord> rows;
  const std::string text = read_input_file(path, "trace");
  std::size_t line_no = 0, at = 0;
  while (at < text.size()) {
    const auto end = text.find('\n', at);
    const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    ++line_no;
    if (line.empty()) continue;
    const std::string where = "trial " + std::to_string(trial) + "'s trace, line " + std::to_string(line_no);
    const json j = parse_json_input(line, where);
    auto bad = [&](const std::string& why) { fail_usage(where + ": " + why + "; nothing was stored"); };
    if (!j.is_object()) bad("expected an object");
    // Names go into reports and terminals: no control characters (found by audit: a NUL went
    // raw into `trace diff --format md`). Numbers are stored as SQLite's signed 64-bit integers
    // (found by audit: a step of 2^63 failed the store's CHECK after the run had begun).
    auto str = [&](const char* k) {
      if (!j.contains(k) || !j[k].is_string()) bad(std::string("expected a string \"") + k + "\"");
      const std::string v = j[k].get<std::string>();
      if (std::any_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
        bad(std::string("\"") + k + "\" holds a control character");
      return v;
    };
    auto num = [&](const char* k) {
      if (!j.contains(k) || !j[k].is_number_unsigned() || j[k].get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        bad(std::string("expected a non-negative integer \"") + k + "\" below 2^63");
      return static_cast<std::int64_t>(j[k].get<std::uint64_t>());
    };
    auto hex = [&](const std::string& d) {
      if (d.size() != 32 || !std::all_of(d.begin(), d.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
        bad("a digest is 32 lowercase hex digits, got \"" + d.substr(0, 40) + "\"");
      return d;
    };
    TraceRecord r{trial, num("step"), num("position"), str("name"), str("op"), str("variant"), "", hex(str("digest")), std::nullopt};
    if (!j.contains("inputs") || !j["inputs"].is_array()) bad("expected an array \"inputs\"");
    json inputs = json::array();
    for (const auto& d : j["inputs"]) {
      if (!d.is_string()) bad("inputs holds digests");
      inputs.push_back(hex(d.get<std::string>()));
    }
    r.inputs = json_text(inputs);
    if (!rows.empty() && std::tie(r.step, r.position) <= std::tie(rows.back().step, rows.back().position))
      bad("rows must come in increasing (step, position) order");
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string trajectory(const std::vector<TraceRecord>& rows) {
  std::string all;
  for (const auto& r : rows) all += r.digest + "\n";
  return digest_v1(all.data(), all.size()).hex();
}

}  // namespace

std::string program_name(const std::vector<std::string>& command) {
  std::string name = command.empty() ? "program" : base_name(command[0]);
  static const std::set<std::string> interpreters = {"python", "python3", "bash", "sh", "perl", "ruby", "node"};
  if (command.size() > 1 && (interpreters.count(name) || name.rfind("python3.", 0) == 0) && command[1][0] != '-')
    name = base_name(command[1]);
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-')) c = '_';
  if (name.empty() || name[0] == '.') name = "program" + name;
  return name.substr(0, kMaxNameLength);
}

ProgramTrials run_program_trials(const ProgramOptions& opt) {
  if (opt.command.empty()) fail_usage("exec: no command after --");
  // The name becomes the cases' op, exec:NAME, in every report (found by audit: a '|' or a newline
  // in it moved Markdown cells under another stack's column): the rule of config and op names.
  if (!opt.name.empty() && !is_path_safe_name(opt.name))
    fail_usage("exec: --name " + json(opt.name.substr(0, 120)).dump(-1, ' ', false, json::error_handler_t::replace) +
               " must be 1 to " + std::to_string(kMaxNameLength) +
               " of A-Z a-z 0-9 _ . + - and not start with '.'");
  if (opt.trials < 2) fail_usage("exec: -n must be at least 2: determinism needs a second trial to compare with");
  ProgramTrials out;
  const std::string command_json = json_text(json(opt.command));
  out.input_digest = digest_v1(command_json.data(), command_json.size()).hex();
  char trace_template[] = "/tmp/d9m-trace-XXXXXX";
  const int fd = ::mkstemp(trace_template);
  if (fd < 0) fail_environment(std::string("cannot make a temporary trace file: ") + std::strerror(errno));
  ::close(fd);
  const std::string trace_path = trace_template;
  std::snprintf(g_trace_file, sizeof g_trace_file, "%s", trace_template);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, end_trial_on_signal);
  struct Remove {
    std::string p;
    ~Remove() {
      g_trace_file[0] = '\0';
      std::remove(p.c_str());
    }
  } cleanup{trace_path};

  std::vector<std::string> names;                         // outputs as trial 0 had them
  std::map<std::string, std::string> first_bytes;         // trial 0's file contents
  std::map<std::string, Tensor> first_tensors;            // and their tensors, by output name (parsed once)
  std::optional<std::vector<TraceRecord>> first_trace;
  // A file the trial wrote has a modification time after the trial started, less the file system's
  // clock tick (its times come from a coarse clock, a tick of up to 10 ms behind): kFreshSlack.
  // The trials are kept more than that apart, so a file written by an earlier trial, or before the
  // first, is older than that and refused, whether the program left it in place or moved it there
  // (found by review: a program that wrote its output only when absent, or moved a cached copy into
  // place, gave D, its predecessor's file within the 10 ms allowed). d9m changes no file's bytes or
  // times.
  constexpr std::int64_t kFreshSlack = 20000000;
  std::int64_t previous_end = 0;
  for (std::int64_t trial = 0; trial < opt.trials; ++trial) {
    std::remove(trace_path.c_str());
    if (const std::int64_t wait = previous_end + kFreshSlack + 1000000 - now_ns(); trial > 0 && wait > 0)
      std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
    const std::int64_t start = now_ns();
    run_once(opt.command, trial, trace_path, opt.timeout_s);
    previous_end = now_ns();
    out.elapsed_ns.push_back(previous_end - start);
    std::size_t k = 0;
    for (const std::string& file : expand(opt.outputs, trial)) {
      struct stat st {};
      if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        fail_usage("trial " + std::to_string(trial) + ": output " + file + " is not a regular file; nothing was stored");
      const std::int64_t mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      if (mtime < start - kFreshSlack)
        fail_usage("trial " + std::to_string(trial) + ": output " + file +
                   " was not written by this trial (modified before it started); nothing was stored");
      // Nor one whose time is after the trial ended (found by audit: a stale output touched into
      // the future passed every trial's lower bound and gave D). File times trail the clock, never
      // lead it; a file system whose clock leads this machine's (a network one) is refused too.
      if (mtime > previous_end + kFreshSlack)
        fail_usage("trial " + std::to_string(trial) + ": output " + file +
                   " was not written by this trial (modified after it ended: a time in the future, set by hand or by "
                   "a file system whose clock is ahead of this machine's); nothing was stored");
      const std::string data = read_input_file(file, "output", std::size_t{1} << 34);
      if (trial == 0) first_bytes[file] = data;
      else if (!first_bytes.count(file))
        fail_usage("trial " + std::to_string(trial) + ": output " + file + " was not there in trial 0; nothing was stored");
      for (const Tensor& t : tensors_of(file, data)) {
        const std::string name = t.name.empty() ? file : file + ":" + t.name;
        if (trial == 0) {
          names.push_back(name);
          first_tensors[name] = t;
          out.outputs.push_back({name, t.dtype, t.shape, {}, {}});
        } else if (k >= names.size() || names[k] != name) {
          fail_usage("trial " + std::to_string(trial) + ": its outputs (" + name + ") are not trial 0's; nothing was stored");
        } else if (const Tensor& same = first_tensors.at(name);
                   (ends_with(file, ".npy") || ends_with(file, ".safetensors")) && (t.dtype != same.dtype || t.shape != same.shape)) {
          // Only a tensor's data bytes are digested, so a header that changes would pass unseen
          // with the same bytes (found by review: <f4 (4,) then <i4 (2,2) gave D). A raw file's
          // size is its shape, and differs as its bytes do.
          fail_usage("trial " + std::to_string(trial) + ": output " + name + " is " + t.dtype + " " + t.shape + ", trial 0's was " +
                     same.dtype + " " + same.shape + "; nothing was stored");
        }
        ProgramOutput& o = out.outputs[k++];
        o.digests.push_back(digest_v1(data.data() + t.offset, t.bytes).hex());
        std::optional<DiffStats> diff;
        if (trial > 0 && o.digests.back() != o.digests.front()) {
          const Tensor& same = first_tensors.at(name);
          if (same.bytes != t.bytes) {
            diff = DiffStats{static_cast<std::int64_t>(t.bytes / t.itemsize), 0, 0, 0};  // another size: every element
          } else {
            diff = diff_bytes(t, first_bytes[file].data() + same.offset, data.data() + t.offset);
          }
        }
        o.diffs.push_back(diff);
      }
    }
    if (k != out.outputs.size())
      fail_usage("trial " + std::to_string(trial) + ": wrote " + std::to_string(k) + " outputs, trial 0 wrote " +
                 std::to_string(out.outputs.size()) + "; nothing was stored");
    struct stat st {};
    const bool traced = ::stat(trace_path.c_str(), &st) == 0 && st.st_size > 0;
    if (trial > 0 && traced != out.trace.has_value())
      fail_usage("trial " + std::to_string(trial) + (traced ? " wrote a trace and trial 0 did not" : " wrote no trace and trial 0 did") +
                 "; nothing was stored");
    if (traced) {
      std::vector<TraceRecord> rows = read_trace(trace_path, trial);
      if (!out.trace) out.trace.emplace();
      ProgramTrace& tr = *out.trace;
      tr.digests.push_back(trajectory(rows));
      std::optional<DiffStats> diff;
      if (trial == 0) {
        first_trace = rows;
      } else if (tr.digests.back() != tr.digests.front()) {
        // The trace's elements are its op outputs: how many differ from trial 0's, and the first.
        DiffStats d;
        d.first_index = -1;
        const std::size_t n = std::max(rows.size(), first_trace->size());
        for (std::size_t i = 0; i < n; ++i)
          if (i >= rows.size() || i >= first_trace->size() || rows[i].digest != (*first_trace)[i].digest)
            if (d.count++ == 0) d.first_index = static_cast<std::int64_t>(i);
        diff = d;
      }
      tr.diffs.push_back(diff);
      for (auto& r : rows) tr.rows.push_back(std::move(r));
    }
  }
  if (out.outputs.empty() && !out.trace)
    fail_usage("exec: the program wrote neither a declared output (--outputs) nor a trace (the PyTorch hook): nothing to compare");
  return out;
}

std::string store_program(const ProgramOptions& opt, const ProgramTrials& t, Store& store) {
  const std::string name = opt.name.empty() ? program_name(opt.command) : opt.name;
  const GpuProbe gpus = probe_gpus();
  const LibraryVersionCache library_versions = store.library_version_cache();
  const Fingerprint fp = collect_fingerprint(gpus, &library_versions);
  RunInfo info;
  info.id = random_run_id();
  info.started_at = utc_now();
  info.host = host_name();
  info.gpu_uuids = json_text(json(gpus.uuids));
  info.arguments = opt.arguments_json;
  const json plan = {{"exec", opt.command}, {"outputs", opt.outputs}, {"trials", opt.trials}};
  info.catalog_digest = sha256_hex(json_text(plan));
  info.trials_per_case = opt.trials;
  info.threads = 1;
  info.plan_digest = info.catalog_digest;
  const std::string run = store.begin_run(fp, info);

  auto put = [&](const std::string& config, const std::string& dtype, const std::string& shape, const std::vector<std::string>& digests,
                 const std::vector<std::optional<DiffStats>>& diffs, const std::vector<TraceRecord>& trace, const std::string& what) {
    CaseRecord c;
    c.op = "exec:" + name;
    c.variant = "process";
    c.backend = "cpu";
    c.config = config;
    c.config_id = sha256_hex(json_text(json{{"exec", opt.command}, {"output", config}})).substr(0, 16);
    c.params = json_text(json{{"command", opt.command}});
    c.input_digest = t.input_digest;
    c.output_dtype = dtype;
    c.output_shape = shape;
    c.id = Store::case_id(c);
    CaseRunRecord cr;
    cr.claim_determinism = "unknown";
    cr.claim_source = "design";
    cr.claim_reason = "a program's " + what + ", run by d9m exec in a fresh process per trial: d9m makes no claim";
    cr.role = to_string(Role::program);
    std::vector<TrialRecord> trials;
    for (std::size_t i = 0; i < digests.size(); ++i) trials.push_back({static_cast<std::int64_t>(i), digests[i], t.elapsed_ns[i], diffs[i], ""});
    std::set<std::string> distinct(digests.begin(), digests.end());
    cr.trials = static_cast<std::int64_t>(digests.size());
    cr.distinct = static_cast<std::int64_t>(distinct.size());
    cr.status = distinct.size() == 1 ? Status::deterministic : Status::nondeterministic;
    std::vector<std::int64_t> times = t.elapsed_ns;
    std::sort(times.begin(), times.end());
    cr.min_ns = times.front();
    cr.median_ns = times[times.size() / 2];
    store.put_case(run, c, cr, trials, trace);
  };
  for (const ProgramOutput& o : t.outputs) put(o.name, o.dtype, o.shape, o.digests, o.diffs, {}, "output");
  if (t.trace) {
    const auto rows0 = std::count_if(t.trace->rows.begin(), t.trace->rows.end(), [](const TraceRecord& r) { return r.trial == 0; });
    put("trace", "trace", shape_text({rows0}), t.trace->digests, t.trace->diffs, t.trace->rows, "traced ops (their output digests)");
  }
  store.finish_run(run, "complete");
  return run;
}

}  // namespace d9m
