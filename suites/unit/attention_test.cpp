// The attention family's own properties (kernels/attention/attention.h): the
// forward against the textbook softmax, the backward against the forward's numerical gradient,
// the causal mask, and the ordered variants' bits on any thread count.
#include <cmath>
#include <limits>

#include "kernels/attention/attention.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

using test::config;
using test::run_variant;
using test::values;

nlohmann::json small(bool causal) {
  return {{"batch", 1}, {"heads", 2}, {"seq_q", 5}, {"seq_kv", 7}, {"head_dim", 3}, {"causal", causal}};
}

// o = softmax(q k^T / sqrt(D)) v in long double, with the library's exp.
std::vector<long double> textbook_forward(const attention::Geometry& g, const std::vector<double>& q, const std::vector<double>& k,
                                          const std::vector<double>& v) {
  std::vector<long double> o(static_cast<std::size_t>(g.rows() * g.dim));
  for (std::int64_t r = 0; r < g.rows(); ++r) {
    const std::int64_t bh = r / g.seq_q, i = r % g.seq_q;
    std::vector<long double> s;
    for (std::int64_t j = 0; j < g.seq_kv && !(g.causal && j > i); ++j) {  // the mask, written out
      long double dot = 0;
      for (std::int64_t d = 0; d < g.dim; ++d) dot += q[r * g.dim + d] * k[(bh * g.seq_kv + j) * g.dim + d];
      s.push_back(dot / std::sqrt(static_cast<long double>(g.dim)));
    }
    long double total = 0;
    for (auto& x : s) total += (x = std::exp(x));
    for (std::int64_t d = 0; d < g.dim; ++d)
      for (std::size_t j = 0; j < s.size(); ++j) o[r * g.dim + d] += s[j] / total * v[(bh * g.seq_kv + j) * g.dim + d];
  }
  return o;
}

TEST(Attention, ForwardIsTheTextbookSoftmax) {
  for (bool causal : {false, true}) {
    const auto cc = config("sdpa", small(causal), "f64");
    const auto in = make_inputs(*cc.op, cc.problem, 11);
    const auto o = values(run_variant("sdpa", "cpu.serial", cc.problem, in));
    const auto want = textbook_forward(cc.problem.geom<attention::Geometry>(), values(in[0]), values(in[1]), values(in[2]));
    for (std::size_t x = 0; x < o.size(); ++x) EXPECT_NEAR(o[x], static_cast<double>(want[x]), 1e-14) << causal << " " << x;
  }
}

TEST(Attention, CausalRowZeroIsValueRowZero) {
  // Query 0 sees key 0 alone: softmax 1, o_0 = v_0 exactly, at every dtype.
  for (const char* dtype : {"f32", "f16", "bf16", "f64"}) {
    const auto cc = config("sdpa", small(true), dtype);
    const auto in = make_inputs(*cc.op, cc.problem, 3);
    const auto o = values(run_variant("sdpa", "cpu.serial", cc.problem, in));
    const auto v = values(in[2]);
    const auto& g = cc.problem.geom<attention::Geometry>();
    for (std::int64_t bh = 0; bh < g.heads_total(); ++bh)
      for (std::int64_t d = 0; d < g.dim; ++d)
        EXPECT_EQ(o[(bh * g.seq_q) * g.dim + d], v[(bh * g.seq_kv) * g.dim + d]) << dtype << " head " << bh;
  }
}

// L = sum(dO . o(q, k, v)): its central differences in f64 must match every CPU variant's dQ, dK
// and dV: on the small shapes, with more queries than keys under the causal mask, and with
// three key blocks (the atomic and ordered variants' split of dQ).
TEST(Attention, BackwardIsTheGradientOfTheForward) {
  std::vector<nlohmann::json> shapes = {small(false), small(true),
                                        {{"batch", 1}, {"heads", 2}, {"seq_q", 7}, {"seq_kv", 5}, {"head_dim", 3}, {"causal", true}},
                                        {{"batch", 1}, {"heads", 1}, {"seq_q", 6}, {"seq_kv", 2 * attention::kKeyBlock + 9}, {"head_dim", 2}}};
  for (const auto& shape : shapes)
    for (const char* variant : {"cpu.serial", "cpu.ordered", "cpu.atomic"}) {
    SCOPED_TRACE(shape.dump() + " " + variant);
    const bool causal = shape.value("causal", false);
    const auto fwd = config("sdpa", shape, "f64");
    const auto bwd = config("sdpa_bwd", shape, "f64");
    const auto& g = bwd.problem.geom<attention::Geometry>();
    const auto in = make_inputs(*bwd.op, bwd.problem, 5);
    const auto grads = values(run_variant("sdpa_bwd", variant, bwd.problem, in, 3));
    const auto d_o = values(in[3]);
    auto fin = make_inputs(*bwd.op, bwd.problem, 5);  // the same q, k, v (and dO, dropped): the forward's inputs
    fin.pop_back();
    auto loss = [&] {
      const auto o = values(run_variant("sdpa", "cpu.serial", fwd.problem, fin, 1));
      long double l = 0;
      for (std::size_t x = 0; x < o.size(); ++x) l += o[x] * d_o[x];
      return l;
    };
    const double h = 1e-6;
    double worst = 0;
    for (int t = 0; t < 3; ++t) {
      const std::int64_t seq = t == 0 ? g.seq_q : g.seq_kv, offset = t == 0 ? 0 : t == 1 ? g.seq_q : g.seq_q + g.seq_kv;
      for (std::int64_t x = 0; x < fin[static_cast<std::size_t>(t)].desc().numel(); ++x) {
        double& e = fin[static_cast<std::size_t>(t)].as<double>()[x];
        const double keep = e;
        e = keep + h;
        const long double up = loss();
        e = keep - h;
        const long double down = loss();
        e = keep;
        const double numeric = static_cast<double>((up - down) / (2 * h));
        const std::int64_t bh = x / (seq * g.dim), row = x / g.dim % seq, d = x % g.dim;
        const double analytic = grads[static_cast<std::size_t>((bh * g.packed_rows() + offset + row) * g.dim + d)];
        worst = std::max(worst, std::fabs(numeric - analytic));
        EXPECT_NEAR(analytic, numeric, 1e-7) << "causal " << causal << " tensor " << t << " element " << x;
      }
    }
    EXPECT_LT(worst, 1e-7);
    }
}

TEST(Attention, OrderedBackwardGivesTheSameBitsOnAnyThreadCount) {
  const auto cc = config("sdpa_bwd", {{"batch", 2}, {"heads", 2}, {"seq_q", 160}, {"seq_kv", 200}, {"head_dim", 8}, {"causal", true}});
  const auto in = make_inputs(*cc.op, cc.problem, 9);
  const std::string one = test::digest(run_variant("sdpa_bwd", "cpu.ordered", cc.problem, in, 1));
  for (unsigned t : {2u, 5u}) EXPECT_EQ(test::digest(run_variant("sdpa_bwd", "cpu.ordered", cc.problem, in, t)), one) << t;
  // dK and dV are the serial ones' bits in every variant; only dQ is split into key blocks.
  const auto serial = values(run_variant("sdpa_bwd", "cpu.serial", cc.problem, in));
  const auto ordered = values(run_variant("sdpa_bwd", "cpu.ordered", cc.problem, in, 3));
  const auto& g = cc.problem.geom<attention::Geometry>();
  std::int64_t dq_differs = 0;
  for (std::int64_t x = 0; x < static_cast<std::int64_t>(serial.size()); ++x) {
    const bool dq = x / g.dim % g.packed_rows() < g.seq_q;
    if (!dq) EXPECT_EQ(serial[static_cast<std::size_t>(x)], ordered[static_cast<std::size_t>(x)]) << x;
    else dq_differs += serial[static_cast<std::size_t>(x)] != ordered[static_cast<std::size_t>(x)];
  }
  EXPECT_GT(dq_differs, 0) << "rows past key 64 see several key blocks, summed apart: they should round differently somewhere";
  // ...but by rounding only.
  double max_ref = 0, worst = 0;
  for (std::size_t x = 0; x < serial.size(); ++x)
    max_ref = std::max(max_ref, std::fabs(serial[x])), worst = std::max(worst, std::fabs(serial[x] - ordered[x]));
  EXPECT_LE(worst, allowed_difference(*cc.op, cc.problem, max_ref));
  EXPECT_LT(worst, 1e-5 * max_ref);
}

// cpu.gather runs every phase of the serial backward on the worker threads, dQ included (one task
// per query row, all keys in ascending order): cpu.serial's bits, dQ too, on any thread count.
TEST(Attention, GatherBackwardHasTheSerialBitsOnAnyThreadCount) {
  for (const bool causal : {false, true})
    for (const char* dtype : {"f32", "bf16", "f64"}) {
      const auto cc = config("sdpa_bwd", {{"batch", 2}, {"heads", 3}, {"seq_q", 70}, {"seq_kv", 90}, {"head_dim", 8}, {"causal", causal}},
                             dtype);
      const auto in = make_inputs(*cc.op, cc.problem, 4);
      const std::string serial = test::digest(run_variant("sdpa_bwd", "cpu.serial", cc.problem, in));
      for (unsigned t : {1u, 2u, 3u, 7u})
        EXPECT_EQ(test::digest(run_variant("sdpa_bwd", "cpu.gather", cc.problem, in, t)), serial) << dtype << " causal " << causal << " threads " << t;
    }
}

// The half-precision rule must reject what a wrong kernel gives: the reference with its largest
// output zeroed at f16 and bf16, or scaled by 1.05 at f16. The f32 rule scaled by the unit
// roundoff, which this replaces, accepted both.
TEST(Attention, HalfPrecisionToleranceRejectsAWrongOutput) {
  for (const char* dtype : {"f16", "bf16"})
    for (const char* op : {"sdpa", "sdpa_bwd"}) {
      SCOPED_TRACE(std::string(op) + " " + dtype);
      const auto cc = config(op, {{"batch", 1}, {"heads", 2}, {"seq_q", 64}, {"seq_kv", 128}, {"head_dim", 16}}, dtype);
      const auto in = make_inputs(*cc.op, cc.problem, 4);
      const auto ref = values(run_variant(op, "cpu.serial", cc.problem, in));
      const auto ordered = values(run_variant(op, "cpu.ordered", cc.problem, in, 3));
      double max_ref = 0, worst = 0;
      for (std::size_t x = 0; x < ref.size(); ++x)
        max_ref = std::max(max_ref, std::fabs(ref[x])), worst = std::max(worst, std::fabs(ordered[x] - ref[x]));
      const double allowed = allowed_difference(*cc.op, cc.problem, max_ref);
      EXPECT_LE(worst, allowed) << "the ordered variant is right";
      EXPECT_GT(max_ref, allowed) << "zeroing the largest output must fail";
      if (std::string(dtype) == "f16") {
        EXPECT_GT(0.05 * max_ref, allowed) << "a 5% error on it must fail";
      }
      EXPECT_GT(tolerance_for(*cc.op, cc.problem) * (1 + max_ref), max_ref) << "the old rule accepted a zeroed output";
    }
}

}  // namespace
}  // namespace d9m
