// The value check of a case or of a pipeline's op (harness/core/value_check.h): its output against
// the op's serial reference on the same inputs, computed here on the CPU where it is not at hand,
// within what its variant is allowed; at a 16-bit output first against the op computed in f64
// and rounded once; and no check where the rule would pass an all-zero output.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/catalog.h"
#include "harness/core/value_check.h"
#include "harness/exec/executor.h"

namespace d9m {

// Library code (vendor, autotune) on an op whose definition leaves it a choice that changes
// values where the data ties (OpDef::implementation_choice): it may choose otherwise than the
// reference. PyTorch picks the first maximum as the reference does, so it is held.
bool library_may_choose(const OpDef& op, const VariantDef& v);

// The variants that may compute the serial reference of `problem` for checking `checked`, in the
// order tried: `serial` and d9m's ordered CPU variants that claim its bits, never `checked`; least
// working memory first, and of those that buffer nothing the threaded ones before `serial`.
std::vector<const VariantDef*> reference_candidates(const OpDef& op, const VariantDef& serial, const Problem& problem,
                                                    const VariantDef& checked);

class ValueChecker {
 public:
  // An output the values are checked against, and the variant that computed it (or why that
  // variant could not: `output` empty).
  struct Reference {
    std::optional<HostTensor> output;
    std::string by;
    std::string why_not;
  };
  // The references of one config's inputs, kept while its variants are checked. Each computed one
  // is kept by the variant that computed it, so that a variant is checked against the same
  // computation whatever order the checks come in (a resumed run's order differs).
  struct References {
    // The serial variant's own case output, where its case ran in this config (first, as planned).
    Reference serial_case;
    // The op's serial definition, computed for checks where serial_case is not at hand.
    std::vector<Reference> serial;
    // At a 16-bit output: the serial definition in f64 (f32 where the op takes no f64) on the
    // inputs widened, rounded once to the output's dtype (accepted_wide_difference in kernels/registry.h).
    std::vector<Reference> wide;
  };

  ValueChecker() = default;
  // References are computed by d9m's CPU variants on `cpu`.
  explicit ValueChecker(Executor& cpu) : cpu_(&cpu) {}

  // `output` of variant `v` on `inputs` of `cc`; `refs` caches what was computed for these inputs.
  // `beat` (may be empty) is called every second while a reference is computed: the watchdog's heartbeat.
  ValueCheck check(const CatalogConfig& cc, const VariantDef& v, const std::vector<HostTensor>& inputs, References& refs,
                   const HostTensor& output, bool on_device, const std::function<void()>& beat);

 private:
  // The values alone (check() adds the bits of a claimed partner).
  ValueCheck check_values(const CatalogConfig& cc, const VariantDef& v, const std::vector<HostTensor>& inputs, References& refs,
                          const HostTensor& output, bool on_device, const std::function<void()>& beat);
  // The reference of `problem` for checking `checked`: the first of reference_candidates that can
  // compute it, kept in `kept` (computed with `inputs()` where it is not there yet, stored as
  // `keep_as` makes it); nullptr with the reason.
  const Reference* reference_for(const OpDef& op, const Problem& problem, const VariantDef& checked, std::vector<Reference>& kept,
                                 const std::function<const std::vector<HostTensor>&()>& inputs,
                                 const std::function<HostTensor(HostTensor)>& keep_as, const std::function<void()>& beat,
                                 std::string& why_not);
  Executor* cpu_ = nullptr;
};

}  // namespace d9m
