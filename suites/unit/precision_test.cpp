// The precision axis (DESIGN.md "Precision"): the 16-bit conversions and adds are IEEE's round to
// nearest even, checked against independent references (exact nearest-value searches over the values IEEE
// 754 defines); configs carry dtype and math into the problem, the config
// id, the inputs and the store; bad ones are usage errors naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "harness/core/catalog.h"
#include "harness/core/element_diff.h"
#include "harness/core/error.h"
#include "harness/core/inputs.h"
#include "harness/core/npy.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"
#include "kernels/common/counter_rng.h"
#include "kernels/common/half.h"
#include "scratch_dir.h"
#include "suites/unit/kernel_harness.h"

namespace d9m {
namespace {

float float_of(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The value of a half's bits, from IEEE 754's definition (exact in double): the reference the
// conversions are checked against, independent of the bit tricks under test and of the compiler
// (clang has no _Float16 on x86 before version 15).
double half_value(std::uint16_t b) {
  const int e = (b >> 10) & 31, m = b & 1023;
  const double magnitude = e == 0    ? std::ldexp(m, -24)
                           : e < 31 ? std::ldexp(1024 + m, e - 25)
                                    : std::numeric_limits<double>::infinity();
  return (b & 0x8000) ? -magnitude : magnitude;
}

float reference_half_to_float(std::uint16_t b) { return static_cast<float>(half_value(b)); }

// The half nearest to x (not NaN), ties to the even significand, by binary search over the
// ordered positive halves; from 65520 (the tie above the largest finite half, 65504, whose
// significand is odd) on, infinity.
std::uint16_t reference_half(double x) {
  const auto sign = static_cast<std::uint16_t>(std::signbit(x) ? 0x8000 : 0);
  const double a = std::fabs(x);
  if (a >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7c00);
  std::uint16_t lo = 0, hi = 0x7bff;  // the largest half <= a lies in [lo, hi]
  while (lo < hi) {
    const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (half_value(mid) <= a) lo = mid; else hi = static_cast<std::uint16_t>(mid - 1);
  }
  if (lo == 0x7bff) return static_cast<std::uint16_t>(sign | lo);  // between 65504 and the tie
  const double below = a - half_value(lo), above = half_value(static_cast<std::uint16_t>(lo + 1)) - a;  // exact
  const bool up = above < below || (above == below && (lo & 1));
  return static_cast<std::uint16_t>(sign | (up ? lo + 1 : lo));
}

// bfloat16 nearest to x (finite, in range), ties to the even significand, by search over the two
// candidates around x in exact double arithmetic: independent of the bit trick under test.
std::uint16_t reference_bfloat16(double x) {
  float f = static_cast<float>(x);  // only used to find the neighbourhood
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  std::uint16_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int d = -2; d <= 2; ++d) {
    const auto cand = static_cast<std::uint16_t>(static_cast<int>(u >> 16) + d);
    const double v = static_cast<double>(float_of(static_cast<std::uint32_t>(cand) << 16));
    if (std::isnan(v)) continue;
    const double err = std::fabs(v - x);
    if (err < best_err || (err == best_err && (cand & 1) == 0)) best = cand, best_err = err;
  }
  return best;
}

bool is_half_nan(std::uint16_t b) { return (b & 0x7c00) == 0x7c00 && (b & 0x3ff); }

TEST(Precision, HalfFromFloatRoundsToNearestEvenLikeTheReference) {
  // Every 251st bit pattern (17 million, all exponents), then every tie between two halves and
  // its neighbours (the cases a wrong rounding rule gets wrong).
  std::uint64_t checked = 0;
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 251) {
    const float f = float_of(static_cast<std::uint32_t>(u));
    const std::uint16_t got = half_from_float(f).bits;
    if (std::isnan(f)) {
      ASSERT_EQ(got & 0x7fffu, 0x7e00u) << std::hex << u;
      continue;
    }
    ASSERT_EQ(got, reference_half(f)) << std::hex << "float bits 0x" << u;
    ++checked;
  }
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // positive finite halves, and their negatives
    for (std::uint32_t sign : {0u, 0x8000u}) {
      const float lo = reference_half_to_float(static_cast<std::uint16_t>(h | sign));
      const float hi = reference_half_to_float(static_cast<std::uint16_t>((h + 1) | sign));
      const float mid = static_cast<float>((static_cast<double>(lo) + static_cast<double>(hi)) / 2);  // exact in float
      for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 2 * mid)}) {
        ASSERT_EQ(half_from_float(f).bits, reference_half(f)) << "near the tie above half 0x" << std::hex << (h | sign);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 17000000u);
}

TEST(Precision, HalfToFloatIsExactAndRoundTrips) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = to_float(Half{h});
    if (is_half_nan(h)) {
      EXPECT_TRUE(std::isnan(f));
      continue;
    }
    ASSERT_EQ(std::memcmp(&f, &(const float&)reference_half_to_float(h), 4), 0) << std::hex << b;
    ASSERT_EQ(half_from_float(f).bits, h) << std::hex << b;
  }
}

TEST(Precision, BFloat16FromFloatRoundsToNearestEven) {
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 4093) {
    const float f = float_of(static_cast<std::uint32_t>(u));
    const std::uint16_t got = bfloat16_from_float(f).bits;
    if (std::isnan(f)) {
      ASSERT_EQ(got & 0x7fffu, 0x7fc0u);
      continue;
    }
    if ((u & 0x7fffffffu) >= 0x7f7f8000u) {  // from the tie above the largest finite bfloat16 (0x7f7f): infinity
      ASSERT_EQ(got & 0x7fffu, 0x7f80u) << std::hex << u;
      continue;
    }
    ASSERT_EQ(got, reference_bfloat16(f)) << std::hex << "float bits 0x" << u;
  }
  // Ties: halfway between consecutive bfloat16 values goes to the even one.
  EXPECT_EQ(bfloat16_from_float(float_of(0x3f808000u)).bits, 0x3f80u);  // 1 + 2^-8: between 0x3f80 and 0x3f81
  EXPECT_EQ(bfloat16_from_float(float_of(0x3f818000u)).bits, 0x3f82u);  // between 0x3f81 and 0x3f82
  EXPECT_EQ(bfloat16_from_float(float_of(0x7f7fffffu)).bits, 0x7f80u);  // FLT_MAX rounds to infinity
  EXPECT_EQ(bfloat16_from_float(float_of(0x00018000u)).bits, 0x0002u);  // a subnormal tie, to even
}

TEST(Precision, SixteenBitAddsRoundOnceLikeAnExactSumRounded) {
  // add(a, b) must be the exact sum rounded once: the exact sum of two halves (or bfloat16s) is a
  // double, and the reference rounds that double directly.
  const CounterRng rng(3, 0);
  for (std::uint64_t i = 0; i < 2000000; ++i) {
    const auto a = static_cast<std::uint16_t>(rng.bits(i)), b = static_cast<std::uint16_t>(rng.bits(i) >> 16);
    if (is_half_nan(a) || is_half_nan(b)) continue;
    const double exact = static_cast<double>(to_float(Half{a})) + static_cast<double>(to_float(Half{b}));
    if (std::isnan(exact)) continue;  // inf - inf
    std::uint16_t want = reference_half(exact);
    if (exact == 0) want &= 0x7fff, want |= static_cast<std::uint16_t>(add(Half{a}, Half{b}).bits & 0x8000);  // the sign of a zero sum is IEEE's, not double's
    ASSERT_EQ(add(Half{a}, Half{b}).bits, want) << std::hex << a << " + " << b;

    const BFloat16 x{a}, y{b};
    const double bexact = static_cast<double>(to_float(x)) + static_cast<double>(to_float(y));
    if (std::isnan(bexact) || std::isinf(bexact) || std::fabs(bexact) > 3.38e38 || bexact == 0) continue;
    ASSERT_EQ(add(x, y).bits, reference_bfloat16(bexact)) << std::hex << a << " + " << b;
  }
}

TEST(Precision, ElementDiffsMeasureUlpsInTheElementsType) {
  const Half h1 = half_from_float(1.0f), h2{static_cast<std::uint16_t>(h1.bits + 3)};
  ElementDiff e;
  ASSERT_TRUE(diff_element(DType::f16, &h1, &h2, 0, e));
  EXPECT_EQ(e.ulp, 3u);
  EXPECT_DOUBLE_EQ(e.abs_diff, 3 * 0x1p-10);
  const Half pz{0x0000}, nz{0x8000};
  ASSERT_TRUE(diff_element(DType::f16, &pz, &nz, 0, e));  // bits differ, values do not
  EXPECT_EQ(e.ulp, 0u);
  const double d1 = -1e300, d2 = 1e300;
  ASSERT_TRUE(diff_element(DType::f64, &d1, &d2, 0, e));
  EXPECT_GT(e.ulp, std::uint64_t{1} << 62);  // across zero: no overflow
  const BFloat16 b1{0x3f80}, b2{0x3f80};
  EXPECT_FALSE(diff_element(DType::bf16, &b1, &b2, 0, e));
}

class PrecisionConfigTest : public test::ScratchDirTest {
 protected:
  PrecisionConfigTest() : ScratchDirTest("precision") {}

  static std::string usage_error(const std::string& config_fields) {
    const std::string text = R"({"schema": "d9m.catalog/1", "configs": [{"op": "scatter_add", "name": "c",
        "params": {"rows": 8, "depth": 2, "updates": 16})" + config_fields + "}]}";
    try {
      parse_catalog(text, "cat.json", Registry::global());
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::usage);
      return e.what();
    }
    ADD_FAILURE() << "accepted " << config_fields;
    return "";
  }
};

TEST_F(PrecisionConfigTest, ConfigsNameTheirDtypeAndMathAndBadOnesAreUsageErrors) {
  const CatalogConfig f32 = test::config("scatter_add", {{"rows", 8}, {"depth", 2}, {"updates", 16}});
  const CatalogConfig f16 = test::config("scatter_add", {{"rows", 8}, {"depth", 2}, {"updates", 16}}, "f16");
  EXPECT_EQ(f32.problem.dtype, DType::f32);
  EXPECT_EQ(f16.problem.dtype, DType::f16);
  EXPECT_EQ(f16.problem.output.dtype, DType::f16);
  EXPECT_EQ(f16.problem.inputs[0].dtype, DType::f16);
  EXPECT_EQ(f16.problem.inputs[1].dtype, DType::i32);  // indices stay int32
  EXPECT_EQ(f16.problem.output.bytes(), 8u * 2 * 2);
  EXPECT_NE(f16.config_id, f32.config_id);
  // A config at the default precision keeps the id it had before the precision axis (the one in
  // reports/h100-2026-11-23), so earlier stores and baselines still name the same configs.
  EXPECT_EQ(test::config("scatter_add", {{"rows", 4096}, {"depth", 8}, {"updates", 4096}}).config_id, "c8331363afae7d5c");

  EXPECT_NE(usage_error(R"(, "dtype": "f8")").find("configs[0].dtype: scatter_add runs in \"f32\", \"f16\", \"bf16\", \"f64\", got \"f8\""),
            std::string::npos);
  EXPECT_NE(usage_error(R"(, "dtype": 16)").find("configs[0].dtype"), std::string::npos);
  EXPECT_NE(usage_error(R"(, "math": "tf32")").find("configs[0].math: scatter_add offers the math modes \"default\", got \"tf32\""),
            std::string::npos);
  // A math mode of f32 arithmetic at another dtype (found by review: a "matmul f64 tf32" row).
  const std::string mm_f64 = R"({"schema": "d9m.catalog/1", "configs": [{"op": "matmul", "name": "m",
        "params": {"m": 4, "n": 4, "k": 8}, "dtype": "f64", "math": "tf32"}]})";
  try {
    parse_catalog(mm_f64, "cat.json", Registry::global());
    ADD_FAILURE() << "tf32 at f64 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("configs[0].math: \"tf32\" is a mode of f32 arithmetic, and this config's dtype is \"f64\""),
              std::string::npos)
        << e.what();
  }
  const std::string conv = R"({"schema": "d9m.catalog/1", "configs": [{"op": "conv2d", "name": "c",
        "params": {"n": 1, "h": 4, "w": 4, "ci": 3, "co": 2, "kh": 2, "kw": 2}, "dtype": "f64"}]})";
  try {
    parse_catalog(conv, "cat.json", Registry::global());
    ADD_FAILURE() << "conv2d has no f64 variants";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d runs in \"f32\", \"f16\", \"bf16\", got \"f64\""), std::string::npos) << e.what();
  }
}

TEST_F(PrecisionConfigTest, InputsAtAPrecisionAreTheF32InputsRoundedAndF32IsF64Rounded) {
  const nlohmann::json params = {{"rows", 64}, {"depth", 4}, {"updates", 512}, {"index_range", 8}};
  const CatalogConfig f32 = test::config("scatter_add", params);
  const auto base = make_inputs(*f32.op, f32.problem, 9);
  for (const char* name : {"f16", "bf16", "f64"}) {
    const CatalogConfig cc = test::config("scatter_add", params, name);
    const auto in = make_inputs(*cc.op, cc.problem, 9);
    ASSERT_EQ(in.size(), base.size());
    EXPECT_EQ(in[1].desc().dtype, DType::i32);
    EXPECT_EQ(std::memcmp(in[1].data(), base[1].data(), base[1].desc().bytes()), 0) << "indices are not rounded";
    for (std::size_t i = 0; i < static_cast<std::size_t>(base[2].desc().numel()); ++i) {
      const float x = base[2].as<float>()[i];
      switch (cc.problem.dtype) {
        case DType::f16: ASSERT_EQ(in[2].as<Half>()[i].bits, half_from_float(x).bits); break;
        case DType::bf16: ASSERT_EQ(in[2].as<BFloat16>()[i].bits, bfloat16_from_float(x).bits); break;
        default: ASSERT_EQ(static_cast<float>(in[2].as<double>()[i]), x) << "the f32 input is the f64 one rounded"; break;
      }
    }
    EXPECT_NE(input_digest(in), input_digest(base)) << name;
  }
}

// Why f64 inputs carry bits below float's: the same updates summed in opposite orders give the
// same bits when they are the f32 values converted exactly (every such sum is exact in double),
// and different bits as d9m's f64 inputs, so an atomic variant's f64 row can show its race.
TEST_F(PrecisionConfigTest, F64InputsHaveBitsBelowFloatsSoF64SumsDependOnOrder) {
  const nlohmann::json params = {{"rows", 8}, {"depth", 1}, {"updates", 8192}, {"index_range", 8}};
  const CatalogConfig f32 = test::config("scatter_add", params), f64 = test::config("scatter_add", params, "f64");
  const auto narrow = make_inputs(*f32.op, f32.problem, 3), wide = make_inputs(*f64.op, f64.problem, 3);
  const auto n = static_cast<std::size_t>(narrow[2].desc().numel());
  auto sums = [&](auto value) {
    double forward = 0, backward = 0;
    for (std::size_t i = 0; i < n; ++i) forward += value(i), backward += value(n - 1 - i);
    return std::pair{forward, backward};
  };
  const auto converted = sums([&](std::size_t i) { return static_cast<double>(narrow[2].as<float>()[i]); });
  EXPECT_EQ(converted.first, converted.second) << "f32 values converted exactly sum exactly in double";
  const auto d9m_f64 = sums([&](std::size_t i) { return wide[2].as<double>()[i]; });
  EXPECT_NE(d9m_f64.first, d9m_f64.second) << "d9m's f64 inputs must make the order show";
  std::size_t below_float = 0;
  for (std::size_t i = 0; i < n; ++i) below_float += wide[2].as<double>()[i] != narrow[2].as<float>()[i];
  EXPECT_GT(below_float, n * 99 / 100);
}

TEST(Precision, F64InputsRoundToTheirFloatKeepOrderAndEquality) {
  std::vector<float> xs = {1.0f, -1.0f, 2.0f, 0x1p-23f, -0x1p-23f, 0x1p-126f, 0x1p-149f, 0.75f, 3.0f,
                           std::nextafter(1.0f, 0.0f), std::nextafter(1.0f, 2.0f), 65504.0f, -0x1p100f};
  const CounterRng rng(5, 0);
  for (std::uint64_t i = 0; i < 100000; ++i) xs.push_back(rng.unit_symmetric(i) * (i % 2 ? 1.0f : 0x1p-40f));
  for (float x : xs) {
    const double w = f64_input_from_f32(x);
    ASSERT_EQ(static_cast<float>(w), x) << x;
    ASSERT_EQ(f64_input_from_f32(x), w) << "a function of the value";
    // Neighbours on both sides map below and above: distinct floats keep their order.
    ASSERT_LT(f64_input_from_f32(std::nextafter(x, -INFINITY)), w) << x;
    ASSERT_GT(f64_input_from_f32(std::nextafter(x, INFINITY)), w) << x;
  }
  EXPECT_EQ(f64_input_from_f32(0.0f), 0.0);
  EXPECT_TRUE(std::signbit(f64_input_from_f32(-0.0f)));
  EXPECT_EQ(f64_input_from_f32(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(f64_input_from_f32(NAN)));
}

TEST_F(PrecisionConfigTest, NpyFilesNameTheDtype) {
  for (auto [dtype, descr] : {std::pair{DType::f16, "<f2"}, {DType::bf16, "<u2"}, {DType::f64, "<f8"}, {DType::f32, "<f4"}}) {
    const TensorDesc d{"x", dtype, {3}};
    std::vector<unsigned char> bytes(d.bytes(), 0x11);
    write_npy(path("x.npy"), d, bytes.data());
    const std::string file = contents(path("x.npy"));
    EXPECT_NE(file.find(std::string("'descr': '") + descr + "'"), std::string::npos) << file;
    EXPECT_EQ(file.size() % 64, d.bytes() % 64);  // the header is padded to 64 bytes, then the data
  }
}

// The store keeps a case's precision, its id covers it, and an edited dtype is caught.
TEST_F(PrecisionConfigTest, TheStoreKeepsThePrecisionUnderTheCaseId) {
  const std::string p = path("s.sqlite");
  {
    Store s = Store::open(p, Store::Mode::read_write);
    RunInfo info{random_run_id(), utc_now(), "h", "[]", "[]", "cat", 2, 1, "plan"};
    const std::string run = s.begin_run(fingerprint_from_json({{"k", 1}}), info);
    CaseRecord rec{"", "scatter_add", "cpu.serial", "cpu", "c", "cid", "{}", 1, "in", "float16", "[1]", "f16", "default"};
    rec.id = Store::case_id(rec);
    CaseRecord f32 = rec;
    f32.dtype = "f32", f32.output_dtype = "float16";
    EXPECT_NE(Store::case_id(f32), rec.id);
    const CaseRunRecord cr{Status::deterministic, "", "deterministic", "design", "r", "", 2, 1, 5, 5, "reference"};
    s.put_case(run, rec, cr, {{0, "d", 5, std::nullopt}, {1, "d", 5, std::nullopt}});
    s.finish_run(run, "complete");
  }
  {
    Store s = Store::open(p, Store::Mode::read_only);
    EXPECT_TRUE(verify_store(s).problems.empty());
    sql::Statement q(s.db(), "SELECT dtype, math FROM cases");
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.text(0), "f16");
    EXPECT_EQ(q.text(1), "default");
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "UPDATE cases SET dtype = 'bf16'", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  Store s = Store::open(p, Store::Mode::read_only);
  const auto problems = verify_store(s).problems;
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems.front().find("id does not match its content"), std::string::npos) << problems.front();
}

// The conv backprops at f16 and bf16 multiply and sum in float and round each output once (as
// cuDNN with its float compute type): bit for bit the f32 op on the same (rounded) values, rounded.
TEST(PrecisionSemantics, ConvBackpropsAtHalfSumInFloatAndRoundOnce) {
  const nlohmann::json params = {{"n", 2}, {"h", 8}, {"w", 8}, {"ci", 4}, {"co", 8}, {"kh", 3}, {"kw", 3}};
  for (const std::string op : {"conv2d_bwd_data", "conv2d_bwd_filter"})
    for (const std::string dtype : {"f16", "bf16"}) {
      const CatalogConfig half = test::config(op, params, dtype), f32 = test::config(op, params);
      const auto in_half = make_inputs(*half.op, half.problem, 1);
      const auto in_f32 = test::inputs_from(f32.problem, {test::values(in_half[0]), test::values(in_half[1])});
      const auto wide = test::values(test::run_variant(op, "cpu.serial", f32.problem, in_f32));
      const HostTensor out = test::run_variant(op, "cpu.serial", half.problem, in_half);
      ASSERT_EQ(out.desc().dtype, half.problem.dtype);
      int differ = 0;
      for (std::size_t i = 0; i < wide.size(); ++i) {
        const auto f = static_cast<float>(wide[i]);
        const std::uint16_t want = dtype == "f16" ? half_from_float(f).bits : bfloat16_from_float(f).bits;
        const std::uint16_t got = dtype == "f16" ? out.as<Half>()[i].bits : out.as<BFloat16>()[i].bits;
        differ += want != got;
      }
      EXPECT_EQ(differ, 0) << op << " in " << dtype;
    }
}

// crop_and_resize types its tensors as TensorFlow does: at f16 the image is f16, boxes and crops
// stay f32, and the crops are the f32 op's on the rounded image, bit for bit; grad_image's output
// takes the dtype, grad_boxes' stays f32.
TEST(PrecisionSemantics, CropAndResizeKeepsTensorFlowsFloat32Tensors) {
  const nlohmann::json params = {{"batch", 2}, {"h", 9}, {"w", 9}, {"c", 3}, {"boxes", 5}, {"crop_h", 4}, {"crop_w", 4}};
  const CatalogConfig half = test::config("crop_and_resize", params, "f16"), f32 = test::config("crop_and_resize", params);
  EXPECT_EQ(half.problem.inputs[0].dtype, DType::f16);
  EXPECT_EQ(half.problem.inputs[1].dtype, DType::f32);
  EXPECT_EQ(half.problem.output.dtype, DType::f32);
  const auto in_half = make_inputs(*half.op, half.problem, 1);
  const auto in_f32 =
      test::inputs_from(f32.problem, {test::values(in_half[0]), test::values(in_half[1]), test::values(in_half[2])});
  EXPECT_EQ(test::digest(test::run_variant("crop_and_resize", "cpu.serial", half.problem, in_half)),
            test::digest(test::run_variant("crop_and_resize", "cpu.serial", f32.problem, in_f32)));
  const nlohmann::json grad_params = {{"batch", 2}, {"h", 9}, {"w", 9}, {"c", 3}, {"boxes", 5}, {"crop_h", 4}, {"crop_w", 4}};
  const CatalogConfig image = test::config("crop_and_resize_grad_image", grad_params, "bf16");
  EXPECT_EQ(image.problem.inputs[0].dtype, DType::f32);  // grads
  EXPECT_EQ(image.problem.output.dtype, DType::bf16);
  const CatalogConfig boxes = test::config("crop_and_resize_grad_boxes", grad_params, "f64");
  EXPECT_EQ(boxes.problem.inputs[1].dtype, DType::f64);  // image
  EXPECT_EQ(boxes.problem.output.dtype, DType::f32);
}

}  // namespace
}  // namespace d9m
