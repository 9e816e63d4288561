#include "harness/core/batch_invariance.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "harness/core/catalog.h"
#include "harness/core/json_text.h"

namespace d9m {

namespace {

// The rows of a shape along `axis`: the elements before the axis (outer), the axis, after (inner).
struct Strides {
  std::int64_t outer = 1, rows = 1, inner = 1;
};

Strides strides_of(const Shape& s, int axis) {
  if (axis < 0 || static_cast<std::size_t>(axis) >= s.size())
    throw std::logic_error("batch axis " + std::to_string(axis) + " outside a tensor of shape " + shape_string(s));
  Strides st;
  for (int i = 0; i < axis; ++i) st.outer *= s[static_cast<std::size_t>(i)];
  st.rows = s[static_cast<std::size_t>(axis)];
  for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < s.size(); ++i) st.inner *= s[i];
  return st;
}

}  // namespace

BatchPlan plan_sub_batches(const OpDef& op, const Params& params, DType dtype, const std::string& math,
                           const std::vector<std::int64_t>& sizes) {
  if (!op.batch) throw InvalidConfig("", op.name + " has no batch dimension (its output rows are not computed apart)");
  BatchPlan plan;
  plan.axes = op.batch(params);
  plan.full = params.integer(plan.axes.param);
  const Problem full = op.plan(params);
  if (plan.axes.inputs.size() != full.inputs.size())
    throw std::logic_error(op.name + ": its batch axes name " + std::to_string(plan.axes.inputs.size()) + " inputs, it has " +
                           std::to_string(full.inputs.size()));
  std::set<std::int64_t> seen;
  for (std::int64_t size : sizes) {
    if (size < 1 || size >= plan.full)
      throw InvalidConfig(plan.axes.param, "a sub-batch size must be in [1, " + std::to_string(plan.full - 1) + "] (" +
                                               plan.axes.param + " is " + std::to_string(plan.full) + "), got " +
                                               std::to_string(size));
    if (!seen.insert(size).second) throw InvalidConfig(plan.axes.param, "sub-batch size " + std::to_string(size) + " is named twice");
    Params sub = params;
    sub.set(plan.axes.param, size);
    Problem p = op.plan(sub);  // may throw InvalidConfig: a size the op cannot be planned at
    p.params = sub.values();
    with_precision(p, dtype, math);
    // The sub-batch's tensors must be the full ones cut along the axes; anything else is a wrong
    // OpDef::batch, which would compare unrelated rows.
    auto check = [&](const TensorDesc& whole, const TensorDesc& part, int axis) {
      Shape expected = whole.shape;
      if (axis >= 0) expected.at(static_cast<std::size_t>(axis)) = size;
      if (part.shape != expected)
        throw std::logic_error(op.name + ": at " + plan.axes.param + " = " + std::to_string(size) + ", " + part.name + " is " +
                               shape_string(part.shape) + ", not " + shape_string(expected) + " as its batch axis says");
    };
    for (std::size_t i = 0; i < full.inputs.size(); ++i) check(full.inputs[i], p.inputs[i], plan.axes.inputs[i]);
    check(full.output, p.output, plan.axes.output);
    plan.subs.push_back({size, 0, p});                           // the first rows
    plan.subs.push_back({size, plan.full - size, std::move(p)});  // the last: other neighbours and position
  }
  return plan;
}

HostTensor cut_rows(const HostTensor& t, int axis, std::int64_t offset, std::int64_t count) {
  const Strides st = strides_of(t.desc().shape, axis);
  if (offset < 0 || count < 0 || offset + count > st.rows) throw std::logic_error("rows outside the tensor " + t.desc().name);
  TensorDesc d = t.desc();
  d.shape[static_cast<std::size_t>(axis)] = count;
  HostTensor out(d);
  const std::size_t esize = dtype_size(d.dtype);
  const std::size_t block = static_cast<std::size_t>(count * st.inner) * esize;
  const auto* src = static_cast<const std::byte*>(t.data());
  auto* dst = static_cast<std::byte*>(out.data());
  for (std::int64_t o = 0; o < st.outer; ++o)
    std::memcpy(dst + static_cast<std::size_t>(o) * block,
                src + (static_cast<std::size_t>(o * st.rows + offset) * static_cast<std::size_t>(st.inner)) * esize, block);
  return out;
}

std::vector<HostTensor> sub_batch_inputs(const BatchPlan& plan, const SubBatch& sub, const std::vector<HostTensor>& full) {
  std::vector<HostTensor> out;
  out.reserve(full.size());
  for (std::size_t i = 0; i < full.size(); ++i) {
    const int axis = plan.axes.inputs[i];
    if (axis < 0) {
      HostTensor copy(full[i].desc());
      std::memcpy(copy.data(), full[i].data(), full[i].desc().bytes());
      out.push_back(std::move(copy));
    } else {
      out.push_back(cut_rows(full[i], axis, sub.offset, sub.size));
    }
  }
  return out;
}

bool InvarianceEvidence::tested() const {
  return std::any_of(subs.begin(), subs.end(), [](const SubBatchResult& s) { return s.error.empty(); });
}

bool InvarianceEvidence::invariant() const {
  return std::all_of(subs.begin(), subs.end(), [](const SubBatchResult& s) { return !s.error.empty() || s.differing == 0; });
}

std::vector<std::int64_t> InvarianceEvidence::sizes() const {
  std::vector<std::int64_t> out;
  for (const auto& s : subs)
    if (std::find(out.begin(), out.end(), s.size) == out.end()) out.push_back(s.size);
  return out;
}

std::vector<std::int64_t> InvarianceEvidence::differing() const {
  std::vector<std::int64_t> out;
  for (std::int64_t size : sizes()) {
    std::int64_t n = 0;
    for (const auto& s : subs)
      if (s.size == size && s.error.empty()) n += s.differing;
    out.push_back(n);
  }
  return out;
}

std::string InvarianceEvidence::to_json_text() const {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& s : subs) {
    nlohmann::json r = {{"size", s.size}, {"offset", s.offset}, {"elements", s.elements}, {"differing", s.differing}};
    if (!s.error.empty()) r["error"] = s.error;
    runs.push_back(std::move(r));
  }
  nlohmann::json j{{"param", param}, {"full", full}, {"subs", runs}};
  if (claim)
    j["claim"] = {{"determinism", to_string(claim->determinism)}, {"source", to_string(claim->source)}, {"reason", claim->reason}};
  return json_text(j);
}

InvarianceEvidence InvarianceEvidence::from_json_text(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    InvarianceEvidence e;
    e.param = j.at("param").get<std::string>();
    e.full = j.at("full").get<std::int64_t>();
    for (const auto& r : j.at("subs")) {
      SubBatchResult s;
      s.size = r.at("size").get<std::int64_t>();
      s.offset = r.at("offset").get<std::int64_t>();
      s.elements = r.at("elements").get<std::int64_t>();
      s.differing = r.at("differing").get<std::int64_t>();
      if (r.contains("error")) s.error = r.at("error").get<std::string>();
      e.subs.push_back(std::move(s));
    }
    if (j.contains("claim")) {
      const auto& c = j.at("claim");
      auto pick = [](const std::string& value, auto... options) {
        for (auto o : {options...})
          if (to_string(o) == value) return o;
        throw std::invalid_argument("unknown claim value " + value);
      };
      const std::string d = c.at("determinism").get<std::string>(), s = c.at("source").get<std::string>();
      e.claim = Claim{pick(d, Determinism::deterministic, Determinism::nondeterministic, Determinism::unknown),
                      pick(s, ClaimSource::design, ClaimSource::vendor_doc, ClaimSource::vendor_api), c.at("reason").get<std::string>()};
    }
    return e;
  } catch (const nlohmann::json::exception& ex) {
    throw std::invalid_argument(std::string("batch-invariance evidence is not what d9m writes: ") + ex.what());
  }
}

InvarianceEvidence combine(const std::vector<InvarianceEvidence>& runs) {
  InvarianceEvidence all;
  for (const auto& e : runs) {
    if (all.param.empty()) all.param = e.param, all.full = e.full;
    if (e.claim) all.claim = e.claim;  // the latest run's, as for the repeatability claim
    all.subs.insert(all.subs.end(), e.subs.begin(), e.subs.end());
  }
  // Sizes in ascending order, as a reader expects them, whatever order runs named them in.
  std::stable_sort(all.subs.begin(), all.subs.end(),
                   [](const SubBatchResult& a, const SubBatchResult& b) { return a.size < b.size; });
  return all;
}

std::string invariance_status(bool repeatable, const InvarianceEvidence& e) {
  if (!repeatable) return "Not guaranteed";
  if (!e.invariant()) return "Replay only";
  return e.tested() ? "Supported" : "Unverified";
}

}  // namespace d9m
