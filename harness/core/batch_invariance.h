// Batch invariance, the second property beside repeatability (DESIGN.md "Two properties"), as
// cuDNN's "Determinism support" page defines it: a row's output bits do not change when the batch
// it is computed in changes size, order or neighbours. For a config naming
//   "batch_invariance": {"sizes": [1, 7]}
// the op also runs on sub-batches of each size -- the first rows of the full batch, and the last
// rows (other neighbours, another position) -- whose inputs are cut from the full batch's along
// the op's batch axes (OpDef::batch), and each sub-batch's output is compared bit for bit with
// the same rows of the full batch's first trial. Batch invariance is evidence of its own: it does
// not enter the case's identity or its repeatability status, and the table states both in cuDNN's
// words (invariance_status()).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/inputs.h"
#include "kernels/registry.h"

namespace d9m {

// One sub-batch of a config: rows [offset, offset + size) of the full batch.
struct SubBatch {
  std::int64_t size = 0, offset = 0;
  Problem problem;  // the op planned at `size`, at the config's precision
};

struct BatchPlan {
  BatchAxes axes;
  std::int64_t full = 0;  // the full batch's size
  std::vector<SubBatch> subs;
};

// The sub-batches of `sizes` (each 1 <= size < full, distinct): per size, the first rows and, where
// that is another set of rows, the last. Throws InvalidConfig (naming the batch parameter) when the
// op has no batch dimension or a size does not plan.
BatchPlan plan_sub_batches(const OpDef& op, const Params& params, DType dtype, const std::string& math,
                           const std::vector<std::int64_t>& sizes);

// Rows [offset, offset + count) of `t` along `axis` (a copy; the other axes whole).
HostTensor cut_rows(const HostTensor& t, int axis, std::int64_t offset, std::int64_t count);

// The sub-batch's inputs: each input cut along its batch axis, a shared one (-1) whole.
std::vector<HostTensor> sub_batch_inputs(const BatchPlan& plan, const SubBatch& sub, const std::vector<HostTensor>& full);

// What one sub-batch showed: how many of its output elements differ in their bits from the full
// batch's same rows (0: invariant), or why it could not run (an UNSUPPORTED size, an error).
struct SubBatchResult {
  std::int64_t size = 0, offset = 0, elements = 0, differing = 0;
  std::string error;  // empty: it ran, and `differing` is evidence
};

struct InvarianceEvidence {
  std::string param;     // the batch parameter ("m", "n", "boxes", ...)
  std::int64_t full = 0;  // its value in the full batch
  std::vector<SubBatchResult> subs;
  std::optional<Claim> claim;  // the variant's batch-invariance claim (VariantDef::invariance), if any

  bool tested() const;
  bool claimed_invariant() const { return claim && claim->determinism == Determinism::deterministic; }     // at least one sub-batch ran
  bool invariant() const;  // every sub-batch that ran equals the full batch's rows
  std::vector<std::int64_t> sizes() const;
  // Per entry of sizes(): the differing elements of that size's sub-batches together.
  std::vector<std::int64_t> differing() const;

  // The canonical JSON the store keeps in case_runs.invariance (and the hash chain covers).
  std::string to_json_text() const;
  // Throws std::invalid_argument on text that is not such JSON.
  static InvarianceEvidence from_json_text(const std::string& text);
};

// Several runs' evidence for one case, as one: their sub-batches together.
InvarianceEvidence combine(const std::vector<InvarianceEvidence>& runs);

// The cell in cuDNN's vocabulary, from the case's repeatability and its invariance evidence:
//   "Supported"      repeatable (one digest) and every sub-batch bit-equal to the full batch,
//   "Replay only"    repeatable, but some sub-batch's rows differ from the full batch's,
//   "Not guaranteed" not repeatable (then invariance cannot be relied on either),
//   "Unverified"     repeatable, but no sub-batch could run (each one's reason is in the evidence).
std::string invariance_status(bool repeatable, const InvarianceEvidence& e);

}  // namespace d9m
