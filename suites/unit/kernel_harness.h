// Helpers for kernel tests: plan a config from JSON, fill inputs, run a variant on a pool.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/core/catalog.h"
#include "harness/core/digest.h"
#include "harness/core/inputs.h"
#include "harness/core/value_check.h"
#include "kernels/common/half.h"
#include "kernels/common/thread_pool.h"

namespace d9m::test {

inline CatalogConfig config(const std::string& op, const nlohmann::json& params, const std::string& dtype = "f32") {
  const nlohmann::json cat = {{"schema", "d9m.catalog/1"},
                              {"configs", {{{"op", op}, {"name", "t"}, {"params", params}, {"dtype", dtype}}}}};
  return parse_catalog(cat.dump(), "test", Registry::global()).configs.at(0);
}

inline HostTensor run_variant(const std::string& op, const std::string& variant, const Problem& p,
                              const std::vector<HostTensor>& inputs, unsigned threads = 2) {
  const VariantDef* v = Registry::global().find_variant(op, variant);
  EXPECT_NE(v, nullptr) << op << "/" << variant;
  ThreadPool pool(threads);
  const ExecContext exec{&pool, nullptr};
  KernelArgs args{p, {}, nullptr, exec};
  for (const auto& t : inputs) args.inputs.push_back(t.data());
  Prepared prepared;  // what the executor does once per case
  if (v->prepare) prepared = v->prepare(p, exec);
  args.state = prepared.state.get();
  HostTensor out(p.output);
  std::memset(out.data(), 0xA5, p.output.bytes());  // a variant must write every output element
  args.output = out.data();
  v->run(args);
  return out;
}

inline std::string digest(const HostTensor& t) { return digest_v1(t.data(), t.desc().bytes()).hex(); }

// The elements as doubles, and the NaN-aware largest difference (harness/core/value_check.h:
// the audit's value check reads outputs the same way).
using d9m::max_abs_difference;
inline std::vector<double> values(const HostTensor& t) { return values_of(t); }

// Inputs from explicit values (in argument order), for hand-computed examples.
inline std::vector<HostTensor> inputs_from(const Problem& p, const std::vector<std::vector<double>>& vals) {
  std::vector<HostTensor> in;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    in.emplace_back(p.inputs[i]);
    EXPECT_EQ(static_cast<std::int64_t>(vals.at(i).size()), p.inputs[i].numel()) << p.inputs[i].name;
    for (std::size_t k = 0; k < vals[i].size(); ++k) {
      const double v = vals[i][k];
      switch (p.inputs[i].dtype) {  // the 16-bit values round to nearest even
        case DType::f32: in.back().as<float>()[k] = static_cast<float>(v); break;
        case DType::f64: in.back().as<double>()[k] = v; break;
        case DType::f16: in.back().as<Half>()[k] = half_from_float(static_cast<float>(v)); break;
        case DType::bf16: in.back().as<BFloat16>()[k] = bfloat16_from_float(static_cast<float>(v)); break;
        case DType::i32: in.back().as<std::int32_t>()[k] = static_cast<std::int32_t>(v); break;
      }
    }
  }
  return in;
}

}  // namespace d9m::test
