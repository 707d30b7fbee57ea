-- The optimiser's results file: one row per run and one per trial result, keyed by run id
-- and trial key and written once. IF NOT EXISTS adopts a file written before its schema was
-- migrated (it carried user_version 1 and these very tables).

CREATE TABLE IF NOT EXISTS optimize_runs (
  run_id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at_ms BIGINT NOT NULL,
  strategy TEXT NOT NULL,
  source_hash TEXT NOT NULL,
  data TEXT NOT NULL,
  data_hash TEXT NOT NULL,
  symbol TEXT NOT NULL,
  settings TEXT NOT NULL,
  outcome TEXT
);

CREATE TABLE IF NOT EXISTS optimize_results (
  run_id INTEGER NOT NULL REFERENCES optimize_runs(run_id),
  job_key TEXT NOT NULL,
  params TEXT NOT NULL,
  from_ms INTEGER NOT NULL,
  to_ms INTEGER NOT NULL,
  metrics TEXT,
  error TEXT,
  PRIMARY KEY (run_id, job_key)
) WITHOUT ROWID;
