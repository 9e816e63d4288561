-- d9m store, schema version 8 (Store::open migrates versions 1 to 7 forward, after a backup). user_version and application_id are set by the code.
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
  -- schema 7 (added by ALTER TABLE when migrating):
  num               INTEGER NOT NULL DEFAULT 0,  -- this file's own number for the row, >= 1 (trial_rows' key); not evidence: merge renumbers it
  -- schema 9 (added by ALTER TABLE when migrating):
  value_check       TEXT NOT NULL DEFAULT '',  -- canonical JSON of the first output's values against the serial reference (value_check.h), or ''
  PRIMARY KEY (run_id, case_id)
);
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
  PRIMARY KEY (run_id, case_id, trial, step, position)
  -- Each row's trial is one of the case's trials. Up to schema 6 a foreign key said so; from
  -- schema 7 trials is a view, which a foreign key cannot name, and d9m verify checks it.
) WITHOUT ROWID;
-- end of schema 6 (traces) -----------------------------------------------------------------------
-- schema 7 (compact trials) ---------------------------------------------------------------------
-- One row per trial, about four times faster to write than schema 6's (docs/PERFORMANCE.md, "Store,
-- schema 7"): an integer key instead of the 100 characters of run and case ids, and the digest and
-- link as bytes instead of hex. The view `trials` below shows the rows as schema 6 stored them (run_id, case_id, trial,
-- hex digest and link), and takes edits as that table did; every reader goes through it.
CREATE TABLE trial_rows (
  id               INTEGER PRIMARY KEY,  -- case_runs.num * 2^32 + trial: a case's trials are one range of the table
  digest           BLOB NOT NULL,        -- the digest's 16 bytes; TEXT when it is not 32 lower-case hex digits (kept as written)
  elapsed_ns       INTEGER NOT NULL,
  diff_count       INTEGER,              -- the diff columns are set only when digest differs from trial 0
  diff_max_abs     REAL,
  diff_max_ulp     INTEGER,
  diff_first_index INTEGER,
  chain            BLOB NOT NULL,        -- the link's 32 bytes, SHA-256(previous link || this row); TEXT as digest
  choice           TEXT NOT NULL DEFAULT ''  -- what an autotuning variant chose in this trial (an algorithm), or ''
);
CREATE UNIQUE INDEX case_runs_by_num ON case_runs(num);
CREATE VIEW trials AS
SELECT cr.run_id AS run_id, cr.case_id AS case_id, t.id - cr.num * 4294967296 AS trial,
       CASE typeof(t.digest) WHEN 'blob' THEN lower(hex(t.digest)) ELSE t.digest END AS digest,
       t.elapsed_ns AS elapsed_ns, t.diff_count AS diff_count, t.diff_max_abs AS diff_max_abs,
       t.diff_max_ulp AS diff_max_ulp, t.diff_first_index AS diff_first_index,
       CASE typeof(t.chain) WHEN 'blob' THEN lower(hex(t.chain)) ELSE t.chain END AS chain,
       t.choice AS choice
FROM case_runs cr JOIN trial_rows t ON t.id BETWEEN cr.num * 4294967296 AND cr.num * 4294967296 + 4294967295;
-- Edits through the view land in trial_rows (a digest or link written so is kept as TEXT).
CREATE TRIGGER trials_insert INSTEAD OF INSERT ON trials BEGIN
  SELECT RAISE(ABORT, 'trials: no case_runs row for this run_id and case_id')
   WHERE NOT EXISTS (SELECT 1 FROM case_runs WHERE run_id = NEW.run_id AND case_id = NEW.case_id);
  SELECT RAISE(ABORT, 'trials: trial must be an integer from 0 to 2^32 - 1')
   WHERE typeof(NEW.trial) != 'integer' OR NEW.trial < 0 OR NEW.trial > 4294967295;
  INSERT INTO trial_rows(id, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain, choice)
  VALUES ((SELECT num FROM case_runs WHERE run_id = NEW.run_id AND case_id = NEW.case_id) * 4294967296 + NEW.trial,
          NEW.digest, NEW.elapsed_ns, NEW.diff_count, NEW.diff_max_abs, NEW.diff_max_ulp, NEW.diff_first_index, NEW.chain,
          coalesce(NEW.choice, ''));
END;
CREATE TRIGGER trials_update INSTEAD OF UPDATE ON trials BEGIN
  SELECT RAISE(ABORT, 'trials: no case_runs row for this run_id and case_id')
   WHERE NOT EXISTS (SELECT 1 FROM case_runs WHERE run_id = NEW.run_id AND case_id = NEW.case_id);
  SELECT RAISE(ABORT, 'trials: trial must be an integer from 0 to 2^32 - 1')
   WHERE typeof(NEW.trial) != 'integer' OR NEW.trial < 0 OR NEW.trial > 4294967295;
  UPDATE trial_rows
     SET id = (SELECT num FROM case_runs WHERE run_id = NEW.run_id AND case_id = NEW.case_id) * 4294967296 + NEW.trial,
         digest = CASE WHEN NEW.digest IS OLD.digest THEN digest ELSE NEW.digest END,
         elapsed_ns = NEW.elapsed_ns, diff_count = NEW.diff_count, diff_max_abs = NEW.diff_max_abs,
         diff_max_ulp = NEW.diff_max_ulp, diff_first_index = NEW.diff_first_index,
         chain = CASE WHEN NEW.chain IS OLD.chain THEN chain ELSE NEW.chain END, choice = NEW.choice
   WHERE id = (SELECT num FROM case_runs WHERE run_id = OLD.run_id AND case_id = OLD.case_id) * 4294967296 + OLD.trial;
END;
CREATE TRIGGER trials_delete INSTEAD OF DELETE ON trials BEGIN
  DELETE FROM trial_rows
   WHERE id = (SELECT num FROM case_runs WHERE run_id = OLD.run_id AND case_id = OLD.case_id) * 4294967296 + OLD.trial;
END;
-- end of schema 7 (compact trials) --------------------------------------------------------------
-- schema 8 (library versions) ------------------------------------------------------------------
-- A cache, not evidence: the loaded versions of cuBLAS and cuSPARSE a fingerprint names, as the
-- dynamic loader found them (harness/core/library_version.h), so that a run reads them here instead
-- of loading the libraries (about 0.1 s of a CUDA build's start). `context` is the SHA-256 of what
-- decides which file the loader picks (the directories it searches and /etc/ld.so.cache, with their
-- identities); `entry` the JSON of the soname, the file, its identity and the version. A changed
-- file or directory misses and loads as before. Outside the hash chains and the evidence digest,
-- and not merged: deleting rows costs the next run only the load.
CREATE TABLE library_versions (
  library TEXT NOT NULL,
  context TEXT NOT NULL,
  entry TEXT NOT NULL,
  written_at TEXT NOT NULL,
  PRIMARY KEY (library, context)
) WITHOUT ROWID;
-- end of schema 8 (library versions) ------------------------------------------------------------
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
