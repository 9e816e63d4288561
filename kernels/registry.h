// The one list of ops and variants. Each op family declares its ops and variants once, next to
// their code, with D9M_REGISTER_OP / D9M_REGISTER_VARIANT; the CLI, the CTest suites and the
// reports all read this registry. Registration runs at static-initialisation time and must do
// nothing but append descriptors: no device call, no allocation of buffers.
#pragma once
#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "kernels/common/tensor.h"

namespace d9m {

class ThreadPool;

// ---- op parameters ------------------------------------------------------------------------

enum class ParamKind { integer, boolean, real, choice };

using ParamValue = std::variant<std::int64_t, bool, double, std::string>;

// The largest integer parameter (INT_MAX, 2^31-1): sizes, strides and dilations reach cuDNN's
// descriptors, which take int, so 2^31 would wrap to a negative size there. Windows built from
// them are bounded the same way (kernels/common/window.h).
inline constexpr std::int64_t kMaxIntegerParam = 2147483647;

struct ParamSpec {
  std::string name;
  ParamKind kind = ParamKind::integer;
  std::optional<ParamValue> default_value;  // absent: the parameter is required
  std::int64_t min = 1;                     // integers: smallest accepted value (the largest is kMaxIntegerParam)
  std::vector<std::string> choices;         // choice: accepted spellings
  std::string doc;
  // A parameter added to an op after configs of it were stored: while it has its default value it
  // is left out of the canonical parameters (and so of the config's id and its cases'), so those
  // configs keep the ids their evidence is filed under.
  bool added_later = false;
};

// Parameters of one config after validation against the op's ParamSpecs: every spec has a
// value of its kind.
class Params {
 public:
  void set(std::string name, ParamValue v) { values_[std::move(name)] = std::move(v); }
  std::int64_t integer(const std::string& name) const;
  bool boolean(const std::string& name) const;
  double real(const std::string& name) const;
  const std::string& choice(const std::string& name) const;
  const std::map<std::string, ParamValue>& values() const { return values_; }

 private:
  const ParamValue& at(const std::string& name) const;
  std::map<std::string, ParamValue> values_;
};

// Thrown by OpDef::plan when parameters are individually valid but do not make a config
// (e.g. a window larger than the padded input). `param` names the offending parameter.
struct InvalidConfig : std::runtime_error {
  InvalidConfig(std::string param_name, const std::string& what)
      : std::runtime_error(what), param(std::move(param_name)) {}
  std::string param;
};

// ---- ops ----------------------------------------------------------------------------------

// An op instantiated on one config: its inputs in argument order, its output, and the
// geometry the kernels need (`geometry`, a family-specific struct).
struct Problem {
  std::vector<TensorDesc> inputs;
  TensorDesc output;
  std::any geometry;
  // The config's precision (DESIGN.md "Precision"): every float tensor above has `dtype`, and
  // library ops run in math mode `math` ("default" unless the config names another).
  DType dtype = DType::f32;
  std::string math = "default";
  // For an op in scatter form (kernels/common/accumulate.h): an upper bound on the contributions
  // its sources emit, computed by plan() from the shapes alone (0: not stated). The sort- and
  // bucket-based ordered variants buffer every contribution, so their working memory follows
  // from it (VariantDef::memory), and they check the bound when they run.
  std::uint64_t contributions = 0;
  // The validated parameters it was planned from (every spec with a value), set by whoever plans
  // it: a backend outside this process (PyTorch's) is handed the op by name and parameters.
  std::map<std::string, ParamValue> params;

  template <class G> const G& geom() const { return std::any_cast<const G&>(geometry); }
};

// How inputs are filled. `random` draws from the whole generator range; `exact` draws small
// integers (and dyadic box coordinates) so every sum in every op is exact in float32, which
// makes all variants agree bit for bit whatever their summation order.
enum class FillMode { random, exact };

// Host memory of one input being filled, with the generator stream reserved for it.
struct FillTarget {
  const TensorDesc& desc;
  void* data;
  std::uint64_t seed;
  std::uint64_t stream;  // the argument's index
};

// How an op's batch runs through its tensors, for batch invariance (DESIGN.md "Two
// properties"): the parameter that sets the batch size (M of a matmul, N of a convolution, the
// boxes of crop_and_resize), the axis it indexes in each input (-1: the input is shared by every
// row of the batch, like a weight) and in the output. A sub-batch is the op planned with the
// parameter set to its size and its inputs cut from the full batch's along those axes, so its
// rows are bit for bit the full batch's rows.
struct BatchAxes {
  std::string param;
  std::vector<int> inputs;  // one per Problem::inputs entry
  int output = 0;
};

struct OpDef {
  std::string name;
  std::string family;
  std::string summary;  // the semantics, one line
  std::vector<ParamSpec> params;
  double tolerance = 1e-5;  // |variant - serial| <= tolerance * (1 + max|serial|) on random inputs, in f32
  // The float dtypes a config may name (the first is the default, always f32), and the math
  // modes of a library op (the first, "default", is what the library does unasked). plan()
  // describes float tensors as f32; the catalogue gives them the config's dtype.
  std::vector<DType> dtypes = {DType::f32};
  std::vector<std::string> math_modes = {"default"};
  std::function<Problem(const Params&)> plan;
  // Fills every input (host memory). Inputs may depend on earlier ones (max-pool's orig_output).
  std::function<void(const Problem&, FillMode, std::vector<FillTarget>&)> fill;
  // The op's batch dimension, for configs that ask for batch invariance; empty: it has none (its
  // output rows are not independent computations, like a filter gradient summed over the batch).
  // Its inputs must be valid when cut along the axes: fill() may not tie rows of the batch together.
  std::function<BatchAxes(const Params&)> batch;
  // The largest |variant - serial| accepted on random inputs with this problem and max|serial|,
  // where the default rule (tolerance_for(op, p) * (1 + max|serial|)) does not fit the op; empty:
  // the default rule (allowed_difference below).
  std::function<double(const Problem&, double max_ref)> agreement;
  // Where the op's definition leaves an implementation a choice that changes values on this
  // problem (which of tied maxima receives a pooling gradient: the fill gives ties on purpose),
  // what that choice is; empty or nullopt: none. Library code may choose otherwise than d9m's
  // reference, so the audit does not hold a library variant's values to the reference there
  // (accepted_difference below); d9m's own variants follow the written semantics and are held.
  std::function<std::optional<std::string>(const Problem&)> implementation_choice;
  // For an op whose every output is a sum of contributions in an order its variants may change
  // (scatter, segment and embedding-gradient sums): the most contributions one output element can
  // receive, a bound from the shapes; its tolerance then grows with it (long_sum_tolerance below).
  // Empty: the op's sums are short, or it has none.
  std::function<std::int64_t(const Problem&)> sum_terms;
};

// The parameter that sets the op's batch size (OpDef::batch), or nullopt where it has none.
std::optional<std::string> batch_param(const OpDef& op);

// The op's tolerance in `dtype` and math mode: OpDef::tolerance is stated for f32 and scales with
// the unit roundoff of the dtype (x 2^13 for f16 and for f32 in math mode tf32, x 2^16 for bf16,
// x 2^-29 for f64).
double tolerance_for(const OpDef& op, DType dtype, const std::string& math = "default");
// The tolerance of a planned problem: at its output's dtype (an output the framework keeps f32,
// TensorDesc::keeps_f32, is computed in f32 whatever the config's dtype) and its math mode.
double tolerance_for(const OpDef& op, const Problem& p);
// For an op with OpDef::sum_terms (0 for any other): reordering a float sum of k terms moves it by
// about u sqrt(k) of its size on random inputs (each rounding a step of at most u times a partial
// sum), so the op's fixed tolerance, written for the catalogue's short sums, failed correct variants
// where many contributions meet in one output (found by review, measured here: embedding_bag_bwd's
// cpu.atomic with 160,000 indices into 4 rows, 0.00201 from cpu.serial with 0.00134 allowed; the
// fixed-point sum of unsorted_segment_sum, nearly exact, was 0.00131 of its 0.00231 from cpu.serial
// at 40,000 rows a segment). kSumRoundoffUnits u sqrt(terms), u the roundoff of the accumulation:
// f64's for f64, else f32's, as 16-bit sums are accumulated (the 16-bit output's own rounding is in
// the op's tolerance at that dtype; code that accumulates in 16 bits is not shown right by any of
// these rules, see accepted_wide_difference). tolerance_for(op, p) is at least this, and so is the
// outside-code rule. `terms` bounds every output, so the rule is loose where the data spreads the
// contributions; still far tighter than a wrong op, which misses by the output's own size.
inline constexpr double kSumRoundoffUnits = 4;
double long_sum_tolerance(const OpDef& op, const Problem& p);
// The largest |variant - serial| accepted on random inputs, max_ref = max|serial|: the op's own
// rule (OpDef::agreement), else tolerance_for(op, p) * (1 + max_ref).
double allowed_difference(const OpDef& op, const Problem& p, double max_ref);

// ---- variants -----------------------------------------------------------------------------

// torch: PyTorch's own kernels, run by its Python package in a process of their own
// (bindings/python/d9m_torch/worker.py; kernels/torch declares them, harness/exec/torch_executor runs them).
enum class Backend { cpu, cuda, torch };
enum class Determinism { deterministic, nondeterministic, unknown };
enum class ClaimSource { design, vendor_doc, vendor_api };

// What a variant is, as reports, controls and solutions read it (DESIGN.md "Variant roles"):
//   reference  the serial definition of the op (never offered as a fix: one thread by design)
//   atomic     races by construction (atomic adds in the scheduler's order)
//   ordered    d9m's own fixed-order implementation
//   vendor     library code (cuDNN, cuBLAS, CUB, cuSPARSE)
//   autotune   a library choosing its algorithm by timing
//   control    exists to test the harness itself (fault injection), not the op
//   program    a user's own program, run by `d9m exec` (never registered: a role of stored cases)
//   framework  a framework's own kernels as its users call them (PyTorch's default and deterministic modes)
// `unset` is only the default of the field: the registry refuses a variant that leaves it.
enum class Role { unset, reference, atomic, ordered, vendor, autotune, control, program, framework };

std::string to_string(Backend b);
std::string to_string(Determinism d);
std::string to_string(ClaimSource s);
std::string to_string(Role r);
// The role a store spells; nullopt for text that is not one.
std::optional<Role> role_from_string(const std::string& s);

struct Claim {
  Determinism determinism = Determinism::unknown;
  ClaimSource source = ClaimSource::design;
  std::string reason;
};

// What a variant is handed for one trial: pointers in its backend's memory.
struct ExecContext {
  ThreadPool* pool = nullptr;  // CPU worker threads
  void* stream = nullptr;      // cudaStream_t for CUDA variants
};

struct KernelArgs {
  const Problem& problem;
  std::vector<const void*> inputs;  // in Problem::inputs order
  void* output;
  const ExecContext& exec;
  void* state = nullptr;            // what the variant's prepare() made, if it has one
  // Where an autotuning variant names what it chose in this trial (say "algo1"), so the store
  // keeps it beside the trial's digest and the report shows how often the choice changed.
  std::string* choice = nullptr;
  // Set where the variant is to run a choice it named before (chose) instead of searching again:
  // a framework searches once per process and shape and keeps the winner for every later call
  // (a pipeline's later steps, harness/exec/pipeline_exec.h). The variant runs that choice and
  // names it again; text it never names is a logic error.
  const std::string* replay = nullptr;

  void chose(std::string what) const {
    if (choice) *choice = std::move(what);
  }

  template <class T> const T* in(std::size_t i) const { return static_cast<const T*>(inputs[i]); }
  template <class T> T* out() const { return static_cast<T*>(output); }
};

// Thrown by a variant's prepare() when it cannot run a config (a cuDNN algorithm that does
// not support it): the case is UNSUPPORTED, which is a status, not an error.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Memory a variant needs while it runs, beyond its inputs and its output: host memory for a CPU
// variant, device memory for a CUDA one, so that a case is refused only where the machine is too
// small for it (issue 13).
// `what` says what it is for, in words the UNSUPPORTED reason can quote.
struct WorkingMemory {
  std::uint64_t bytes = 0;
  std::string what;
};

// What prepare() made before the trials: state the trials use (handles, descriptors,
// workspaces) and, where the vendor's API states one for this config, its claim.
struct Prepared {
  std::shared_ptr<void> state;
  std::optional<Claim> claim;
};

struct VariantDef {
  std::string op;
  std::string name;  // "cpu.atomic", "cuda.ordered", "cudnn.algo1", ...
  Backend backend = Backend::cpu;
  Role role = Role::unset;
  Claim claim;
  // Empty when the variant supports every config; otherwise returns why it does not.
  std::function<std::optional<std::string>(const Problem&)> unsupported;
  // Writes the whole output: initialising an accumulated output is part of the op.
  std::function<void(const KernelArgs&)> run;
  // Optional, untimed, once per case before the trials (on the executor's stream).
  std::function<Prepared(const Problem&, const ExecContext&)> prepare;
  // Another variant whose output this one claims to equal bit for bit on every config
  // (cross-implementation reproducibility), e.g. cuda.ordered -> cpu.ordered. Empty: no claim.
  std::string bit_equal_to;
  // Its claim about batch invariance, for ops with a batch (OpDef::batch): `deterministic` here
  // means a row's bits do not depend on the rest of the batch, `nondeterministic` that they do.
  // Absent: no claim (the serial reference gets one by default: one thread, each output in an
  // order no other row changes).
  std::optional<Claim> invariance;
  // Its working memory on a config, estimated from the problem alone (before any allocation);
  // empty or nullopt: small (at most a few copies of the output). The harness compares it with
  // the memory the machine has free and reports the case UNSUPPORTED, naming both, where it
  // cannot fit.
  std::function<std::optional<WorkingMemory>(const Problem&)> memory;
};

// The largest |output - serial reference| accepted from variant `v` on random inputs, max_ref =
// max|reference|: what the audit holds every case's values to (harness/core/value_check.h) and the
// GPU tests hold CUDA variants to: allowed_difference() (the op's own rule where it has one,
// OpDef::agreement) for d9m's own code. Library and framework code: the op's rule, its tolerance
// taken at TF32 for f32 in the default math mode when it ran on a device (cuDNN's default math
// and PyTorch's cuDNN convolutions use TF32 unasked), and at least 1e-3 (1 + max_ref) (FFT and
// Winograd algorithms round otherwise than direct sums; 1e-5 in f64), at 16 bits at least the
// tolerance 1e-6 scaled to the dtype (0.008 f16, 0.066 bf16: another implementation rounds its
// partial sums otherwise). On a device (`on_device`) at least 1e-5 (1 + max_ref): its math
// functions round otherwise than the host's. Each rule is at least what the GPU and PyTorch
// tests accepted before it was one (the H100 and H200 runs passed them). Loose against rounding,
// never against a wrong op, which misses by the size of the output itself; where a long 16-bit
// sum makes the rule that large, the audit does not call the case checked (below).
double accepted_difference(const OpDef& op, const Problem& p, const VariantDef& v, double max_ref, bool on_device);
// Library and framework code: a role whose code d9m did not write (vendor, autotune, framework, program).
bool is_outside_code(Role r);
// A 16-bit output (f16, bf16) is also held to a tighter rule against a wider reference: the op's
// serial definition run in f64 (f32 where the op takes no f64) on the same 16-bit inputs, widened
// exactly, and rounded once to the output's dtype. accepted_difference() at 16 bits is the op's f32
// tolerance scaled by the roundoff (x 2^16 for bf16), which reaches the output's own size where
// many contributions meet in one sum: an all-zero output would pass it (harness/exec/value_checker.h
// then calls the check unchecked unless this rule holds). This one accepts kWideRoundoffUnits units
// of the dtype's roundoff at max_ref (the output's own rounding, and a few intermediate ones), plus
// f16's subnormal spacing as many times, on top of the op's rule at f32 (the accumulation, which
// cuBLAS, cuDNN and PyTorch do in f32 for 16-bit data; at least 1e-3 (1 + max_ref) for library and
// framework code). Code that accumulates in 16 bits (atomicAdd on __half, d9m's own scatter-form
// variants) misses it wherever a sum is long; that is not wrong, only not shown right by this rule.
inline constexpr int kWideRoundoffUnits = 4;
double accepted_wide_difference(const OpDef& op, const Problem& p, const VariantDef& v, double max_ref);

class Registry {
 public:
  static Registry& global();

  bool add(OpDef op);
  bool add(std::vector<VariantDef> variants);

  const std::vector<OpDef>& ops() const { return ops_; }
  const std::vector<VariantDef>& variants() const { return variants_; }
  const OpDef* find_op(const std::string& name) const;
  const VariantDef* find_variant(const std::string& op, const std::string& name) const;
  std::vector<const VariantDef*> variants_of(const std::string& op) const;

 private:
  std::vector<OpDef> ops_;
  std::vector<VariantDef> variants_;
};

}  // namespace d9m

#define D9M_CONCAT_INNER(a, b) a##b
#define D9M_CONCAT(a, b) D9M_CONCAT_INNER(a, b)
// Registers at static-initialisation time. The kernels library is linked whole-archive so the
// linker cannot drop a translation unit whose only job is to register. Variants are registered
// one way only, as a list: written out,
//   D9M_REGISTER_VARIANTS({{.op = "bias_add", .name = "cpu.serial", ...}, {...}});
// or made by a family's helper that returns them,
//   D9M_REGISTER_VARIANTS(accumulate::cpu_variants("scatter_add", scatter_add));
#define D9M_REGISTER_OP(...) \
  static const bool D9M_CONCAT(d9m_registered_op_, __LINE__) = ::d9m::Registry::global().add(__VA_ARGS__)
#define D9M_REGISTER_VARIANTS(...)                                     \
  static const bool D9M_CONCAT(d9m_registered_variants_, __LINE__) = \
      ::d9m::Registry::global().add(std::vector<::d9m::VariantDef>(__VA_ARGS__))
