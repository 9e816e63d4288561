// cuDNN variants of the attention family: cuDNN's fused flash attention (SDPA), through the graph
// API as the C++ cuDNN frontend (the pinned nvidia-cudnn-frontend wheel) builds it.
//   sdpa      cudnn.sdpa                the forward graph (no statistics).
//   sdpa_bwd  cudnn.sdpa                the forward graph with softmax statistics, then the
//                                       backward graph at the frontend's default,
//                                       set_deterministic_algorithm(false).
//             cudnn.sdpa_deterministic  the same with set_deterministic_algorithm(true), the
//                                       vendor's determinism switch for the backward (frontend
//                                       1.5+), which d9m tests rather than trusts.
// The graphs take the inputs where they lie ([B,H,S,D], contiguous) and write dQ, dK and dV
// straight into sdpa_bwd's stacked output through its strides: nothing is copied. Inputs and
// outputs are f16 or bf16 (cuDNN's SDPA takes no f32 or f64); the scores, softmax and sums are in
// f32 (intermediate and compute type FLOAT). Support is decided by a real attempt: the graph's
// build (validation, heuristics, check_support, plan build) and one execution on zeroed tensors.
//
// This is the only file that includes the frontend (about 40 s to compile): it is host C++ built
// only with CUDA, and its JSON layer is left out (CUDNN_FRONTEND_SKIP_JSON_LIB), so the frontend's
// bundled nlohmann::json never meets the harness's (one definition of each template).
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn_frontend.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/common/cudnn_util.h"
#include "kernels/common/op_helpers.h"

namespace d9m::attention {

int cudnn_frontend_version() { return CUDNN_FRONTEND_VERSION; }

namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// The tensors' unique ids in the variant packs.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDo, kDq, kDk, kDv };

std::optional<std::string> dtype_support(const Problem& p) {
  if (p.dtype == DType::f16 || p.dtype == DType::bf16) return std::nullopt;
  return std::string("cuDNN's fused attention (SDPA) takes f16 and bf16 (or fp8), not ") + std::string(dtype_name(p.dtype));
}

// Dims and strides of a [B, H, seq, D] tensor inside one of `rows` rows per head (rows = seq
// for the inputs; S + 2 Skv for the stacked gradients).
std::vector<std::int64_t> dims(const Geometry& g, std::int64_t seq) { return {g.batch, g.heads, seq, g.dim}; }
std::vector<std::int64_t> strides(const Geometry& g, std::int64_t rows) { return {g.heads * rows * g.dim, rows * g.dim, g.dim, 1}; }

std::shared_ptr<fe::graph::Graph> new_graph(const Problem& p) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(p.dtype == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

TensorPtr input(fe::graph::Graph& graph, const char* name, Uid uid, const Geometry& g, std::int64_t seq) {
  return graph.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims(g, seq)).set_stride(strides(g, seq)));
}

TensorPtr stats_input(fe::graph::Graph& graph, const Geometry& g) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name("stats")
                          .set_uid(kStats)
                          .set_dim({g.batch, g.heads, g.seq_q, 1})
                          .set_stride({g.heads * g.seq_q, g.seq_q, 1, 1})
                          .set_data_type(fe::DataType_t::FLOAT));
}

// Whether a frontend failure says "not supported": the graph is valid but this cuDNN has no
// engine or plan for it (or a backend call returned a NOT_SUPPORTED status). Anything else is a
// malformed graph (d9m's bug: ATTRIBUTE_NOT_SET, INVALID_VALUE, ...), the device, the handle or
// a backend call failing otherwise: an error, never a quiet UNSUPPORTED.
bool not_supported(fe::error_t e) {
  switch (e.get_code()) {
    case fe::error_code_t::GRAPH_NOT_SUPPORTED:
    case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED:
    case fe::error_code_t::HEURISTIC_QUERY_FAILED:
    case fe::error_code_t::UNSUPPORTED_GRAPH_FORMAT: return true;
    case fe::error_code_t::CUDNN_BACKEND_API_FAILED: return e.get_message().find("NOT_SUPPORTED") != std::string::npos;
    default: return false;
  }
}

// A frontend call's failure while building: UNSUPPORTED where it says so, with the frontend's
// own message; an error otherwise.
void check(fe::error_t e, const std::string& what) {
  if (e.is_good()) return;
  const std::string text = "cuDNN frontend: " + what + ": " + e.get_message();
  if (not_supported(e)) throw Unsupported(text);
  throw std::runtime_error(text);
}

// The forward graph; `stats` adds the softmax statistics the backward reads.
std::shared_ptr<fe::graph::Graph> forward_graph(const Problem& p, bool stats) {
  const auto& g = p.geom<Geometry>();
  auto graph = new_graph(p);
  auto q = input(*graph, "q", kQ, g, g.seq_q), k = input(*graph, "k", kK, g, g.seq_kv), v = input(*graph, "v", kV, g, g.seq_kv);
  auto options = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(stats).set_attn_scale(static_cast<float>(g.scale));
  if (g.causal) options.set_causal_mask(true);
  auto [o, softmax_stats] = graph->sdpa(q, k, v, options);
  o->set_output(true).set_uid(kO).set_dim(dims(g, g.seq_q)).set_stride(strides(g, g.seq_q));
  if (stats) softmax_stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
  return graph;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const Problem& p, bool deterministic) {
  const auto& g = p.geom<Geometry>();
  auto graph = new_graph(p);
  auto q = input(*graph, "q", kQ, g, g.seq_q), k = input(*graph, "k", kK, g, g.seq_kv), v = input(*graph, "v", kV, g, g.seq_kv);
  auto o = input(*graph, "o", kO, g, g.seq_q), d_o = input(*graph, "d_o", kDo, g, g.seq_q);
  auto stats = stats_input(*graph, g);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("sdpa_backward")
                     .set_attn_scale(static_cast<float>(g.scale))
                     .set_deterministic_algorithm(deterministic);
  if (g.causal) options.set_causal_mask(true);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
  const std::int64_t rows = g.packed_rows();
  dq->set_output(true).set_uid(kDq).set_dim(dims(g, g.seq_q)).set_stride(strides(g, rows));
  dk->set_output(true).set_uid(kDk).set_dim(dims(g, g.seq_kv)).set_stride(strides(g, rows));
  dv->set_output(true).set_uid(kDv).set_dim(dims(g, g.seq_kv)).set_stride(strides(g, rows));
  return graph;
}

// What a variant keeps for all its trials: the handle (on the executor's stream), the built
// graphs, their workspace, and for the backward the forward's O and statistics.
struct State {
  cudnn::Handle handle;
  std::shared_ptr<fe::graph::Graph> forward, backward;
  DeviceMemory workspace, o, stats;
};

void build(fe::graph::Graph& graph, cudnnHandle_t handle, const std::string& what) {
  check(graph.build(handle, {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "building the " + what + " graph");
}

std::int64_t workspace_of(const fe::graph::Graph& graph) {
  std::int64_t bytes = 0;
  check(graph.get_workspace_size(bytes), "workspace size");
  return bytes;
}

// One execution of the op: inputs q, k, v (and dO), output `out`. A failure in a trial is an
// error, never a status; in the attempt (prepare's first execution) a "not supported" failure
// makes the case UNSUPPORTED.
void execute(const State& st, const Problem& p, const void* const* in, void* out, bool attempt = false) {
  const auto& g = p.geom<Geometry>();
  auto* ws = st.workspace.get();
  auto run = [&](const fe::graph::Graph& graph, std::unordered_map<std::int64_t, void*> pack, const char* what) {
    auto e = graph.execute(st.handle.get(), pack, ws);
    if (e.is_good()) return;
    const std::string text = std::string("cuDNN frontend: executing the ") + what + " graph: " + e.get_message();
    if (attempt && not_supported(e)) throw Unsupported(text + " (the attempt on zeroed inputs)");
    throw std::runtime_error(text);
  };
  void* q = const_cast<void*>(in[0]);  // the variant pack takes void*; cuDNN only reads inputs
  void* k = const_cast<void*>(in[1]);
  void* v = const_cast<void*>(in[2]);
  if (!st.backward) {
    run(*st.forward, {{kQ, q}, {kK, k}, {kV, v}, {kO, out}}, "forward");
    return;
  }
  run(*st.forward, {{kQ, q}, {kK, k}, {kV, v}, {kO, st.o.get()}, {kStats, st.stats.get()}}, "forward");
  auto* base = static_cast<unsigned char*>(out);
  const std::size_t row_bytes = static_cast<std::size_t>(g.dim) * dtype_size(p.dtype);
  run(*st.backward,
      {{kQ, q}, {kK, k}, {kV, v}, {kO, st.o.get()}, {kDo, const_cast<void*>(in[3])}, {kStats, st.stats.get()},
       {kDq, base}, {kDk, base + static_cast<std::size_t>(g.seq_q) * row_bytes},
       {kDv, base + static_cast<std::size_t>(g.seq_q + g.seq_kv) * row_bytes}},
      "backward");
}

Prepared prepare(const Problem& p, const ExecContext& e, bool backward, bool deterministic) {
  if (auto why = dtype_support(p)) throw Unsupported(*why);
  const auto& g = p.geom<Geometry>();
  const auto s = static_cast<cudaStream_t>(e.stream);
  auto st = std::make_shared<State>();
  D9M_CUDNN_CHECK(cudnnSetStream(st->handle.get(), s));
  st->forward = forward_graph(p, backward);
  build(*st->forward, st->handle.get(), "forward");
  std::int64_t ws = workspace_of(*st->forward);
  if (backward) {
    st->backward = backward_graph(p, deterministic);
    build(*st->backward, st->handle.get(), "backward");
    ws = std::max(ws, workspace_of(*st->backward));
    st->o = DeviceMemory(static_cast<std::size_t>(g.rows() * g.dim) * dtype_size(p.dtype));
    st->stats = DeviceMemory(static_cast<std::size_t>(g.rows()) * sizeof(float));
  }
  st->workspace = DeviceMemory(static_cast<std::size_t>(ws));

  // The attempt: one execution on zeroed inputs (uniform softmax), into scratch.
  std::vector<DeviceMemory> scratch;
  std::vector<const void*> in;
  for (const auto& t : p.inputs) {
    scratch.emplace_back(t.bytes());
    D9M_CUDA_CHECK(cudaMemsetAsync(scratch.back().get(), 0, t.bytes(), s));
    in.push_back(scratch.back().get());
  }
  DeviceMemory out(p.output.bytes());
  execute(*st, p, in.data(), out.get(), true);
  D9M_CUDA_CHECK(cudaStreamSynchronize(s));
  return {st, std::nullopt};
}

void run(const KernelArgs& a) {
  execute(*static_cast<const State*>(a.state), a.problem, a.inputs.data(), a.output);
}

std::vector<VariantDef> variants() {
  auto variant = [](const char* op, const char* name, Claim claim, bool backward, bool deterministic) {
    return VariantDef{.op = op, .name = name, .backend = Backend::cuda, .role = Role::vendor, .claim = std::move(claim),
                      .unsupported = dtype_support, .run = run,
                      .prepare = [backward, deterministic](const Problem& p, const ExecContext& e) {
                        return prepare(p, e, backward, deterministic);
                      }};
  };
  return {variant("sdpa", "cudnn.sdpa",
                  {Determinism::unknown, ClaimSource::vendor_doc,
                   "cuDNN and its frontend state no determinism property of the SDPA forward; each query row's softmax and "
                   "sum belong to one thread block in a flash-attention forward"},
                  false, false),
          variant("sdpa_bwd", "cudnn.sdpa",
                  {Determinism::nondeterministic, ClaimSource::vendor_api,
                   "SDPA_backward_attributes::set_deterministic_algorithm(false), the frontend's default: the backward may "
                   "accumulate dQ across key blocks in any order"},
                  true, false),
          variant("sdpa_bwd", "cudnn.sdpa_deterministic",
                  {Determinism::deterministic, ClaimSource::vendor_api,
                   "SDPA_backward_attributes::set_deterministic_algorithm(true) (cuDNN frontend 1.5+; deterministic backward "
                   "listed for Ampere, Ada and Hopper)"},
                  true, true)};
}

}  // namespace

D9M_REGISTER_VARIANTS(variants());

}  // namespace d9m::attention
