-- Each strategy instance's state survives restarts: the JSON its state schema
-- encodes, written after every handled event, in the same transaction order as
-- the intents the event produced.
CREATE TABLE strategy_state (
  strategy_id        TEXT PRIMARY KEY,
  strategy           TEXT NOT NULL,          -- plugin name
  version            TEXT NOT NULL,          -- plugin version that wrote the state
  state              TEXT NOT NULL,          -- JSON
  last_candle_open   INTEGER,                -- open time of the last candle delivered (ms), so none is delivered twice
  paused_reason      TEXT,                   -- set when a handler threw; the instance stays paused until restarted
  updated_at         INTEGER NOT NULL
);
