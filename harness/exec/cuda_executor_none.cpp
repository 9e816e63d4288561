// The CUDA executor of a build without CUDA: every CUDA case is SKIPPED with this reason.
#include <stdexcept>

#include "harness/exec/executor.h"

namespace d9m {

namespace {
class NoCudaExecutor final : public Executor {
 public:
  std::optional<std::string> unavailable() const override {
    return "this d9m was built without CUDA (configure with -DD9M_CUDA=ON)";
  }
  CaseOutcome run(const VariantDef&, const Problem&, const std::vector<HostTensor>&, std::int64_t, bool,
                  const TrialCallback&) override {
    return {};
  }
  HostTensor run_once(const VariantDef&, const Problem&, const std::vector<HostTensor>&, OnceChoice* = nullptr) override {
    throw std::logic_error("CUDA run on a build without CUDA");  // unavailable() keeps any case from getting here
  }
  std::string memory_name() const override { return "device memory"; }
  bool on_device() const override { return true; }
  bool digests_off_host() const override { return true; }
  std::optional<std::uint64_t> memory_free() const override { return std::nullopt; }
  std::uint64_t memory_held(const Problem&) const override { return 0; }
};
}  // namespace

std::unique_ptr<Executor> make_cuda_executor() { return std::make_unique<NoCudaExecutor>(); }

}  // namespace d9m
