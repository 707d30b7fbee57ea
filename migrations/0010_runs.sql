-- Every backtest and paper run, the evidence that promotion gates are checked against.
-- A run is tied to the exact strategy source and params by their SHA-256 hashes.
CREATE TABLE runs (
  run_id          INTEGER PRIMARY KEY AUTOINCREMENT,
  kind            TEXT NOT NULL CHECK (kind IN ('backtest', 'paper')),
  strategy        TEXT NOT NULL,
  source_hash     TEXT NOT NULL,              -- sha256 of the strategy file's bytes
  params_hash     TEXT NOT NULL,              -- sha256 of the canonical params JSON
  params          TEXT NOT NULL,              -- the canonical params JSON itself
  symbol          TEXT NOT NULL,
  data_source     TEXT NOT NULL,              -- "csv:<path>", "synthetic:<seed>:<candles>" or "venue:<url>"
  data_from_ms    INTEGER NOT NULL,           -- open time of the first candle
  data_to_ms      INTEGER NOT NULL,           -- close time of the last candle
  candles         INTEGER NOT NULL,
  metrics         TEXT NOT NULL,              -- metrics as exact JSON (amounts as decimal strings)
  tracking_error_pct TEXT,                    -- paper runs: largest gap to the backtest of the same candles
  recorded_at     INTEGER NOT NULL
);
CREATE INDEX runs_by_code ON runs (strategy, source_hash, params_hash, kind, run_id);
