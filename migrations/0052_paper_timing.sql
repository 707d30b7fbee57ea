-- A paper run's replay applies each cancel when the venue applied it, and lets its strategy
-- hear each fill and order update when the paper strategy heard it, not at once.

-- When the venue says it cancelled an order (its own clock).
ALTER TABLE orders ADD COLUMN venue_cancelled_at INTEGER;

-- Cancel intents are recorded beside placements, numbered per tag among the cancels;
-- their reached_venue_at is when the venue cancelled the order they were sent for.
ALTER TABLE paper_intents ADD COLUMN kind TEXT NOT NULL DEFAULT 'place' CHECK (kind IN ('place', 'cancel'));

-- When the strategy was given each ticker, and the price it showed (the venue's time of the
-- ticker stays in `time`).
ALTER TABLE paper_tickers ADD COLUMN given_at INTEGER;
ALTER TABLE paper_tickers ADD COLUMN price TEXT;

-- When the strategy was given each order update and fill of the run (the daemon's clock):
-- the replay's strategy hears them then, not the moment the venue's matching made them.
CREATE TABLE paper_heard (
  run_id          INTEGER NOT NULL REFERENCES runs (run_id),
  seq             INTEGER NOT NULL,
  time            INTEGER NOT NULL,
  client_order_id TEXT,                    -- the updated order (null for a fill)
  kind            TEXT NOT NULL,           -- an order update's kind, or 'fill'
  fill_id         TEXT,                    -- the fill's id when kind is 'fill'
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
