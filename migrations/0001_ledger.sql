-- The order journal and the fills ledger. Amounts are exact decimal strings (TEXT),
-- never REAL: a float must not touch a price, quantity, balance or fee.

-- Every strategy intent, written before anything is sent.
CREATE TABLE intents (
  intent_id        TEXT PRIMARY KEY,           -- "<strategyId>:<seq>", deterministic per strategy
  strategy_id      TEXT NOT NULL,
  seq              INTEGER NOT NULL,
  tag              TEXT NOT NULL,
  type             TEXT NOT NULL CHECK (type IN ('limit', 'market', 'stop-limit', 'cancel')),
  body             TEXT NOT NULL,              -- the intent as exact JSON
  outcome          TEXT,                       -- approved | refused
  refusal          TEXT,                       -- refusal reason when refused
  created_at       INTEGER NOT NULL,
  UNIQUE (strategy_id, seq)
);
CREATE INDEX intents_by_tag ON intents (strategy_id, tag);

-- One row per placement: journaled ones carry their intent, adopted external ones do not.
CREATE TABLE orders (
  order_id          INTEGER PRIMARY KEY AUTOINCREMENT,
  intent_id         TEXT UNIQUE REFERENCES intents (intent_id),
  strategy_id       TEXT,                      -- null for external orders
  tag               TEXT,
  origin            TEXT NOT NULL CHECK (origin IN ('journal', 'external')),
  client_order_id   TEXT UNIQUE,               -- created by the service on acceptance
  state             TEXT NOT NULL,
  kinds_seen        TEXT NOT NULL DEFAULT '',  -- comma-separated order kinds as reported, in order
  code              TEXT,                      -- reject or refusal code
  symbol            TEXT NOT NULL,
  side              TEXT NOT NULL,
  type              TEXT NOT NULL,
  base_qty          TEXT,
  quote_order_qty   TEXT,
  limit_price       TEXT,
  stop_price        TEXT,
  max_slippage_bps  INTEGER,
  filled_base_qty   TEXT NOT NULL DEFAULT '0',
  avg_price         TEXT,
  lock_asset        TEXT,                      -- what the order holds while open (risk reservation)
  lock_amount       TEXT,
  cancel_requested  INTEGER NOT NULL DEFAULT 0,
  sent_at           INTEGER,                   -- ms, when the placement was sent (reconcile time window)
  accepted_at       INTEGER,
  terminal_at       INTEGER,
  next_poll_at      INTEGER,
  polls             INTEGER NOT NULL DEFAULT 0,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL
);
CREATE INDEX orders_by_state ON orders (state);
CREATE INDEX orders_by_strategy_tag ON orders (strategy_id, tag);

-- Every state change of an order, for audit and for replaying what happened.
CREATE TABLE order_events (
  event_id    INTEGER PRIMARY KEY AUTOINCREMENT,
  order_id    INTEGER NOT NULL REFERENCES orders (order_id),
  from_state  TEXT,
  to_state    TEXT NOT NULL,
  kind        TEXT,
  code        TEXT,
  detail      TEXT,
  at          INTEGER NOT NULL
);
CREATE INDEX order_events_by_order ON order_events (order_id);

-- The fills ledger: exact decimal strings plus the row exactly as the service sent it.
CREATE TABLE fills (
  fill_id          TEXT PRIMARY KEY,
  client_order_id  TEXT,
  symbol           TEXT NOT NULL,
  side             TEXT NOT NULL,
  liquidity        TEXT NOT NULL,
  price            TEXT NOT NULL,
  base_qty         TEXT NOT NULL,
  quote_qty        TEXT NOT NULL,
  fee              TEXT NOT NULL,
  fee_asset        TEXT NOT NULL,
  time             INTEGER NOT NULL,
  raw              TEXT NOT NULL,
  synced_at        INTEGER NOT NULL
);
CREATE INDEX fills_by_order ON fills (client_order_id);
CREATE INDEX fills_by_time ON fills (time);

-- Fill cursor high-water mark and backfill progress, one row per stream (e.g. "fills").
CREATE TABLE sync_state (
  stream             TEXT PRIMARY KEY,
  high_water_fill_id TEXT,     -- newest fill id stored by a completed pass
  high_water_time    INTEGER,
  backfill_cursor    TEXT,     -- nextCursor to resume an interrupted pass from
  backfill_done      INTEGER NOT NULL DEFAULT 0,
  pass_top_fill_id   TEXT,     -- newest fill id seen by the pass in progress
  pass_top_time      INTEGER,
  updated_at         INTEGER NOT NULL
);
