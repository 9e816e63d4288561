#include "harness/core/files.h"
#include "harness/attest/attest.h"
#include "harness/core/json_text.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>

#include "harness/core/digest.h"
#include "harness/core/error.h"
#include "harness/core/fingerprint.h"
#include "harness/report/model.h"
#include "harness/report/report.h"
#include "harness/store/snapshot.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"

namespace d9m {

using nlohmann::json;

namespace {

constexpr const char* kPayloadType = "application/vnd.in-toto+json";

std::optional<std::string> unbase64(const std::string& in) {
  if (in.size() % 4) return std::nullopt;
  std::string out(3 * in.size() / 4 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as bytes: at most two '=' close a base64 text.
  std::size_t padding = 0;
  for (std::size_t i = in.size(); i > 0 && in[i - 1] == '='; --i) ++padding;
  if (padding > 2 || padding > static_cast<std::size_t>(n)) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

// keyid: SHA-256 of the DER-encoded public key.
std::string key_id(EVP_PKEY* k) {
  unsigned char* der = nullptr;
  const int n = i2d_PUBKEY(k, &der);
  std::string id = n > 0 ? sha256_hex(std::string(reinterpret_cast<char*>(der), static_cast<std::size_t>(n))) : "";
  OPENSSL_free(der);
  return id;
}

// A file as attest and verify read it: opened without blocking (a FIFO must not hang us), and
// only when it is a regular file: a device (/dev/zero) or a FIFO would never end. False, and
// `why`, when it is not.
struct RegularFile {
  int fd = -1;
  std::int64_t size = 0;
  ~RegularFile() {
    if (fd >= 0) ::close(fd);
  }
};
bool open_regular(const std::string& path, RegularFile& f, std::string& why) {
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0) {
    why = std::string("cannot read it (") + std::strerror(errno) + ")";
    return false;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file (a device, FIFO or folder): not read";
    return false;
  }
  f.size = st.st_size;
  return true;
}

// A regular file read whole, at most `limit` bytes; Error(usage) otherwise.
std::string read_regular(const std::string& path, std::int64_t limit, const std::string& what) {
  RegularFile f;
  std::string why;
  if (!open_regular(path, f, why)) fail_usage(path + ": " + what + ": " + why);
  if (f.size > limit)
    fail_usage(path + ": " + what + " of " + std::to_string(f.size) + " bytes, more than the " + std::to_string(limit) + " allowed");
  std::string text;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(f.fd, buf, sizeof buf)) != 0;) {
    if (n < 0) fail_usage(path + ": cannot read " + what + " (" + std::strerror(errno) + ")");
    text.append(buf, static_cast<std::size_t>(n));
    if (static_cast<std::int64_t>(text.size()) > limit) fail_usage(path + ": " + what + " grew past " + std::to_string(limit) + " bytes");
  }
  return text;
}

// A PEM key is a few hundred bytes; read through read_regular like every file named on the
// command line, so a FIFO or a device given as a key is refused instead of read (a FIFO hung).
constexpr std::int64_t kMaxKeyBytes = std::int64_t{1} << 20;

Pkey read_key(const std::string& path, bool is_private) {
  const std::string pem = read_regular(path, kMaxKeyBytes, "the key");
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  EVP_PKEY* k = !bio ? nullptr
                     : is_private ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                                  : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  if (!k) fail_usage(path + ": not a PEM " + std::string(is_private ? "private" : "public") + " key");
  if (EVP_PKEY_id(k) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(k);
    fail_usage(path + ": not an Ed25519 key (make one with: openssl genpkey -algorithm ed25519 -out key.pem)");
  }
  return Pkey(k);
}

// SHA-256 of a regular file, streamed; nullopt and `why` when it is not one or cannot be read.
// The hash reads the file through the descriptor that was checked (Linux: /proc/self/fd), so
// what is hashed is what was found regular.
std::optional<std::string> regular_file_sha256(const std::string& path, std::string& why) {
  RegularFile f;
  if (!open_regular(path, f, why)) return std::nullopt;
  const std::string sha = sha256_file("/proc/self/fd/" + std::to_string(f.fd));
  if (sha.empty()) {
    why = "cannot read it";
    return std::nullopt;
  }
  return sha;
}

// A non-empty SQLite write-ahead log or rollback journal beside `path` (by the name given, or, as
// SQLite names it, beside the file a symlink leads to): readers of a store see a log together with
// the file, and the next writer plays a journal into it, so the file's hash alone would not cover
// what they read (the journal found by audit: a tampered one passed).
std::optional<std::string> nonempty_log(const std::string& path) {
  const std::string resolved = real_path_or_self(path);
  for (const char* side : {"-wal", "-journal"})
    for (const std::string& log : {path + side, resolved + side}) {
      struct stat st {};
      if (::stat(log.c_str(), &st) == 0 && st.st_size > 0) return log;
    }
  return std::nullopt;
}

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Whether a rendered report covers only part of its store (ReportData::selection): the JSON field
// `selection`, the "# selection: " header line (Markdown, HTML) or the "selection" property (JUnit).
bool names_a_selection(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("schema")) return j.contains("selection") && !j["selection"].is_null();
  return text.find("# selection: ") != std::string::npos || text.find("<property name=\"selection\"") != std::string::npos;
}

// Whether `t` is a time as utc_now() writes it: "2026-11-27T09:41:00Z".
bool is_utc_time(const std::string& t) {
  static const std::string shape = "0000-00-00T00:00:00Z";
  if (t.size() != shape.size()) return false;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (shape[i] == '0' ? !std::isdigit(static_cast<unsigned char>(t[i])) : t[i] != shape[i]) return false;
  return true;
}

// Seconds since 1970 of a time as utc_now() writes it (is_utc_time), or nullopt for one that is no
// date (month 13, say).
std::optional<std::int64_t> seconds_of(const std::string& t) {
  std::tm tm{};
  if (!is_utc_time(t) || !::strptime(t.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return std::nullopt;
  std::tm back = tm;
  const std::time_t at = ::timegm(&back);
  if (back.tm_mday != tm.tm_mday || back.tm_mon != tm.tm_mon) return std::nullopt;  // normalised: not a date
  return static_cast<std::int64_t>(at);
}

// Whether `report` is `rendered` with one and the same UTC time wherever `rendered` has `slot`.
bool same_but_for_the_time(const std::string& rendered, const std::string& slot, const std::string& report, std::string& time) {
  std::vector<std::string> parts;
  for (std::size_t from = 0;;) {
    const std::size_t at = rendered.find(slot, from);
    parts.push_back(rendered.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) break;
    from = at + slot.size();
  }
  if (parts.size() == 1) return rendered == report;
  if (report.compare(0, parts[0].size(), parts[0]) != 0) return false;
  const std::size_t end = report.find(parts[1], parts[0].size());
  if (end == std::string::npos) return false;
  time = report.substr(parts[0].size(), end - parts[0].size());
  if (!is_utc_time(time)) return false;
  std::string expected = parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) expected += time + parts[i];
  return expected == report;
}

// The report must be the one this d9m renders from the store now, in the report's format, at the
// time the report names. Its evidence digest binds only its header: without this, a report whose
// cells or verdict were edited by hand ("ND" made "D", FAIL made PASS) was signed as the store's.
void check_rendered_from(const Store& store, StoreReport& rendered, const std::string& report, const std::string& report_path,
                         const std::string& store_sha256) {
  // Random: a fixed text could also come from the store (a run's arguments, a host name) and be
  // read as a time slot there, refusing a report that is the store's.
  const std::string slot = "d9m-time-" + random_run_id();
  rendered.data().generated_at = slot;
  rendered.data().store_sha256 = store_sha256;  // the audit report's identification
  const std::size_t start = report.find_first_not_of(" \t\r\n");
  const std::string head = start == std::string::npos ? "" : report.substr(start, 64);
  const std::string format = head.rfind("{", 0) == 0                                               ? "json"
                             : head.rfind("<?xml", 0) == 0                                         ? "junit"
                             : head.rfind("<!DOCTYPE html", 0) == 0 || head.rfind("<html", 0) == 0 ? "html"
                                                                                                   : "md";
  std::string time;
  for (const bool audit : {false, true}) {
    if (audit && format != "md" && format != "html") break;
    if (!same_but_for_the_time(rendered.render(format, audit), slot, report, time)) continue;
    // The time is the report's own, but must be one it could have been rendered at: not before its
    // newest run began nor after now, a day either way for clocks that differ between machines
    // (found by review: 9999-99-99T99:99:99Z, and a year before the runs, were signed).
    std::string newest;
    for (const auto& r : rendered.data().run_rows) newest = std::max(newest, r.started_at);
    const auto at = seconds_of(time), first = seconds_of(newest), now = seconds_of(utc_now());
    constexpr std::int64_t kDay = 86400;
    if (!at || (first && *at < *first - kDay) || (now && *at > *now + kDay))
      fail_usage(report_path + ": names " + time + " as the time it was rendered, " +
                 (at ? "which is not between its newest run's start (" + newest + ") and now, a day either way" : "which is no date") +
                 ": render it again with `d9m report --db " + store.path() + "` and attest that file");
    return;
  }
  fail_usage(report_path + ": is not the report this d9m renders from " + store.path() + " now (" + format +
             "): its text differs beyond the time it was rendered. A report edited after rendering is not signed; nor is one "
             "rendered by another d9m build, or from the store named by another path: render it again with `d9m report --db " +
             store.path() + " --format " + format + "` (and --audit if it was an audit report) and attest that file");
}

}  // namespace

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string dsse_pae(const std::string& type, const std::string& body) {
  return "DSSEv1 " + std::to_string(type.size()) + " " + type + " " + std::to_string(body.size()) + " " + body;
}

json make_statement(const ReportData& data, const std::vector<Subject>& subjects) {
  // The verdict of `d9m report` on the same store (report/model.h): a case fails with any of its
  // failures; one with evidence and none passed.
  const Verdict v = verdict_of(data);
  json passed = json::array(), failed = json::array();
  for (const auto& r : data.results) {
    const std::string name = r.label() + "@" + data.stack(r.stack).label;
    if (!v.failures_of(r).empty()) failed.push_back(name);
    else if (r.status == Status::deterministic || r.status == Status::nondeterministic) passed.push_back(name);
  }
  json configuration = json::array();
  for (const auto& c : data.catalog_digests) configuration.push_back({{"name", "catalogue"}, {"digest", {{"sha256", c}}}});
  for (const auto& s : data.stacks)
    configuration.push_back({{"name", "fingerprint " + s.label}, {"digest", {{"sha256", s.id}}}, {"content", s.fingerprint}});
  for (const auto& r : data.run_rows)
    configuration.push_back({{"name", "run " + r.id}, {"digest", {{"sha256", r.chain_root}}}, {"annotations", {{"chain_root", r.chain_root}, {"host", r.host}}}});
  // Anchors outside the store: with these, events cut off the end of the store's manifest (and
  // the runs they name) show against the signed statement.
  configuration.push_back({{"name", "evidence"}, {"digest", {{"sha256", data.evidence.digest}}}});
  for (const auto& h : data.evidence.manifest_heads) configuration.push_back({{"name", "manifest head"}, {"digest", {{"sha256", h}}}});
  json subject = json::array();
  for (const auto& s : subjects) subject.push_back({{"name", s.name}, {"digest", {{"sha256", s.sha256}}}});
  return {{"_type", "https://in-toto.io/Statement/v1"},
          {"subject", subject},
          {"predicateType", "https://in-toto.io/attestation/test-result/v0.1"},
          {"predicate",
           {{"result", v.held() ? "PASSED" : "FAILED"},
            {"configuration", configuration},
            {"passedTests", passed},
            {"failedTests", failed},
            {"warnedTests", json::array()}}}};
}

std::optional<std::string> report_evidence(const std::string& text, const std::string& report_path) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("schema") && j["schema"].is_string() && j["schema"].get<std::string>().rfind("d9m.report/", 0) == 0) {
    if (j.contains("evidence") && j["evidence"].is_object() && j["evidence"].contains("sha256") && j["evidence"]["sha256"].is_string())
      return j["evidence"]["sha256"].get<std::string>();
    return std::nullopt;
  }
  // Markdown and HTML: "evidence sha256: <hex>"; JUnit: name="evidence sha256" value="<hex>".
  std::optional<std::string> found;
  const std::string marker = "evidence sha256";
  for (std::size_t p = text.find(marker); p != std::string::npos; p = text.find(marker, p + 1)) {
    std::size_t at = p + marker.size();
    for (const std::string sep : {": ", "\" value=\""})
      if (text.compare(at, sep.size(), sep) == 0) {
        at += sep.size();
        break;
      }
    const std::string hex = text.substr(at, 64);
    if (!is_sha256_hex(hex)) continue;
    if (found && *found != hex) fail_usage(report_path + ": names two different evidence digests (" + *found + ", " + hex + ")");
    found = hex;
  }
  return found;
}

json attest_store(const Store& store, const std::string& report_path) {
  const SingleFileSnapshot snapshot(store, "attested");
  const VerifyReport v = require_sound(store, "attested");
  const std::string report = read_regular(report_path, kMaxReportBytes, "the report");
  if (report.rfind("stack,fingerprint,", 0) == 0)
    fail_usage(report_path + ": a CSV report names no evidence digest, so nothing binds it to its store: attest a JSON, "
               "Markdown, HTML or JUnit report");
  const auto named = report_evidence(report, report_path);
  if (!named)
    fail_usage(report_path + ": names no evidence digest (not a d9m report, or rendered before reports named one): render it again with "
               "`d9m report --db " + store.path() + "`");
  if (names_a_selection(report))
    fail_usage(report_path + ": was rendered from part of the store (--run or --stacks), so its table and verdict are not those "
               "of the statement, which covers the whole store: render it again with `d9m report --db " + store.path() +
               "` and neither option");
  if (*named != v.evidence.digest)
    fail_usage(report_path + ": was rendered from another store, or from " + store.path() + " before it changed (the report's evidence "
               "sha256 " + *named + ", the store's " + v.evidence.digest + "): render it again from " + store.path());
  std::string why;
  const auto store_sha = regular_file_sha256(store.path(), why);
  if (!store_sha) fail_environment(store.path() + ": " + why);
  StoreReport rendered(store);
  check_rendered_from(store, rendered, report, report_path, *store_sha);
  // A statement whose result is PASSED with no case tested would be filed as a pass.
  if (const Verdict& verdict = rendered.model().verdict; verdict.certifies_nothing())
    fail_usage(store.path() + ": holds no evidence, so it is not attested: " + verdict.no_evidence());
  return make_statement(rendered.data(), {{report_path, sha256_hex(report)}, {store.path(), *store_sha}});
}

json make_envelope(const json& statement, const std::optional<std::string>& private_key_pem) {
  const std::string payload = json_text(statement);
  json sigs = json::array();
  if (private_key_pem) {
    Pkey key = read_key(*private_key_pem, true);
    const std::string pae = dsse_pae(kPayloadType, payload);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    std::size_t len = 0;
    std::string sig;
    // Ed25519 signs the message itself (no separate digest): one-shot EVP_DigestSign.
    if (EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key.get()) == 1 &&
        EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(pae.data()), pae.size()) == 1) {
      sig.resize(len);
      if (EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len, reinterpret_cast<const unsigned char*>(pae.data()),
                         pae.size()) != 1)
        sig.clear();
    }
    EVP_MD_CTX_free(ctx);
    if (sig.empty()) fail_environment("OpenSSL could not sign with " + *private_key_pem);
    sigs.push_back({{"keyid", key_id(key.get())}, {"sig", base64(sig)}});
  }
  return {{"payloadType", kPayloadType}, {"payload", base64(payload)}, {"signatures", sigs}};
}

namespace {

struct Envelope {
  std::string payload;
  std::vector<std::string> signatures;
};

// The envelope's shape, checked before anything in it is used: Error(usage) naming the field.
Envelope parse_envelope(const std::string& text, const std::string& path) {
  json env;
  try {
    env = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number too large (found by fuzz_attest)
    fail_usage(path + ": not JSON: " + e.what());
  }
  if (!env.is_object()) fail_usage(path + ": not a DSSE envelope (not a JSON object)");
  if (!env.contains("payloadType") || !env["payloadType"].is_string() || env["payloadType"].get<std::string>() != kPayloadType)
    fail_usage(path + ": payloadType: expected \"" + std::string(kPayloadType) + "\" (a DSSE envelope of an in-toto statement)");
  if (!env.contains("payload") || !env["payload"].is_string()) fail_usage(path + ": payload: expected a base64 string");
  const auto payload = unbase64(env["payload"].get<std::string>());
  if (!payload) fail_usage(path + ": payload: not base64");
  Envelope e{*payload, {}};
  if (!env.contains("signatures") || !env["signatures"].is_array()) fail_usage(path + ": signatures: expected an array");
  for (std::size_t i = 0; i < env["signatures"].size(); ++i) {
    const json& s = env["signatures"][i];
    const std::string where = path + ": signatures[" + std::to_string(i) + "]";
    if (!s.is_object() || !s.contains("sig") || !s["sig"].is_string()) fail_usage(where + ": expected an object with a string \"sig\"");
    if (s.contains("keyid") && !s["keyid"].is_string()) fail_usage(where + ".keyid: expected a string");
    const auto sig = unbase64(s["sig"].get<std::string>());
    if (!sig) fail_usage(where + ".sig: not base64");
    e.signatures.push_back(*sig);
  }
  return e;
}

bool verifies(EVP_PKEY* key, const std::string& sig, const std::string& message) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                          reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

// The statement's subjects, with their types checked (the statement is signed, but a signer's
// mistake is still bad input, not a crash).
std::vector<Subject> parse_subjects(const json& st, const std::string& path) {
  if (!st.is_object()) fail_usage(path + ": the signed payload is not a JSON object");
  if (!st.contains("_type") || st["_type"] != "https://in-toto.io/Statement/v1")
    fail_usage(path + ": the signed payload is not an in-toto Statement v1 (_type)");
  if (!st.contains("subject") || !st["subject"].is_array() || st["subject"].empty())
    fail_usage(path + ": the statement's subject: expected a non-empty array");
  std::vector<Subject> out;
  for (std::size_t i = 0; i < st["subject"].size(); ++i) {
    const json& s = st["subject"][i];
    const std::string where = path + ": subject[" + std::to_string(i) + "]";
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string() || s["name"].get<std::string>().empty())
      fail_usage(where + ": expected an object with a non-empty string \"name\"");
    if (!s.contains("digest") || !s["digest"].is_object() || !s["digest"].contains("sha256") || !s["digest"]["sha256"].is_string() ||
        !is_sha256_hex(s["digest"]["sha256"].get<std::string>()))
      fail_usage(where + ".digest.sha256: expected 64 lowercase hex digits");
    out.push_back({s["name"].get<std::string>(), s["digest"]["sha256"].get<std::string>()});
  }
  return out;
}

std::string result_of(const json& st) {
  if (st.contains("predicate") && st["predicate"].is_object() && st["predicate"].contains("result") && st["predicate"]["result"].is_string())
    return st["predicate"]["result"].get<std::string>();
  return "?";
}

}  // namespace

AttestationCheck verify_attestation(const std::string& envelope_path, const std::string& public_key_pem, const std::string& base_dir) {
  AttestationCheck c;
  const Envelope env = parse_envelope(read_regular(envelope_path, kMaxEnvelopeBytes, "the attestation"), envelope_path);
  Pkey key = read_key(public_key_pem, false);
  const std::string pae = dsse_pae(kPayloadType, env.payload);
  for (const auto& sig : env.signatures) c.signature_ok |= verifies(key.get(), sig, pae);
  // Nothing the statement says is acted on before the signature holds: an unsigned or forged
  // envelope could name any file (a device that never ends, a FIFO that blocks).
  if (!c.signature_ok) {
    c.problems.push_back("no signature verifies with " + public_key_pem + " (the statement and its subjects were not read)");
    return c;
  }
  try {
    c.statement = json::parse(env.payload);
  } catch (const json::exception& e) {
    fail_usage(envelope_path + ": the signed payload is not JSON: " + e.what());
  }
  c.result = result_of(c.statement);
  for (const auto& s : parse_subjects(c.statement, envelope_path)) {
    const std::string path = s.name[0] == '/' || base_dir.empty() ? s.name : base_dir + "/" + s.name;
    std::string why;
    const auto got = regular_file_sha256(path, why);
    if (!got) c.problems.push_back("subject " + s.name + ": " + why);
    else if (*got != s.sha256) c.problems.push_back("subject " + s.name + ": SHA-256 " + *got + " does not match the attested " + s.sha256);
    else if (const auto log = nonempty_log(path))
      c.problems.push_back("subject " + s.name + ": " + (log->ends_with("-journal") ? "a rollback journal" : "a write-ahead log") +
                           " lies beside it (" + *log + "), so readers of it see more than the attested file");
  }
  return c;
}

}  // namespace d9m
