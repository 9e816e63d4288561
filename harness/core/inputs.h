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

// Fills in f32 (the op's fillers), then gives every float input the problem's dtype: at f16 and
// bf16 the f32 value rounded to nearest even (kernels/common/half.h), at f64 the value of
// f64_input_from_f32 (random inputs; exact-mode integers convert exactly).
std::vector<HostTensor> make_inputs(const OpDef& op, const Problem& problem, std::uint64_t seed,
                                    FillMode mode = FillMode::random);

// The f64 input for the f32 input x (random mode): x plus a value-keyed offset under an eighth
// of x's float ulp, filling the 29 significand bits a double has beyond a float's 24. Rounded to
// float it is x again, equal floats give equal doubles and distinct ones keep their order (a
// max-pool's orig_output is still its window's maximum); 0, inf and NaN are kept. Why: x
// converted exactly has 24 significant bits, and then every f64 sum of up to 2^29 values of
// [-1, 1) on the fillers' 2^-23 grid is exact, so no summation order could show at f64 and an
// atomic variant's f64 row would read D where it races.
double f64_input_from_f32(float x);

// XXH3-128 over "name:dtype:shape:digest_v1\n" of every input in argument order (hex).
std::string input_digest(const std::vector<HostTensor>& inputs);

}  // namespace d9m
