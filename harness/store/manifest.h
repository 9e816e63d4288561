// The store's manifest (schema 3): an append-only, hash-chained log of run events, so that the
// store as a whole is tamper-evident, not only the rows of each run. Without it, deleting a
// whole run (its runs, case_runs and trials rows) or editing a run's metadata left a store that
// verified.
//
// Every store file appends to its own chain, named by a random origin id kept in
// manifest_origin; an event is linked to the one before it in its origin:
//   link = SHA-256(prev || "\n" || canonical(event)),  prev of seq 0 = genesis(origin).
// Rows are keyed by their link (content-addressed), so `d9m merge` copies other origins' events
// as they are and merging stays a union: idempotent and order-independent. A store file copied
// and written on both sides forks its origin's chain; both branches verify.
//
// Events, and what their detail (canonical JSON) fixes:
//   begun    a run began:       chain_version, head (Store::run_head: its metadata)
//   resumed  a run was resumed: resumes
//   ended    a run ended:       state, finished_at, resumes, root, cases (its case rows)
//   adopted  a run this file received without an event (migration from schema 2, or merge of an
//            older store): all of the above as the run stood then
//
// What the chain cannot show from inside the store: events cut off its end (with the runs they
// name). The heads (events no other event follows) are quoted by `d9m verify`, the reports and
// attestations, for anchoring outside the store.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d9m {

struct ManifestEvent {
  std::string link, prev, origin;
  std::int64_t seq = 0;
  std::string at, event, run_id, detail;
};

// A run as verify, the manifest and merge read it: its closing facts and its size.
struct RunFacts {
  std::string id, state;
  std::optional<std::string> finished_at, root;
  std::int64_t resumes = 0, cases = 0, trials_per_case = 0;
  int chain_version = 1;
};
// Every run of the store (of any schema), by id.
std::vector<RunFacts> read_run_facts(sqlite3* db);
// Whether `table` has `column` (older schemas lack the later columns).
bool has_column(sqlite3* db, const std::string& table, const std::string& column);

namespace manifest {

inline constexpr const char* kEvents[] = {"begun", "resumed", "ended", "adopted"};

// Whether the store has a manifest (schema 3 and later).
bool present(sqlite3* db);
std::string genesis(const std::string& origin);
// The event as it is chained: a JSON array of every column but link and prev.
std::string canonical(const ManifestEvent& e);
std::string link_of(const ManifestEvent& e);

// This file's own origin id; made (and stored) when the file has none yet.
std::string own_origin(sqlite3* db);
// Appends an event to this file's own chain. Call inside the write transaction that makes the
// change the event records, so that the two are committed together.
void append(sqlite3* db, const std::string& event, const std::string& run_id, const nlohmann::json& detail);
// Records every run without an event ('adopted'), in run id order. Returns how many.
std::int64_t adopt_unrecorded_runs(sqlite3* db);

std::vector<ManifestEvent> read_all(sqlite3* db);

// How the manifest accounts for a run as it stands, given every event naming it: whether it has
// a start event (begun or adopted), and what does not match (its head, its chain version, its
// closing facts, its resumptions). An empty list: the run is exactly as the manifest recorded.
struct RunAccount {
  bool started = false;
  bool start_matches = true;
  std::vector<std::string> problems;
};
RunAccount account_for(const RunFacts& run, const std::optional<std::string>& head, const std::vector<const ManifestEvent*>& events);
// The closing facts every ended (or adopted, not running) event of a run recorded, in event
// order; malformed events left out (account_for names them).
struct EndedFacts {
  std::string state;
  std::optional<std::string> finished_at, root;
  std::int64_t resumes = 0, cases = 0;
};
std::vector<EndedFacts> ended_facts(const std::vector<const ManifestEvent*>& events);
// The links no other event follows, sorted.
std::vector<std::string> heads(const std::vector<ManifestEvent>& events);

}  // namespace manifest

// What binds a report or an attestation to the store it came from: SHA-256 over every run's id,
// stored state and last link (its root once ended) and the manifest's heads. Any row added,
// removed or changed in a way `d9m verify` accepts changes it.
struct Evidence {
  std::string digest;
  std::vector<std::string> manifest_heads;
};
Evidence evidence_of(sqlite3* db);

}  // namespace d9m
