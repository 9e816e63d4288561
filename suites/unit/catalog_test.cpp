// The catalogue: the default one is valid, and every kind of malformed catalogue is refused
// with a usage error that says where and what was expected.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "harness/core/catalog.h"
#include "harness/core/embedded.h"
#include "harness/core/error.h"
#include "harness/core/quick_profile.h"
#include "kernels/attention/attention.h"
#include "suites/unit/source_dir.h"

namespace d9m {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_catalog(text, "cat.json", Registry::global());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

std::string with_config(const std::string& config) {
  return R"({"schema": "d9m.catalog/1", "configs": [)" + config + "]}";
}

TEST(Catalog, DefaultCatalogueIsValidAndCoversEveryOp) {
  const Catalog c = default_catalog(Registry::global());
  EXPECT_EQ(c.digest.size(), 64u);
  for (const auto& op : Registry::global().ops()) {
    bool found = false;
    for (const auto& cc : c.configs) found |= cc.op == &op;
    EXPECT_TRUE(found) << op.name << " has no config in the default catalogue";
  }
}

TEST(Catalog, QuickProfileRunsEveryVariantTheDefaultOneRunsOnConfigsOfTheDefaultOne) {
  const Registry& r = Registry::global();
  const Catalog all = default_catalog(r);
  const Catalog quick = builtin_catalog("quick", r);
  EXPECT_EQ(quick.source, "<quick catalogue>");
  EXPECT_NE(quick.digest, all.digest);
  EXPECT_LT(quick.configs.size(), all.configs.size() / 2) << "quick is meant to be a small part of the default catalogue";
  // The same configs (same ids, so their evidence is the same cases), each marked quick.
  std::set<std::string> ids;
  for (const auto& cc : all.configs)
    if (cc.quick) ids.insert(cc.op->name + "/" + cc.name + "/" + cc.config_id);
  std::set<std::string> quick_ids;
  for (const auto& cc : quick.configs) quick_ids.insert(cc.op->name + "/" + cc.name + "/" + cc.config_id);
  EXPECT_EQ(ids, quick_ids);
  // Every (op, variant) case of the default catalogue has a quick config, and every op's batch
  // invariance check too: a variant CI never runs could break unseen.
  for (const auto& cc : all.configs)
    for (const auto* v : r.variants_of(cc.op->name)) {
      if (!cc.selects(*v)) continue;
      bool covered = false;
      for (const auto& q : quick.configs) covered |= q.op == cc.op && q.selects(*v);
      EXPECT_TRUE(covered) << cc.op->name << " " << v->name << " is in no quick config";
    }
  for (const auto& cc : all.configs) {
    if (!cc.batch) continue;
    bool covered = false;
    for (const auto& q : quick.configs) covered |= q.op == cc.op && q.batch.has_value();
    EXPECT_TRUE(covered) << cc.op->name << ": no quick config checks batch invariance";
  }
  EXPECT_EQ(builtin_catalog("default", r).digest, all.digest);
}

// dQ of attention's backward is a sum over blocks of kKeyBlock keys (kernels/attention/attention.h):
// at most one block per query row, the atomic variants add once onto zero and cannot race, and
// the ordered ones order nothing. CI certifies the quick profile, so its configs must have rows
// that see keys of two blocks or more (causal masks are top-left aligned: row i sees i + 1 keys).
TEST(Catalog, QuickAttentionBackwardConfigsHaveRowsOverSeveralKeyBlocks) {
  int checked = 0;
  for (const auto& cc : builtin_catalog("quick", Registry::global()).configs) {
    if (cc.op->name != "sdpa_bwd") continue;
    const auto& p = cc.params_json;
    attention::Geometry g;
    g.seq_q = p.at("seq_q").get<std::int64_t>();
    g.seq_kv = p.at("seq_kv").get<std::int64_t>();
    g.causal = p.value("causal", false);
    EXPECT_GT(g.keys_for(g.seq_q - 1), attention::kKeyBlock) << cc.name << ": no query row sees keys of two blocks";
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

// The quick catalogue is selected at build time (harness/tools/make_quick_catalog.cpp) and
// embedded: it must be what the selection gives on the embedded default catalogue, byte for byte,
// or the build step ran on another default.json or other code (and the digest would drift).
TEST(Catalog, EmbeddedQuickCatalogueIsTheDefaultOnesQuickSelection) {
  EXPECT_EQ(embedded::quick_catalog_json(), quick_catalog_text(embedded::default_catalog_json()));
  const std::string quick = embedded::quick_catalog_json();
  EXPECT_EQ(builtin_catalog("quick", Registry::global()).text, quick);
  EXPECT_THROW(quick_catalog_text(R"({"schema": "d9m.catalog/1", "configs": [{"op": "bias_add"}]})"), std::runtime_error);
  EXPECT_THROW(quick_catalog_text("[]"), std::runtime_error);
}

TEST(Catalog, ModelsProfileNamesTheSourceOfEveryShapeInF32AndBf16) {
  const Catalog models = builtin_catalog("models", Registry::global());
  EXPECT_EQ(models.source, "<models catalogue>");
  std::set<std::string> f32, bf16, networks;
  for (const auto& cc : models.configs) {
    EXPECT_FALSE(cc.model.empty()) << cc.op->name << "/" << cc.name << " does not say where its shape comes from";
    networks.insert(cc.model.substr(0, cc.model.find(' ')));
    const std::string id = cc.op->name + "/" + cc.name;
    if (cc.dtype == DType::f32) f32.insert(id);
    else if (cc.dtype == DType::bf16) bf16.insert(id.substr(0, id.size() - std::string("_bf16").size()));
    else ADD_FAILURE() << id << ": the models profile runs f32 and bf16";
  }
  EXPECT_EQ(f32, bf16) << "every shape in both precisions";
  EXPECT_EQ(networks, (std::set<std::string>{"BERT-base", "Mask", "ResNet-50", "U-Net", "ViT-B/16"}));
  // Only gradients the tagged network takes: Mask R-CNN stops the gradient to its boxes
  // (matterport's PyramidROIAlign: tf.stop_gradient before crop_and_resize).
  for (const auto& cc : models.configs)
    EXPECT_FALSE(cc.op->name == "crop_and_resize_grad_boxes") << cc.name << ": " << cc.model;
  // Real sizes: a ResNet-50 layer at batch 32 is in it.
  bool resnet = false;
  for (const auto& cc : models.configs) resnet |= cc.op->name == "conv2d_bwd_filter" && cc.params.integer("n") == 32;
  EXPECT_TRUE(resnet);
}

// Two configs with one id are one case run twice under two names (the models profile had ResNet-50's
// and ViT-B/16's ImageNet loss so): a shape that two sources share is one config naming both.
TEST(Catalog, NoBuiltInProfileHoldsTheSameCaseTwice) {
  for (const char* profile : {"default", "models"}) {
    std::map<std::string, std::string> seen;
    for (const auto& cc : builtin_catalog(profile, Registry::global()).configs) {
      const auto [at, fresh] = seen.emplace(cc.config_id, cc.op->name + "/" + cc.name);
      EXPECT_TRUE(fresh) << profile << ": " << cc.op->name << "/" << cc.name << " is " << at->second << " again";
    }
  }
}

TEST(Catalog, AModelTagIsANonEmptyString) {
  EXPECT_NO_THROW(parse_catalog(with_config(R"({"op": "bias_add", "name": "x", "params": {"n": 1, "h": 2, "w": 2, "c": 1}, "model": "ResNet-50 fc"})"),
                                "cat.json", Registry::global()));
  for (const char* bad : {R"("")", "1", "null", R"(["ResNet"])"}) {
    const std::string e = error_of(with_config(std::string(R"({"op": "bias_add", "name": "x", "params": {"n": 1, "h": 2, "w": 2, "c": 1}, "model": )") + bad + "}"));
    EXPECT_NE(e.find("configs[0].model"), std::string::npos) << e;
  }
}

// The evidence of earlier versions is filed under config ids: a config whose parameters are
// still those of the committed H100 audit keeps its id, also where an op gained a parameter since
// (ParamSpec::added_later), so baselines, diffs and merges across versions keep matching.
TEST(Catalog, ConfigsOfTheCommittedH100AuditKeepTheirIds) {
  std::ifstream in(test::source_path("reports/h100-2026-11-23/report.json"));
  ASSERT_TRUE(in) << "the committed audit's report.json";
  const nlohmann::json report = nlohmann::json::parse(in);
  std::map<std::pair<std::string, std::string>, const nlohmann::json*> audited;
  for (const auto& r : report["results"]) audited[{r["op"].get<std::string>(), r["config"].get<std::string>()}] = &r;
  int kept = 0;
  for (const auto& cc : default_catalog(Registry::global()).configs) {
    const auto it = audited.find({cc.op->name, cc.name});
    if (it == audited.end()) continue;
    const nlohmann::json& then = *it->second;
    bool same_params = true;
    for (const auto& [key, value] : then["params"].items()) same_params &= cc.params_json.contains(key) && cc.params_json[key] == value;
    if (!same_params || then.value("dtype", "f32") != std::string(dtype_short_name(cc.dtype))) continue;
    EXPECT_EQ(cc.config_id, then["config_id"].get<std::string>()) << cc.op->name << "/" << cc.name;
    ++kept;
  }
  EXPECT_GE(kept, 25) << "the audited configs are in the default catalogue (31 at this writing)";
}

TEST(Catalog, AParameterAddedLaterStaysOutOfTheIdAtItsDefault) {
  const auto parse = [](const std::string& extra) {
    return parse_catalog(with_config(R"({"op": "maxpool2d_bwd", "name": "x", "params": {"n": 1, "h": 4, "w": 4, "c": 1, "ksize_h": 2, "ksize_w": 2, "stride_h": 1, "stride_w": 1)" +
                                     extra + "}}"),
                         "cat.json", Registry::global())
        .configs[0];
  };
  const CatalogConfig absent = parse(""), zero = parse(R"(, "levels": 0)"), three = parse(R"(, "levels": 3)");
  EXPECT_EQ(absent.config_id, zero.config_id);
  EXPECT_FALSE(zero.params_json.contains("levels"));
  EXPECT_EQ(zero.params.integer("levels"), 0);
  EXPECT_NE(three.config_id, zero.config_id);
  EXPECT_EQ(three.params_json["levels"], 3);
}

TEST(Catalog, AnUnknownProfileOrANonBooleanQuickIsAUsageError) {
  try {
    builtin_catalog("fast", Registry::global());
    ADD_FAILURE() << "accepted profile \"fast\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("quick, default, models"), std::string::npos) << e.what();
  }
  const std::string e = error_of(with_config(R"({"op": "bias_add", "name": "x", "params": {"n": 1, "h": 2, "w": 2, "c": 1}, "quick": 1})"));
  EXPECT_NE(e.find("configs[0].quick"), std::string::npos) << e;
}

TEST(Catalog, DigestIgnoresWhitespaceButNotContent) {
  const auto a = parse_catalog(with_config(R"({"op":"bias_add","name":"x","params":{"n":1,"h":2,"w":2,"c":3}})"), "a", Registry::global());
  const auto b = parse_catalog(with_config(R"({ "op" : "bias_add", "name" : "x", "params" : {"c":3, "h":2, "w":2, "n":1} })"), "b", Registry::global());
  const auto c = parse_catalog(with_config(R"({"op":"bias_add","name":"x","params":{"n":1,"h":2,"w":2,"c":4}})"), "c", Registry::global());
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_NE(a.digest, c.digest);
  EXPECT_EQ(a.configs[0].config_id, b.configs[0].config_id);
  EXPECT_NE(a.configs[0].config_id, c.configs[0].config_id);
}

TEST(Catalog, SyntaxErrorNamesLineAndColumn) {
  const std::string e = error_of("{\n  \"schema\": \"d9m.catalog/1\",\n  \"configs\": [,]\n}");
  EXPECT_NE(e.find("cat.json:3:"), std::string::npos) << e;
}

TEST(Catalog, NumbersBeyondDoubleRangeAreAnErrorNotACrash) {
  // Found by fuzz_catalog: nlohmann throws out_of_range, not parse_error, for these.
  const std::string e = error_of("{\"schema\": 1e999999}");
  EXPECT_NE(e.find("number overflow"), std::string::npos) << e;
}

TEST(Catalog, AVeryLongNameIsAnErrorNotAStackOverflow) {
  // Found by fuzz_catalog: std::regex recursed per character and overflowed the stack at 31 KB.
  const std::string e = error_of(with_config(R"({"op": "bias_add", "name": ")" + std::string(100000, 'y') +
                                             R"(", "params": {"n": 1, "h": 2, "w": 2, "c": 1}})"));
  EXPECT_NE(e.find("configs[0].name: expected 1 to 100 letters"), std::string::npos) << e.substr(0, 300);
  EXPECT_NE(e.find("(100000 characters)"), std::string::npos);
  EXPECT_LT(e.size(), 400u) << "the message repeats the whole name";
  EXPECT_EQ(error_of(with_config(R"({"op": "bias_add", "name": "", "params": {"n": 1, "h": 2, "w": 2, "c": 1}})")).find("configs[0].name"), 0u + std::string("cat.json: ").size());
}

// The catalogue is shared by CPU-only and CUDA builds: globs naming GPU variants (d9m's own and
// the GPU libraries') select nothing where those variants are not built, and are no error.
TEST(Catalog, GlobsOfGpuVariantsAreNoErrorWhereNoneMatch) {
  const std::string text = with_config(
      R"({"op": "bias_add", "name": "x", "params": {"n": 1, "h": 2, "w": 2, "c": 1},
          "variants": ["cpu.serial", "cuda.*", "cudnn.*", "cublas.*", "cublaslt.*", "cub.*"]})");
  const Catalog cat = parse_catalog(text, "cat.json", Registry::global());
  ASSERT_EQ(cat.configs.size(), 1u);
  EXPECT_EQ(cat.configs[0].variant_globs.size(), 6u);
}

TEST(Catalog, SemanticErrorsNameTheFieldPath) {
  const std::string ok = R"("op": "bias_add", "name": "x")";
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"[]", "(root): expected an object"},
      {R"({"schema": "d9m.catalog/2", "configs": []})", "schema: expected \"d9m.catalog/1\""},
      {R"({"schema": "d9m.catalog/1", "configs": []})", "configs: expected a non-empty array"},
      {R"({"schema": "d9m.catalog/1", "configs": [], "extra": 1})", "extra: unknown field"},
      {with_config(R"({"op": "nope", "name": "x", "params": {}})"), "configs[0].op: unknown op \"nope\""},
      {with_config(R"({"op": 3, "name": "x", "params": {}})"), "configs[0].op: expected a string, got an integer"},
      {with_config("{" + ok + R"(, "params": {"n": 1, "h": 2, "w": 2}})"), "missing required parameter \"c\""},
      {with_config("{" + ok + R"(, "params": {"n": 1, "h": 0, "w": 2, "c": 1}})"), "configs[0].params.h: expected an integer in [1, 2^31-1], got 0"},
      {with_config("{" + ok + R"(, "params": {"n": 1, "h": -4, "w": 2, "c": 1}})"), "configs[0].params.h: expected an integer"},
      {with_config("{" + ok + R"(, "params": {"n": 1, "h": "2", "w": 2, "c": 1}})"), "configs[0].params.h: expected an integer in [1, 2^31-1], got a string"},
      {with_config("{" + ok + R"(, "params": {"n": 1.5, "h": 2, "w": 2, "c": 1}})"), "configs[0].params.n: expected an integer"},
      {with_config("{" + ok + R"(, "params": {"n": 1, "h": 2, "w": 2, "c": 1, "k": 1}})"), "configs[0].params.k: unknown parameter"},
      {with_config("{" + ok + R"(, "params": {"n": 1, "h": 2, "w": 2, "c": 1}, "seed": -1})"), "configs[0].seed: expected a non-negative integer"},
      {with_config("{" + ok + R"(, "params": {"n": 1, "h": 2, "w": 2, "c": 1}, "variants": ["cpu.nope"]})"), "configs[0].variants[0]: \"cpu.nope\" matches no variant"},
      {with_config("{" + ok + R"(, "params": {"n": 1, "h": 2, "w": 2, "c": 1}, "colour": 1})"), "configs[0].colour: unknown field"},
      {with_config(R"({"op": "maxpool2d_bwd", "name": "x", "params": {"n":1,"h":2,"w":2,"c":1,"ksize_h":3,"ksize_w":1,"stride_h":1,"stride_w":1,"padding":"VALID"}})"), "configs[0].params.ksize_h: window of 3 exceeds"},
      {with_config(R"({"op": "maxpool2d_bwd", "name": "x", "params": {"n":1,"h":2,"w":2,"c":1,"ksize_h":1,"ksize_w":1,"stride_h":1,"stride_w":1,"padding":"FULL"}})"), "configs[0].params.padding: expected one of \"VALID\", \"SAME\""},
      {with_config(R"({"op": "resize_bilinear", "name": "x", "params": {"n":1,"h":2,"w":2,"c":1,"out_h":4,"out_w":4,"align_corners":true}})"), "configs[0].params.half_pixel_centers"},
      {with_config(R"({"op": "bias_add", "name": "x", "params": {"n":2147483647,"h":2147483647,"w":2,"c":1}})"), "configs[0].params.n: the sizes multiply beyond 2^62"},
      {with_config(R"({"op": "bias_add", "name": "x", "params": {"n":1024,"h":1024,"w":1024,"c":4}})"), "configs[0].params: inputs and output would take"},
      {with_config("{" + ok + R"(, "params": {"n":1,"h":2,"w":2,"c":1}}, {)" + ok + R"(, "params": {"n":1,"h":2,"w":2,"c":1}})"), "configs[1].name: duplicate config name"},
      {with_config(R"({"op": "bias_add", "name": "a b", "params": {"n":1,"h":2,"w":2,"c":1}})"), "configs[0].name: expected 1 to 100 letters"},
      {with_config(R"({"op": "bias_add", "name": "_canary", "params": {"n":1,"h":2,"w":2,"c":1}})"), "configs[0].name: names starting with _ are reserved"},
  };
  for (const auto& c : cases) {
    const std::string e = error_of(c.text);
    EXPECT_NE(e.find("cat.json: "), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << e;
  }
}

TEST(Catalog, ConfigNamesAreOnePathComponentNeverDotOrDotDot) {
  // Config names are folder names under --save-outputs: "." put a config's files in its op's
  // folder, ".." in the outputs folder itself, where two ops' configs overwrote each other.
  for (const std::string name : {".", "..", ".hidden", "a/b", "../x", "a\\b"}) {
    const std::string e = error_of(with_config(R"({"op": "bias_add", "name": )" + nlohmann::json(name).dump() +
                                               R"(, "params": {"n": 1, "h": 2, "w": 2, "c": 1}})"));
    EXPECT_NE(e.find("configs[0].name: expected 1 to 100 letters, digits and _.+- only, not starting with '.', got " +
                     nlohmann::json(name).dump()),
              std::string::npos)
        << e;
  }
  // Control characters are shown escaped, not written to the terminal as they are.
  const std::string e = error_of(with_config(R"({"op": "bias_add", "name": "a\u001b[2Jb", "params": {"n": 1, "h": 2, "w": 2, "c": 1}})"));
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
  EXPECT_NE(e.find(R"(got "a\u001b[2Jb")"), std::string::npos) << e;
  EXPECT_NO_THROW(parse_catalog(with_config(R"({"op": "bias_add", "name": "v1.2-a+b_c", "params": {"n": 1, "h": 2, "w": 2, "c": 1}})"),
                                "cat.json", Registry::global()));
}

TEST(Catalog, ANulByteIsAnErrorWithAPlaceNotTheEndOfTheText) {
  // nlohmann's parser stopped at a NUL: a catalogue with garbage after one was accepted whole.
  const std::string good = R"({"schema": "d9m.catalog/1", "configs": [{"op": "bias_add", "name": "x", "params": {"n": 1, "h": 2, "w": 2, "c": 1}}]})";
  EXPECT_EQ(error_of(good + std::string(1, '\0') + " not json {{{"),
            "cat.json:1:" + std::to_string(good.size() + 1) + ": a NUL byte; JSON text has none (a binary file, or one cut and padded?)");
  EXPECT_NE(error_of(good.substr(0, 20) + std::string(1, '\0') + good.substr(20)).find("cat.json:1:21: a NUL byte"), std::string::npos);
}

TEST(Catalog, DeepNestingIsAnErrorWithAPlaceNotAStackOverflow) {
  // 100,000 levels in the free-form "description" parsed, then overflowed the stack when the
  // catalogue's digest printed it (exit 139 from list and run).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string e = error_of(R"({"schema": "d9m.catalog/1", "description": )" + deep +
                                 R"(, "configs": [{"op": "bias_add", "name": "x", "params": {"n": 1, "h": 2, "w": 2, "c": 1}}]})");
  // The root object is level 1, so the 64th '[' (column 43 + 64) is level 65.
  EXPECT_EQ(e, "cat.json:1:107: nested more than 64 levels deep (arrays and objects)");
  // Brackets in strings are text, and 64 levels are allowed.
  const std::string ok = std::string(63, '[') + R"("[[[[{{{{")" + std::string(63, ']');
  EXPECT_NO_THROW(parse_catalog(R"({"schema": "d9m.catalog/1", "description": )" + ok +
                                    R"(, "configs": [{"op": "bias_add", "name": "x", "params": {"n": 1, "h": 2, "w": 2, "c": 1}}]})",
                                "cat.json", Registry::global()));
  EXPECT_EQ(error_of("{\"a\":\n" + std::string(70, '{')).substr(0, 13), "cat.json:2:64");
}

TEST(Catalog, AFolderOrAnEndlessDeviceIsAUsageErrorNamingTheFile) {
  auto load_error = [](const std::string& path) {
    try {
      load_catalog_file(path, Registry::global());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::usage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(load_error("/"), "/: is a folder, not a catalogue file");
  EXPECT_EQ(load_error("/dev/zero"), "/dev/zero: larger than the limit of 64 MiB for a catalogue (read stopped there)");
  EXPECT_EQ(load_error("/nonexistent/cat.json"), "/nonexistent/cat.json: cannot read the catalogue (No such file or directory)");
}

TEST(Catalog, IntegersAndWindowsFitAnInt) {
  // cuDNN's descriptors take int: 2^31 was accepted and wrapped to INT_MIN there.
  const std::string conv = R"({"op": "conv2d_bwd_filter", "name": "x", "params": {"n": 1, "h": 4, "w": 4, "ci": 1, "co": 1, "kh": 1, "kw": 1, )";
  EXPECT_NE(error_of(with_config(conv + R"("stride_h": 2147483648}})")).find("configs[0].params.stride_h: expected an integer in [1, 2^31-1], got 2147483648"),
            std::string::npos);
  EXPECT_NE(error_of(with_config(conv + R"("dilation_w": 9223372036854775807}})")).find("configs[0].params.dilation_w: expected an integer in [1, 2^31-1]"),
            std::string::npos);
  EXPECT_NO_THROW(parse_catalog(with_config(conv + R"("stride_h": 2147483647}})"), "cat.json", Registry::global()));
  // A window of (5 - 1) * 2^30 + 1 = 2^32 + 1 with SAME padding needs a padding of 2^31: refused.
  const std::string wide = R"({"op": "conv2d_bwd_data", "name": "x", "params": {"n": 1, "h": 1, "w": 1, "ci": 1, "co": 1, "kh": 5, "kw": 1, "dilation_h": 1073741824}})";
  const std::string e = error_of(with_config(wide));
  EXPECT_NE(e.find("configs[0].params.kh: window of 4294967297 ((kh - 1) * dilation + 1) exceeds 2^31-1"), std::string::npos) << e;
}

TEST(Catalog, VariantsOfABackendNotBuiltAreAllowed) {
  // The catalogue is shared by CPU-only and CUDA builds.
  const auto c = parse_catalog(with_config(R"({"op":"bias_add_grad","name":"x","params":{"n":1,"h":2,"w":2,"c":3},"variants":["cpu.serial","cuda.ordered"]})"),
                               "c", Registry::global());
  EXPECT_EQ(c.configs[0].variant_globs.size(), 2u);
}

}  // namespace
}  // namespace d9m
