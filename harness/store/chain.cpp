// The hash chains (docs/ATTESTATION.md): content-addressed case ids, each run's chain start (its
// metadata and fingerprint), the canonical rows its links cover, and the closing link.
#include "harness/store/store.h"
#include "harness/core/json_text.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/core/digest.h"
#include "harness/core/embedded.h"
#include "harness/core/error.h"
#include "harness/store/manifest.h"
#include "harness/store/sqlite.h"

namespace d9m {

namespace {
int chain_version_of(sqlite3* db, const std::string& run_id) {
  if (!has_column(db, "runs", "chain_version")) return 1;
  sql::Statement v(db, "SELECT chain_version FROM runs WHERE id = ?");
  v.bind(1, run_id);
  return v.step() ? static_cast<int>(v.integer(0)) : 1;
}
}  // namespace

Store::ChainState Store::stored_chain(sqlite3* db, const std::string& run_id) {
  const int version = chain_version_of(db, run_id);
  sql::Statement c(db, "SELECT seq, chain, case_id FROM case_runs WHERE run_id = ? ORDER BY seq DESC LIMIT 1");
  c.bind(1, run_id);
  if (!c.step()) return {version, 0, chain_start_of(db, run_id, version).value_or(chain_start(run_id))};
  ChainState st{version, c.integer(0) + 1, c.text(1)};
  sql::Statement t(db, "SELECT chain FROM trials WHERE run_id = ? AND case_id = ? ORDER BY trial DESC LIMIT 1");
  t.bind(1, run_id).bind(2, c.text(2));
  if (t.step()) st.last = t.text(0);
  // A pipeline case's trace rows come last in its chain (schema 6).
  if (has_column(db, "trace", "chain")) {
    sql::Statement r(db, "SELECT chain FROM trace WHERE run_id = ? AND case_id = ? ORDER BY trial DESC, step DESC, position DESC LIMIT 1");
    r.bind(1, run_id).bind(2, c.text(2));
    if (r.step()) st.last = r.text(0);
  }
  return st;
}

std::string Store::case_id(const CaseRecord& c) {
  nlohmann::json j = {{"op", c.op},         {"variant", c.variant},           {"backend", c.backend},
                            {"config", c.config}, {"config_id", c.config_id},       {"params", c.params},
                            {"seed", c.seed},     {"input_digest", c.input_digest}, {"output_dtype", c.output_dtype},
                            {"output_shape", c.output_shape}};
  if (c.dtype != "f32") j["dtype"] = c.dtype;
  if (c.math != "default") j["math"] = c.math;
  return sha256_hex(json_text(j));
}

std::string Store::chain_start(const std::string& run_id) { return sha256_hex("d9m-chain-v1:" + run_id); }

std::optional<std::string> Store::run_head_text(sqlite3* db, const std::string& run_id) {
  const std::string plan = has_column(db, "runs", "plan_digest") ? "r.plan_digest" : "''";
  sql::Statement s(db, "SELECT r.id, r.fingerprint_id, r.started_at, r.host, r.gpu_uuids, r.d9m_version, r.d9m_commit,"
                       " r.catalog_digest, r.trials_per_case, r.threads, r.arguments, " + plan + ", f.canonical"
                       " FROM runs r JOIN fingerprints f ON f.id = r.fingerprint_id WHERE r.id = ?");
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  const nlohmann::json head = {{"chain", "d9m-chain-v2"},      {"id", s.text(0)},          {"fingerprint_id", s.text(1)},
                               {"started_at", s.text(2)},      {"host", s.text(3)},        {"gpu_uuids", s.text(4)},
                               {"d9m_version", s.text(5)},     {"d9m_commit", s.text(6)},  {"catalog_digest", s.text(7)},
                               {"trials_per_case", s.integer(8)}, {"threads", s.integer(9)}, {"arguments", s.text(10)},
                               {"plan_digest", s.text(11)},    {"fingerprint", s.text(12)}};
  return json_text(head);
}

std::optional<std::string> Store::run_head(sqlite3* db, const std::string& run_id) {
  const auto text = run_head_text(db, run_id);
  return text ? std::optional<std::string>(sha256_hex(*text)) : std::nullopt;
}

std::optional<std::string> Store::chain_start_of(sqlite3* db, const std::string& run_id, int chain_version) {
  if (chain_version == 1) return chain_start(run_id);
  return chain_version == 2 ? run_head(db, run_id) : std::nullopt;
}

std::string Store::closing_row(const std::string& run_id, const std::string& state, const std::string& finished_at,
                               std::int64_t resumes) {
  return json_text(nlohmann::json::array({"close", run_id, state, finished_at, resumes}));
}

std::string Store::chain_root(int chain_version, const std::string& last, const std::string& run_id, const std::string& state,
                              const std::string& finished_at, std::int64_t resumes) {
  return chain_version == 1 ? last : chain_link(last, closing_row(run_id, state, finished_at, resumes));
}

std::string Store::chain_link(const std::string& previous, const std::string& canonical_row) {
  unsigned char bytes[32];
  std::string hex(64, '0');
  chain_link_into(previous, canonical_row, bytes, hex.data());
  return hex;
}

void Store::chain_link_into(std::string_view previous, std::string_view canonical_row, unsigned char bytes[32], char hex[64]) {
  sha256_into(previous, "\n", canonical_row, bytes, hex);
}

namespace {
nlohmann::json optional_json(const std::optional<std::int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
}  // namespace

std::string Store::canonical_case_run(const std::string& run_id, const std::string& case_id, std::int64_t seq,
                                      const CaseRunRecord& cr) {
  auto row = nlohmann::json::array({"case_run", run_id, case_id, seq, to_string(cr.status), cr.detail, cr.claim_determinism,
                                     cr.claim_source, cr.claim_reason, cr.claim_bit_equal_to, cr.trials, cr.distinct,
                                     optional_json(cr.median_ns), optional_json(cr.min_ns)});
  // The role joined the row in schema 3. Rows written before have none, and their links must
  // come out as they were written; a role set on such a row, or cleared on a newer one, breaks
  // the link.
  if (!cr.role.empty() || !cr.invariance.empty() || !cr.value_check.empty()) row.push_back(cr.role);
  // Batch-invariance evidence joined the row in schema 5, after the role (present, if empty, so
  // that evidence moved into the role column cannot give the same row).
  if (!cr.invariance.empty() || !cr.value_check.empty()) row.push_back(cr.invariance);
  // The value check joined it in schema 9, last, on the same terms.
  if (!cr.value_check.empty()) row.push_back(cr.value_check);
  return json_text(row);
}

namespace {
// Strings JSON writes as they are: no escapes, no UTF-8 to check. A table, since every trial row
// checks its ids and digest (a chained comparison per character was a third of the row's text).
struct PlainChars {
  bool ok[256] = {};
  constexpr PlainChars() {
    for (int c = 0; c < 256; ++c)
      ok[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.';
  }
};
constexpr PlainChars kPlain;
bool plain(std::string_view s) {
  bool all = true;
  for (const char c : s) all &= kPlain.ok[static_cast<unsigned char>(c)];
  return all;
}
void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
// A double as nlohmann's dump writes it: its own shortest round-trip form (Grisu2, with ".0" on
// integral values), or null where it is not finite. The unit test of the fast row holds the two
// equal on edge values (negative zero, subnormals, the extremes, integral values).
void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[64];
  out.append(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, v));
}
}  // namespace

std::string Store::canonical_trial(const std::string& run_id, const std::string& case_id, const TrialRecord& t) {
  std::string out;
  append_canonical_trial(out, run_id, case_id, t);
  return out;
}

void Store::append_canonical_trial(std::string& out, const std::string& run_id, const std::string& case_id, const TrialRecord& t) {
  // The common row (hex ids, digest and choice; with or without a diff) written directly, byte
  // for byte what the nlohmann dump below gives (a unit test holds the two equal): one row per
  // trial is the store's hot path. Strings that JSON would escape take the general path.
  if (plain(run_id) && plain(case_id) && plain(t.digest) && plain(t.choice)) {
    out.reserve(out.size() + 32 + run_id.size() + case_id.size() + t.digest.size() + 40);
    out += "[\"trial\",\"";
    out += run_id;
    out += "\",\"";
    out += case_id;
    out += "\",";
    append_int(out, t.trial);
    out += ",\"";
    out += t.digest;
    out += "\",";
    append_int(out, t.elapsed_ns);
    if (t.diff) {  // nearly every row of a nondeterministic case
      out += ",[";
      append_int(out, t.diff->count);
      out += ',';
      append_double(out, t.diff->max_abs);
      out += ',';
      append_int(out, t.diff->max_ulp);
      out += ',';
      append_int(out, t.diff->first_index);
      out += ']';
    } else {
      out += ",null";
    }
    if (!t.choice.empty()) {  // an autotuning variant's choice
      out += ",\"";
      out += t.choice;
      out += '"';
    }
    out += ']';
    return;
  }
  out += canonical_trial_general(run_id, case_id, t);
}

std::string Store::canonical_trial_general(const std::string& run_id, const std::string& case_id, const TrialRecord& t) {
  nlohmann::json diff = nullptr;
  if (t.diff) diff = {t.diff->count, t.diff->max_abs, t.diff->max_ulp, t.diff->first_index};
  auto row = nlohmann::json::array({"trial", run_id, case_id, t.trial, t.digest, t.elapsed_ns, diff});
  // An autotuning variant's choice joined the row in schema 5; rows without one are as before.
  if (!t.choice.empty()) row.push_back(t.choice);
  return json_text(row);
}

std::string Store::canonical_trace(const std::string& run_id, const std::string& case_id, const TraceRecord& t) {
  nlohmann::json diff = nullptr;
  if (t.diff) diff = {t.diff->count, t.diff->max_abs, t.diff->max_ulp, t.diff->first_index};
  return json_text(nlohmann::json::array(
      {"trace", run_id, case_id, t.trial, t.step, t.position, t.name, t.op, t.variant, t.inputs, t.digest, diff}));
}

}  // namespace d9m
