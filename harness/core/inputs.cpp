#include "harness/core/inputs.h"

#include <xxhash.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <new>

#include "harness/core/digest.h"
#include "kernels/common/counter_rng.h"
#include "kernels/common/half.h"

namespace d9m {

double f64_input_from_f32(float x) {
  if (x == 0.0f || !std::isfinite(x)) return x;
  // 29 random bits keyed by x's bits alone (so equal floats get equal doubles), as a fraction
  // u in (-1, 1); the offset u * ulp(x) / 8 stays well under half the spacing to x's neighbours
  // on either side (an eighth of the spacing above |x|, at most a quarter of the one below), so
  // the rounding of the sum below cannot reach a float tie.
  const std::uint64_t h = CounterRng::mix(std::bit_cast<std::uint32_t>(x) + CounterRng::kGolden);
  const double u = (static_cast<double>(h >> 35) + 0.5) * 0x1p-28 - 1.0;
  const double ulp = std::ldexp(1.0, std::ilogb(x) - 23);
  return static_cast<double>(x) + u * ulp * 0.125;
}

HostTensor::HostTensor(TensorDesc desc) : desc_(std::move(desc)) {
  const std::size_t bytes = std::max<std::size_t>(desc_.bytes(), 1);
  data_.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
  std::memset(data_.get(), 0, bytes);
}

namespace {

// The f32 description of a tensor the op's fillers write (they write floats).
TensorDesc as_f32(TensorDesc d) {
  if (is_float(d.dtype)) d.dtype = DType::f32;
  return d;
}

// `to` (of the config's dtype) from the f32 values in `from`: rounded to nearest even at f16 and
// bf16, given the bits below float's at f64 (random inputs; exact ones stay small integers).
void round_into(const HostTensor& from, HostTensor& to, FillMode mode) {
  const float* src = from.as<float>();
  const auto n = static_cast<std::size_t>(to.desc().numel());
  switch (to.desc().dtype) {
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) to.as<Half>()[i] = half_from_float(src[i]);
      break;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) to.as<BFloat16>()[i] = bfloat16_from_float(src[i]);
      break;
    case DType::f64:
      for (std::size_t i = 0; i < n; ++i)
        to.as<double>()[i] = mode == FillMode::random ? f64_input_from_f32(src[i]) : src[i];
      break;
    case DType::f32:
    case DType::i32: std::memcpy(to.data(), from.data(), to.desc().bytes()); break;
  }
}

}  // namespace

std::vector<HostTensor> make_inputs(const OpDef& op, const Problem& problem, std::uint64_t seed,
                                    FillMode mode) {
  // The fillers see the f32 problem (a filler may read an earlier input, as max-pool's
  // orig_output reads its input); every float input then takes the config's dtype. So an f16
  // input is the f32 input rounded, and the f32 input is the f64 input rounded: the same values
  // at every precision but for rounding.
  Problem f32 = problem;
  for (auto& d : f32.inputs) d = as_f32(d);
  f32.output = as_f32(f32.output);
  std::vector<HostTensor> filled;
  filled.reserve(f32.inputs.size());
  for (const auto& d : f32.inputs) filled.emplace_back(d);
  std::vector<FillTarget> targets;
  for (std::size_t i = 0; i < filled.size(); ++i)
    targets.push_back({filled[i].desc(), filled[i].data(), seed, i});
  op.fill(f32, mode, targets);
  if (problem.dtype == DType::f32) return filled;

  std::vector<HostTensor> inputs;
  inputs.reserve(problem.inputs.size());
  for (std::size_t i = 0; i < problem.inputs.size(); ++i) {
    inputs.emplace_back(problem.inputs[i]);
    round_into(filled[i], inputs.back(), mode);
  }
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
