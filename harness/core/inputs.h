// Inputs of a case, generated on the host from the case seed (kernels/common/counter_rng.h),
// and the input digest that decides whether two stacks saw the same inputs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace d9m {

// A tensor in host memory, 64-byte aligned.
class HostTensor {
 public:
  explicit HostTensor(TensorDesc desc);
  const TensorDesc& desc() const { return desc_; }
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <class T> T* as() { return static_cast<T*>(data()); }
  template <class T> const T* as() const { return static_cast<const T*>(data()); }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  TensorDesc desc_;
  std::unique_ptr<std::byte[], Free> data_;
};

// Fills in f32 (the op's fillers), then rounds every float input to the problem's dtype (to
// nearest even; kernels/common/half.h): inputs at any precision are the f32 ones rounded.
std::vector<HostTensor> make_inputs(const OpDef& op, const Problem& problem, std::uint64_t seed,
                                    FillMode mode = FillMode::random);

// XXH3-128 over "name:dtype:shape:digest_v1\n" of every input in argument order (hex).
std::string input_digest(const std::vector<HostTensor>& inputs);

}  // namespace d9m
