-- The exchange's trading rules of each pair, as exchange-info last listed them: what
-- `svcbot status` (which never talks to the exchange) shows amounts and prices by.
CREATE TABLE pair_rules (
  symbol       TEXT PRIMARY KEY,
  base         TEXT NOT NULL,
  quote        TEXT NOT NULL,
  tick_size    TEXT NOT NULL,
  step_size    TEXT NOT NULL,
  updated_at   INTEGER NOT NULL
);
