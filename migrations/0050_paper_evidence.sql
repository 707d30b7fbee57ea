-- Paper runs written as they happen. A run row is inserted when the instance starts
-- (status 'running'), extended at every checkpoint in the same transaction as the rows it
-- summarises, and closed as 'completed' by a clean stop; a run still 'running' when the
-- daemon starts again was cut off (kill -9, power) and becomes 'interrupted', keeping
-- everything up to its last checkpoint. A paper run holds what its parity replay needs:
-- the instance's setup and starting state, the candles its strategy was given, the
-- venue's price steps, its placement intents with when their orders reached the venue,
-- and its fills.
ALTER TABLE runs ADD COLUMN status TEXT NOT NULL DEFAULT 'completed' CHECK (status IN ('running', 'completed', 'interrupted'));
ALTER TABLE runs ADD COLUMN instance_id TEXT;
ALTER TABLE runs ADD COLUMN started_at INTEGER;
ALTER TABLE runs ADD COLUMN ended_at INTEGER;
-- JSON: allocation, pair rules, fees, settle delay, candle interval, the strategy's stored
-- state when the run started (null: it started fresh and warmed up on history).
ALTER TABLE runs ADD COLUMN setup TEXT;
CREATE INDEX runs_by_instance ON runs (instance_id, status);

CREATE TABLE paper_candles (
  run_id      INTEGER NOT NULL REFERENCES runs (run_id),
  open_time   INTEGER NOT NULL,
  open        TEXT NOT NULL,
  high        TEXT NOT NULL,
  low         TEXT NOT NULL,
  close       TEXT NOT NULL,
  volume      TEXT NOT NULL,
  warmup      INTEGER NOT NULL,            -- 1: history that only warmed indicators up
  seen_at     INTEGER NOT NULL,            -- when the strategy was given it
  fills_known INTEGER NOT NULL,            -- the run's fills stored by then (equity at this close counts them)
  PRIMARY KEY (run_id, open_time)
) WITHOUT ROWID;

-- When the strategy was given a ticker (the venue's time of it): the replay gives its own then.
CREATE TABLE paper_tickers (
  run_id  INTEGER NOT NULL REFERENCES runs (run_id),
  time    INTEGER NOT NULL,
  PRIMARY KEY (run_id, time)
) WITHOUT ROWID;

-- Every price the venue's matching saw for the run's pair, on the venue's clock.
CREATE TABLE paper_steps (
  run_id  INTEGER NOT NULL REFERENCES runs (run_id),
  seq     INTEGER NOT NULL,                -- 1, 2, 3… in the run (a restarted venue numbers its own from 1 again)
  time    INTEGER NOT NULL,
  price   TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- Placement intents of the run, numbered per tag (the replay ties its own intents to them).
CREATE TABLE paper_intents (
  run_id           INTEGER NOT NULL REFERENCES runs (run_id),
  intent_id        TEXT NOT NULL,
  tag              TEXT NOT NULL,
  occurrence       INTEGER NOT NULL,
  decided_at       INTEGER NOT NULL,
  client_order_id  TEXT,
  reached_venue_at INTEGER,                -- the venue's createdAt, else when its acceptance came back
  PRIMARY KEY (run_id, intent_id)
) WITHOUT ROWID;

CREATE TABLE paper_fills (
  run_id          INTEGER NOT NULL REFERENCES runs (run_id),
  fill_id         TEXT NOT NULL,
  intent_id       TEXT,                    -- null: an order from before the run (not compared)
  client_order_id TEXT,
  side            TEXT NOT NULL,
  liquidity       TEXT NOT NULL,
  price           TEXT NOT NULL,
  base_qty        TEXT NOT NULL,
  quote_qty       TEXT NOT NULL,
  fee             TEXT NOT NULL,
  fee_asset       TEXT NOT NULL,
  time            INTEGER NOT NULL,
  PRIMARY KEY (run_id, fill_id)
);  -- a rowid table: the rowid keeps the order the daemon stored them in

-- When the venue says it created an order (its own clock): a paper run's replay places the
-- order then.
ALTER TABLE orders ADD COLUMN venue_created_at INTEGER;
