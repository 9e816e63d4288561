#include "harness/core/inputs.h"

#include <xxhash.h>

#include <cstring>
#include <new>

#include "harness/core/digest.h"

namespace d9m {

HostTensor::HostTensor(TensorDesc desc) : desc_(std::move(desc)) {
  const std::size_t bytes = std::max<std::size_t>(desc_.bytes(), 1);
  data_.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
  std::memset(data_.get(), 0, bytes);
}

std::vector<HostTensor> make_inputs(const OpDef& op, const Problem& problem, std::uint64_t seed,
                                    FillMode mode) {
  std::vector<HostTensor> inputs;
  inputs.reserve(problem.inputs.size());
  for (const auto& d : problem.inputs) inputs.emplace_back(d);
  std::vector<FillTarget> targets;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    targets.push_back({inputs[i].desc(), inputs[i].data(), seed, i});
  op.fill(problem, mode, targets);
  return inputs;
}

std::string input_digest(const std::vector<HostTensor>& inputs) {
  std::string text;
  for (const auto& t : inputs) {
    text += t.desc().name + ":" + std::string(dtype_name(t.desc().dtype)) + ":" +
            shape_string(t.desc().shape) + ":" + digest_v1(t.data(), t.desc().bytes()).hex() + "\n";
  }
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return Digest128{h.high64, h.low64}.hex();
}

}  // namespace d9m
