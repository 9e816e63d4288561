// The torch backend (issue 14 item 5): PyTorch's kernels, run by bindings/python/d9m_torch/worker.py
// in a Python process of their own, on d9m's inputs, digested and compared by d9m as its own
// variants are. The protocol is in worker.py's docstring.
#include "harness/exec/torch_executor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <fstream>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/files.h"
#include "harness/core/json_text.h"
#include "harness/exec/child_wait.h"
#include "harness/exec/watchdog_deadline.h"

extern char** environ;

namespace d9m {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Where d9m_torch is: $D9M_PYTHONPATH, else bindings/python of the checkout this binary was
// built in or carried with (found upward from the executable, so a bundle moved to another
// machine finds its own), else the source tree it was configured from.
std::string bindings_dir() {
  if (const char* e = std::getenv("D9M_PYTHONPATH"); e && *e) return e;
  std::error_code ec;
  fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (int up = 0; !ec && up < 5 && !dir.empty(); ++up, dir = dir.parent_path())
    if (fs::exists(dir / "bindings/python/d9m_torch/worker.py", ec)) return (dir / "bindings/python").string();
  return D9M_BINDINGS_DIR;
}

std::string python() {
  const char* e = std::getenv("D9M_PYTHON");
  return e && *e ? e : "python3";
}

json tensor_json(const TensorDesc& d, const std::string& path) {
  return {{"name", d.name}, {"dtype", std::string(dtype_short_name(d.dtype))}, {"shape", d.shape}, {"path", path}};
}

json params_json(const Problem& p) {
  json j = json::object();
  for (const auto& [name, value] : p.params) std::visit([&, n = name](const auto& v) { j[n] = v; }, value);
  return j;
}

std::optional<Claim> claim_from_json(const json& c) {
  if (c.is_null()) return std::nullopt;
  Claim claim;
  const std::string d = c.at("determinism").get<std::string>(), s = c.at("source").get<std::string>();
  for (auto v : {Determinism::deterministic, Determinism::nondeterministic, Determinism::unknown})
    if (to_string(v) == d) claim.determinism = v;
  for (auto v : {ClaimSource::design, ClaimSource::vendor_doc, ClaimSource::vendor_api})
    if (to_string(v) == s) claim.source = v;
  claim.reason = c.at("reason").get<std::string>();
  return claim;
}

}  // namespace

void remove_torch_folders_of(pid_t pid) {
  std::error_code ec;
  const fs::path temp = fs::temp_directory_path(ec);
  if (ec) return;
  const std::string prefix = "d9m-torch-" + std::to_string(pid) + "-";
  std::vector<fs::path> found;
  for (fs::directory_iterator it(temp, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) found.push_back(it->path());
  for (const auto& f : found) fs::remove_all(f, ec);
}

TorchExecutor::TorchExecutor(unsigned threads, double timeout_s) : threads_(threads), timeout_s_(timeout_s) {}

TorchExecutor::~TorchExecutor() {
  stop();
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

void TorchExecutor::stop() {
  if (to_ >= 0) ::close(to_);  // end of requests: the worker leaves its loop
  if (from_ >= 0) ::close(from_);
  to_ = from_ = -1;
  if (pid_ > 0) {
    int st = 0;
    if (!wait_child_for(pid_, st, std::chrono::seconds(1))) {  // it leaves its loop at once; else SIGKILL
      ::kill(pid_, SIGKILL);
      // Bounded too: a process stuck in the kernel (a GPU driver call) may take long to die.
      // Left unreaped it stays a zombie until d9m exits; the run goes on.
      wait_child_for(pid_, st, std::chrono::seconds(5));
    }
  }
  pid_ = -1;
  buffer_.clear();
}

void TorchExecutor::start() {
  started_ = true;
  if (dir_.empty()) {
    std::string tmpl = (fs::temp_directory_path() / ("d9m-torch-" + std::to_string(::getpid()) + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) fail_environment("cannot make a folder for the PyTorch worker's tensors: " + std::string(std::strerror(errno)));
    dir_ = tmpl;
  }
  ::signal(SIGPIPE, SIG_IGN);  // a worker that died fails its case, not the run
  int req[2], rep[2];
  if (::pipe2(req, O_CLOEXEC) != 0 || ::pipe2(rep, O_CLOEXEC) != 0)
    fail_environment(std::string("cannot create a pipe for the PyTorch worker: ") + std::strerror(errno));
  const std::string path = bindings_dir();
  const char* old = std::getenv("PYTHONPATH");
  std::vector<std::string> env = {"PYTHONPATH=" + path + (old && *old ? ":" + std::string(old) : "")};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  std::vector<std::string> args = {python(), "-m", "d9m_torch.worker", "--threads", std::to_string(threads_)};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, req[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, rep[1], STDOUT_FILENO);
  const int rc = ::posix_spawnp(&pid_, args[0].c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(req[0]);
  ::close(rep[1]);
  to_ = req[1];
  from_ = rep[0];
  if (rc != 0) {
    pid_ = -1;
    stop();
    unavailable_ = "cannot start " + args[0] + " for the torch backend: " + std::strerror(rc) + " (set D9M_PYTHON)";
    return;
  }
  try {
    const json hello = receive("starting");
    if (hello.contains("error")) {
      unavailable_ = hello["error"].get<std::string>();
      stop();
    } else {
      hello_ = hello.at("hello");
    }
  } catch (const WatchdogTimeout& e) {
    // PyTorch is there but slow to import: not a reason to skip its cases. The next case that
    // needs the worker fails with this (ERROR, as with worker isolation) and then starts afresh.
    start_error_ = e.what();
    stop();
  } catch (const std::exception& e) {
    unavailable_ = std::string("the PyTorch worker did not start: ") + e.what();
    stop();
  }
}

json TorchExecutor::receive(const std::string& doing) {
  char chunk[4096];
  // Turns of at most 250 ms (the poll below): a gap of over a second is time d9m was stopped.
  WatchdogDeadline deadline(std::chrono::duration_cast<WatchdogDeadline::Clock::duration>(std::chrono::duration<double>(timeout_s_)),
                            std::chrono::seconds(1));
  std::size_t scanned = 0;  // the buffer before this holds no newline: each byte is looked at once
  for (;;) {
    if (const auto nl = buffer_.find('\n', scanned); nl != std::string::npos) {
      const std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      json msg = json::parse(line, nullptr, false);
      if (msg.is_discarded() || !msg.is_object()) {
        stop();
        throw std::runtime_error("the PyTorch worker sent a line that is not a JSON object while " + doing + ": " + line.substr(0, 200));
      }
      return msg;
    }
    if (timeout_s_ > 0 && from_ >= 0) {
      // The watchdog: without worker isolation nothing else stops a trial that hangs in PyTorch.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.left()).count();
      pollfd p{from_, POLLIN, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 250)));  // at the end, a last look
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        stop();
        throw std::runtime_error(std::string("poll on the PyTorch worker's pipe while ") + doing + ": " + std::strerror(errno));
      }
      if (n == 0 && left > 0) continue;
      if (n == 0) {
        if (pid_ > 0) ::kill(pid_, SIGKILL);
        stop();
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", timeout_s_);
        throw WatchdogTimeout(std::string("watchdog: the PyTorch worker did not answer within ") + secs + " s while " + doing +
                              "; it was killed");
      }
    }
    const ssize_t got = from_ >= 0 ? ::read(from_, chunk, sizeof chunk) : 0;
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      int st = 0;
      std::string why = "closed its output";
      // A worker that closed its output is ending, or hangs (in its CUDA teardown, say): give it
      // a second to exit, then stop() kills it; never wait for it unbounded.
      if (pid_ > 0 && wait_child_for(pid_, st, std::chrono::seconds(1))) {
        why = WIFSIGNALED(st) ? "was killed by signal " + std::to_string(WTERMSIG(st))
                              : "exited with status " + std::to_string(WEXITSTATUS(st));
        pid_ = -1;
      }
      stop();
      throw std::runtime_error("the PyTorch worker (" + python() + " -m d9m_torch.worker) " + why + " while " + doing +
                               " (its messages are on stderr)");
    }
    scanned = buffer_.size();
    buffer_.append(chunk, static_cast<std::size_t>(got));
    // The protocol's messages are short lines: a worker streaming bytes with no newline (a
    // print gone wrong) would otherwise grow this buffer until the deadline, or forever.
    if (buffer_.size() > kMaxMessageBytes && std::memchr(chunk, '\n', static_cast<std::size_t>(got)) == nullptr) {
      stop();
      throw std::runtime_error("the PyTorch worker sent over " + std::to_string(kMaxMessageBytes >> 20) +
                               " MiB without a newline while " + doing + "; it was stopped");
    }
  }
}

void TorchExecutor::ensure_worker() {
  // Again after a worker died: the next case gets a fresh one. A start the watchdog cut short
  // (here or in unavailable()) fails this case once.
  if (!start_error_ && pid_ < 0 && !unavailable_) start();
  if (start_error_) throw std::runtime_error(*std::exchange(start_error_, std::nullopt));
  if (unavailable_) throw std::runtime_error(*unavailable_);
}

json TorchExecutor::ask(const json& msg, const std::string& doing) {
  ensure_worker();
  if (!write_all(to_, json_text(msg) + "\n")) {
    stop();
    throw std::runtime_error("the PyTorch worker is gone (" + doing + ")");
  }
  return receive(doing);
}

std::optional<std::string> TorchExecutor::unavailable() const {
  auto* self = const_cast<TorchExecutor*>(this);  // starting the worker is how availability is known
  if (!started_) self->start();
  return unavailable_;
}

const json& TorchExecutor::stack() {
  if (!started_) start();
  return hello_;
}

std::optional<Claim> TorchExecutor::prepare(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs) {
  // The worker first: starting it makes the folder the tensors go to (a prepare before it wrote
  // them to "/input_0.bin", where another process's worker could read them).
  ensure_worker();
  json in = json::array();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string path = dir_ + "/input_" + std::to_string(i) + ".bin";
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(static_cast<const char*>(inputs[i].data()), static_cast<std::streamsize>(p.inputs[i].bytes()));
    if (!f.flush()) fail_environment("cannot write " + path + " for the PyTorch worker");
    in.push_back(tensor_json(p.inputs[i], path));
  }
  output_path_ = dir_ + "/output.bin";
  const json req = {{"prepare",
                     {{"op", v.op},
                      {"variant", v.name},
                      {"params", params_json(p)},
                      {"dtype", std::string(dtype_short_name(p.dtype))},
                      {"math", p.math},
                      {"inputs", in},
                      {"output", tensor_json(p.output, output_path_)}}}};
  const json reply = ask(req, "preparing " + v.op + "/" + v.name);
  if (reply.contains("unsupported")) throw Unsupported(reply["unsupported"].get<std::string>());
  if (reply.contains("error")) throw std::runtime_error(reply["error"].get<std::string>());
  return claim_from_json(reply.at("prepared").at("claim"));
}

std::int64_t TorchExecutor::trial(std::int64_t k, const TensorDesc& out, void* into) {
  std::error_code ec;
  fs::remove(output_path_, ec);  // a trial that writes nothing must not pass with the last one's bytes
  const json reply = ask({{"trial", k}}, "running trial " + std::to_string(k));
  if (reply.contains("error")) throw std::runtime_error(reply["error"].get<std::string>());
  std::ifstream f(output_path_, std::ios::binary);
  f.read(static_cast<char*>(into), static_cast<std::streamsize>(out.bytes()));
  if (!f || f.gcount() != static_cast<std::streamsize>(out.bytes()) || f.peek() != std::char_traits<char>::eof())
    throw std::runtime_error("the PyTorch worker's output for trial " + std::to_string(k) + " is not " + std::to_string(out.bytes()) +
                             " bytes (" + out.name + " " + shape_string(out.shape) + ")");
  return reply.at("elapsed_ns").get<std::int64_t>();
}

CaseOutcome TorchExecutor::run(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs, std::int64_t trials,
                               bool keep_first_output, const TrialCallback& after_trial) {
  const std::optional<Claim> claim = prepare(v, p, inputs);
  CaseOutcome outcome = run_host_trials(p, trials, keep_first_output, after_trial, nullptr,
                                        [&](std::int64_t t, void* out, std::string&) { return trial(t, p.output, out); });
  outcome.claim = claim;
  return outcome;
}

HostTensor TorchExecutor::run_once(const VariantDef& v, const Problem& p, const std::vector<HostTensor>& inputs, OnceChoice*) {
  prepare(v, p, inputs);
  HostTensor out(p.output);
  trial(0, p.output, out.data());
  return out;
}

std::uint64_t TorchExecutor::memory_held(const Problem& p) const {
  // This process's two outputs, and in the worker the inputs and an output or two.
  std::uint64_t bytes = 4 * static_cast<std::uint64_t>(p.output.bytes());
  for (const auto& in : p.inputs) bytes += in.bytes();
  return bytes;
}

std::unique_ptr<Executor> make_torch_executor(unsigned threads, double timeout_s) {
  return std::make_unique<TorchExecutor>(threads, timeout_s);
}

}  // namespace d9m
