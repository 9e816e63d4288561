-- d9m store, schema version 6 (Store::open migrates versions 1 to 5 forward, after a backup). user_version and application_id are set by the code.
CREATE TABLE fingerprints (
  id        TEXT PRIMARY KEY,          -- SHA-256 of canonical
  canonical TEXT NOT NULL              -- canonical JSON (sorted keys)
);
CREATE TABLE runs (
  id              TEXT PRIMARY KEY,    -- random 128-bit hex
  fingerprint_id  TEXT NOT NULL REFERENCES fingerprints(id),
  state           TEXT NOT NULL CHECK (state IN ('running', 'complete', 'interrupted')),
  started_at      TEXT NOT NULL,
  finished_at     TEXT,
  host            TEXT NOT NULL,
  gpu_uuids       TEXT NOT NULL,       -- JSON array: machine identity stays out of the fingerprint
  d9m_version     TEXT NOT NULL,
  d9m_commit      TEXT NOT NULL,
  catalog_digest  TEXT NOT NULL,
  trials_per_case INTEGER NOT NULL CHECK (trials_per_case > 0),
  threads         INTEGER NOT NULL,
  arguments       TEXT NOT NULL,       -- JSON of the command line
  chain_root      TEXT,                -- last link of the run's hash chain, set when the run ends
  -- schema 2 (added by ALTER TABLE when migrating, hence last and with defaults):
  plan_digest     TEXT NOT NULL DEFAULT '',   -- SHA-256 of the planned cases, N and threads: what --resume matches
  resumes         INTEGER NOT NULL DEFAULT 0,  -- how often the run was resumed after an interruption
  -- schema 3 (integrity; added by ALTER TABLE when migrating):
  chain_version   INTEGER NOT NULL DEFAULT 1   -- 2: the chain starts from the run's metadata and ends in a closing link (Store::run_head)
);
CREATE TABLE cases (
  id           TEXT PRIMARY KEY,       -- SHA-256 of the other columns
  op           TEXT NOT NULL,
  variant      TEXT NOT NULL,
  backend      TEXT NOT NULL,
  config       TEXT NOT NULL,          -- config name in the catalogue
  config_id    TEXT NOT NULL,          -- SHA-256 of {op, params, seed}, 16 hex digits
  params       TEXT NOT NULL,          -- canonical JSON
  seed         INTEGER NOT NULL,
  input_digest TEXT NOT NULL,
  output_dtype TEXT NOT NULL,
  output_shape TEXT NOT NULL,
  -- schema 4 (the precision axis; added by ALTER TABLE when migrating, hence last and with defaults):
  dtype        TEXT NOT NULL DEFAULT 'f32',      -- the config's float dtype: f32, f16, bf16, f64
  math         TEXT NOT NULL DEFAULT 'default'   -- a library op's math mode
);
CREATE TABLE case_runs (
  run_id            TEXT NOT NULL REFERENCES runs(id),
  case_id           TEXT NOT NULL REFERENCES cases(id),
  status            TEXT NOT NULL CHECK (status IN ('DETERMINISTIC', 'NONDETERMINISTIC', 'ERROR', 'UNSUPPORTED', 'SKIPPED')),
  detail            TEXT NOT NULL,
  claim_determinism TEXT NOT NULL,
  claim_source      TEXT NOT NULL,
  claim_reason      TEXT NOT NULL,
  claim_bit_equal_to TEXT NOT NULL,   -- variant whose output this one claims to equal bit for bit, or ''
  trials            INTEGER NOT NULL,
  distinct_digests  INTEGER NOT NULL,
  median_ns         INTEGER,
  min_ns            INTEGER,
  seq               INTEGER NOT NULL,  -- position of the case in its run: the chain's order
  chain             TEXT NOT NULL,     -- SHA-256(previous link || this row), see Store::put_case
  -- schema 3 (added by ALTER TABLE when migrating, hence last and with a default):
  role              TEXT NOT NULL DEFAULT '',  -- the variant's role; '' in rows written before schema 3
  -- schema 5 (batch invariance; added by ALTER TABLE when migrating):
  invariance        TEXT NOT NULL DEFAULT '',  -- canonical JSON of the sub-batches' evidence (batch_invariance.h), or ''
  PRIMARY KEY (run_id, case_id)
);
CREATE TABLE trials (
  run_id           TEXT NOT NULL,
  case_id          TEXT NOT NULL,
  trial            INTEGER NOT NULL CHECK (trial >= 0),
  digest           TEXT NOT NULL,
  elapsed_ns       INTEGER NOT NULL,
  diff_count       INTEGER,            -- the diff columns are set only when digest differs from trial 0
  diff_max_abs     REAL,
  diff_max_ulp     INTEGER,
  diff_first_index INTEGER,
  chain            TEXT NOT NULL,      -- SHA-256(previous link || this row)
  -- schema 5 (added by ALTER TABLE when migrating):
  choice           TEXT NOT NULL DEFAULT '',  -- what an autotuning variant chose in this trial (an algorithm), or ''
  PRIMARY KEY (run_id, case_id, trial),
  FOREIGN KEY (run_id, case_id) REFERENCES case_runs(run_id, case_id)
) WITHOUT ROWID;  -- the 100-character key is stored once (no rowid table plus key index)
-- schema 3 (integrity) --------------------------------------------------------------------------
-- The store's manifest: an append-only, hash-chained log of run events (begun, resumed, ended,
-- adopted), so that a whole run deleted, or a run's metadata or closing facts edited, no longer
-- matches it. Every store file appends to its own chain (its origin); merge copies the events of
-- other origins as they are. Rows are content-addressed by their link, so merging is a union.
CREATE TABLE manifest (
  link    TEXT PRIMARY KEY,   -- SHA-256(prev || '\n' || canonical row), see manifest.h
  prev    TEXT NOT NULL,      -- the link of the origin's previous event, or the origin's genesis
  origin  TEXT NOT NULL,      -- the store file that wrote the event (manifest_origin of that file)
  seq     INTEGER NOT NULL CHECK (seq >= 0),   -- position in the origin's chain
  at      TEXT NOT NULL,      -- when (UTC)
  event   TEXT NOT NULL CHECK (event IN ('begun', 'resumed', 'ended', 'adopted')),
  run_id  TEXT NOT NULL,
  detail  TEXT NOT NULL       -- canonical JSON: what the event fixes about the run
) WITHOUT ROWID;
CREATE INDEX manifest_by_origin ON manifest(origin, seq);
CREATE TABLE manifest_origin (
  id      TEXT PRIMARY KEY    -- this file's own chain: random 128-bit hex; merge keeps OUT's, never an input's
);
-- end of schema 3 (integrity) -------------------------------------------------------------------
-- schema 6 (traces) ------------------------------------------------------------------------------
-- A pipeline case's trace (DESIGN.md "Pipelines and traces"): one row per (trial, step, position)
-- of a training step's ops, what went in and what came out. Chained after the case's trials, in
-- (trial, step, position) order (Store::canonical_trace).
CREATE TABLE trace (
  run_id           TEXT NOT NULL,
  case_id          TEXT NOT NULL,
  trial            INTEGER NOT NULL CHECK (trial >= 0),
  step             INTEGER NOT NULL CHECK (step >= 0),
  position         INTEGER NOT NULL CHECK (position >= 0),  -- the op's place in the step
  name             TEXT NOT NULL,      -- the op's name in the pipeline
  op               TEXT NOT NULL,
  variant          TEXT NOT NULL,
  inputs           TEXT NOT NULL,      -- JSON array of the input digests, in argument order
  digest           TEXT NOT NULL,      -- the output's digest
  diff_count       INTEGER,            -- the diff columns: set only when the digest differs from trial 0's at (step, position)
  diff_max_abs     REAL,
  diff_max_ulp     INTEGER,
  diff_first_index INTEGER,
  chain            TEXT NOT NULL,
  PRIMARY KEY (run_id, case_id, trial, step, position),
  FOREIGN KEY (run_id, case_id, trial) REFERENCES trials(run_id, case_id, trial)
) WITHOUT ROWID;
-- end of schema 6 (traces) -----------------------------------------------------------------------
-- One row per case and stack, all runs together: the numbers every report starts from.
CREATE VIEW results AS
SELECT r.fingerprint_id AS stack,
       c.id AS case_id, c.op, c.variant, c.backend, c.config, c.config_id, c.input_digest,
       COUNT(t.trial) AS trials,
       COUNT(DISTINCT t.digest) AS distinct_digests,
       (SELECT t2.digest FROM trials t2 JOIN runs r2 ON r2.id = t2.run_id
         WHERE t2.case_id = c.id AND r2.fingerprint_id = r.fingerprint_id
         GROUP BY t2.digest ORDER BY COUNT(*) DESC, t2.digest LIMIT 1) AS digest,
       MIN(t.elapsed_ns) AS min_ns
FROM case_runs cr
JOIN runs r ON r.id = cr.run_id
JOIN cases c ON c.id = cr.case_id
LEFT JOIN trials t ON t.run_id = cr.run_id AND t.case_id = cr.case_id
GROUP BY r.fingerprint_id, c.id;
