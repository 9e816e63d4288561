#include "harness/store/manifest.h"

#include <algorithm>
#include <map>
#include <set>

#include "harness/core/digest.h"
#include "harness/core/json_text.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"

namespace d9m {

using nlohmann::json;

bool has_column(sqlite3* db, const std::string& table, const std::string& column) {
  sql::Statement s(db, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
  s.bind(1, table).bind(2, column);
  return s.step();
}

std::vector<RunFacts> read_run_facts(sqlite3* db) {
  const std::string resumes = has_column(db, "runs", "resumes") ? "r.resumes" : "0";
  const std::string version = has_column(db, "runs", "chain_version") ? "r.chain_version" : "1";
  sql::Statement s(db, "SELECT r.id, r.state, r.finished_at, r.chain_root, " + resumes + ", " + version +
                           ", r.trials_per_case, (SELECT count(*) FROM case_runs c WHERE c.run_id = r.id) FROM runs r ORDER BY r.id");
  std::vector<RunFacts> out;
  auto opt_text = [&](int col) { return s.is_null(col) ? std::nullopt : std::optional<std::string>(s.text(col)); };
  while (s.step())
    out.push_back({s.text(0), s.text(1), opt_text(2), opt_text(3), s.integer(4), s.integer(7), s.integer(6),
                   static_cast<int>(s.integer(5))});
  return out;
}

namespace manifest {

namespace {

json text_or_null(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

// A field of an event's detail, when it is there with the right type.
std::optional<std::string> detail_text(const json& d, const char* key) {
  if (!d.is_object() || !d.contains(key) || !d[key].is_string()) return std::nullopt;
  return d[key].get<std::string>();
}
std::optional<std::int64_t> detail_int(const json& d, const char* key) {
  if (!d.is_object() || !d.contains(key) || !d[key].is_number_integer()) return std::nullopt;
  return d[key].get<std::int64_t>();
}
// A text field that may be null: nullopt when absent or of another type, {nullopt} for null.
std::optional<std::optional<std::string>> detail_nullable(const json& d, const char* key) {
  if (!d.is_object() || !d.contains(key)) return std::nullopt;
  if (d[key].is_null()) return std::optional<std::string>();
  if (!d[key].is_string()) return std::nullopt;
  return std::optional<std::string>(d[key].get<std::string>());
}

// The closing facts an ended (or adopted) event recorded.
struct Snapshot {
  std::string state;
  std::optional<std::string> finished_at, root;
  std::int64_t resumes = 0, cases = 0;
};
std::optional<Snapshot> snapshot_of(const json& d) {
  const auto state = detail_text(d, "state");
  const auto finished = detail_nullable(d, "finished_at");
  const auto root = detail_nullable(d, "root");
  const auto resumes = detail_int(d, "resumes");
  const auto cases = detail_int(d, "cases");
  if (!state || !finished || !root || !resumes || !cases) return std::nullopt;
  return Snapshot{*state, *finished, *root, *resumes, *cases};
}

json snapshot_json(const RunFacts& r) {
  return {{"state", r.state}, {"finished_at", text_or_null(r.finished_at)}, {"resumes", r.resumes},
          {"root", text_or_null(r.root)}, {"cases", r.cases}};
}

}  // namespace

bool present(sqlite3* db) {
  sql::Statement s(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'manifest'");
  return s.step();
}

std::string genesis(const std::string& origin) { return sha256_hex("d9m-manifest-v1:" + origin); }

std::string canonical(const ManifestEvent& e) {
  return json_text(json::array({"manifest", e.origin, e.seq, e.at, e.event, e.run_id, e.detail}));
}

std::string link_of(const ManifestEvent& e) { return Store::chain_link(e.prev, canonical(e)); }

std::string own_origin(sqlite3* db) {
  {
    sql::Statement s(db, "SELECT id FROM manifest_origin ORDER BY id LIMIT 1");
    if (s.step()) return s.text(0);
  }
  const std::string id = random_run_id();
  sql::Statement(db, "INSERT INTO manifest_origin(id) VALUES (?)").bind(1, id).run();
  return id;
}

void append(sqlite3* db, const std::string& event, const std::string& run_id, const json& detail) {
  ManifestEvent e;
  e.origin = own_origin(db);
  e.prev = genesis(e.origin);
  {
    // The head of this origin's chain (of the longest branch, should the file have been copied
    // and merged back).
    sql::Statement h(db, "SELECT link, seq FROM manifest WHERE origin = ? ORDER BY seq DESC, link LIMIT 1");
    h.bind(1, e.origin);
    if (h.step()) {
      e.prev = h.text(0);
      e.seq = h.integer(1) + 1;
    }
  }
  e.at = utc_now();
  e.event = event;
  e.run_id = run_id;
  e.detail = json_text(detail);
  e.link = link_of(e);
  sql::Statement(db, "INSERT INTO manifest(link, prev, origin, seq, at, event, run_id, detail) VALUES (?,?,?,?,?,?,?,?)")
      .bind(1, e.link).bind(2, e.prev).bind(3, e.origin).bind(4, e.seq).bind(5, e.at).bind(6, e.event).bind(7, e.run_id)
      .bind(8, e.detail).run();
}

std::vector<ManifestEvent> read_all(sqlite3* db) {
  std::vector<ManifestEvent> out;
  sql::Statement s(db, "SELECT link, prev, origin, seq, at, event, run_id, detail FROM manifest ORDER BY origin, seq, link");
  while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2), s.integer(3), s.text(4), s.text(5), s.text(6), s.text(7)});
  return out;
}

std::vector<std::string> heads(const std::vector<ManifestEvent>& events) {
  std::set<std::string> followed;
  for (const auto& e : events) followed.insert(e.prev);
  std::vector<std::string> out;
  for (const auto& e : events)
    if (!followed.count(e.link)) out.push_back(e.link);
  std::sort(out.begin(), out.end());
  return out;
}

RunAccount account_for(const RunFacts& run, const std::optional<std::string>& head, const std::vector<const ManifestEvent*>& events) {
  RunAccount a;
  std::vector<Snapshot> ended;
  std::set<std::int64_t> resumptions;
  for (const ManifestEvent* e : events) {
    const json d = parse_stored_json(e->detail);
    if (e->event == "begun" || e->event == "adopted") {
      a.started = true;
      const auto h = detail_text(d, "head");
      const auto v = detail_int(d, "chain_version");
      if (!h || !head || *h != *head) {
        a.start_matches = false;
        a.problems.push_back("its metadata (fingerprint, start time, host, GPUs, d9m version and commit, catalogue, N, threads, "
                             "arguments or plan) is not what the manifest recorded when it " +
                             std::string(e->event == "begun" ? "began" : "was adopted"));
      }
      if (!v || *v != run.chain_version) {
        a.start_matches = false;
        a.problems.push_back("its chain version " + std::to_string(run.chain_version) + " is not the one the manifest recorded");
      }
    }
    if (e->event == "resumed" || e->event == "adopted")
      if (const auto r = detail_int(d, "resumes")) resumptions.insert(*r);
    if (e->event == "ended" || (e->event == "adopted" && detail_text(d, "state").value_or("running") != "running")) {
      if (const auto s = snapshot_of(d)) ended.push_back(*s);
      else a.problems.push_back("the manifest's " + e->event + " event of it is malformed");
    }
  }
  if (!a.started) {
    a.problems.push_back("the manifest has no record of it beginning (a run inserted, or its events removed)");
    return a;
  }
  if (run.resumes > 0 && !resumptions.count(run.resumes))
    a.problems.push_back("it counts " + std::to_string(run.resumes) + " resumption(s), which the manifest never recorded");
  // A run only moves forward: one set back to an earlier resumption (the cases written since cut
  // off, its closing facts copied from the event that recorded that state) matches that event,
  // so only the later events show it.
  std::int64_t latest = 0;
  for (const auto& s : ended) latest = std::max(latest, s.resumes);
  if (!resumptions.empty()) latest = std::max(latest, *resumptions.rbegin());
  if (run.resumes < latest)
    a.problems.push_back("the manifest recorded it resumed " + std::to_string(latest) + " time(s), but it counts " +
                         std::to_string(run.resumes) + " (set back to an earlier state, the cases written since removed?)");
  if (run.state == "running") {
    for (const auto& s : ended)
      if (s.resumes == run.resumes && s.cases >= run.cases)
        a.problems.push_back("it is marked running, but the manifest recorded it " + s.state + " with " + std::to_string(s.cases) +
                             " cases (its state set back, or cases removed)");
  } else {
    const bool recorded = std::any_of(ended.begin(), ended.end(), [&](const Snapshot& s) {
      return s.state == run.state && s.finished_at == run.finished_at && s.resumes == run.resumes && s.root == run.root &&
             s.cases == run.cases;
    });
    if (!recorded)
      a.problems.push_back("its closing facts (state " + run.state + ", finish time, resumptions, root, " + std::to_string(run.cases) +
                           " cases) are not what the manifest recorded when it ended");
  }
  return a;
}

std::vector<EndedFacts> ended_facts(const std::vector<const ManifestEvent*>& events) {
  std::vector<EndedFacts> out;
  for (const ManifestEvent* e : events) {
    if (e->event != "ended" && e->event != "adopted") continue;
    const json d = parse_stored_json(e->detail);
    if (e->event == "adopted" && detail_text(d, "state").value_or("running") == "running") continue;
    if (const auto s = snapshot_of(d)) out.push_back({s->state, s->finished_at, s->root, s->resumes, s->cases});
  }
  return out;
}

std::int64_t adopt_unrecorded_runs(sqlite3* db) {
  std::map<std::string, std::vector<ManifestEvent>> by_run;
  for (auto& e : read_all(db)) by_run[e.run_id].push_back(std::move(e));
  std::int64_t adopted = 0;
  for (const RunFacts& r : read_run_facts(db)) {
    const auto head = Store::run_head(db, r.id);
    if (!head) continue;  // no fingerprint row: nothing to fix its metadata by; verify names it
    std::vector<const ManifestEvent*> events;
    for (const auto& e : by_run[r.id]) events.push_back(&e);
    const RunAccount a = account_for(r, head, events);
    // Only a run the manifest does not know, or a later state of one it knows as it is: never
    // one whose metadata or chain version disagrees with what was recorded (a fault, not news).
    if (a.problems.empty() || (a.started && !a.start_matches)) continue;
    json detail = snapshot_json(r);
    detail["chain_version"] = r.chain_version;
    detail["head"] = *head;
    append(db, "adopted", r.id, detail);
    ++adopted;
  }
  return adopted;
}

}  // namespace manifest

Evidence evidence_of(sqlite3* db) {
  Evidence ev;
  json runs = json::array();
  for (const RunFacts& r : read_run_facts(db))
    runs.push_back({r.id, r.state, r.root ? *r.root : Store::stored_chain(db, r.id).last});
  if (manifest::present(db)) ev.manifest_heads = manifest::heads(manifest::read_all(db));
  ev.digest = sha256_hex(json_text(json{{"schema", "d9m.evidence/1"}, {"runs", runs}, {"manifest_heads", ev.manifest_heads}}));
  return ev;
}

}  // namespace d9m
