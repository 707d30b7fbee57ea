-- Intents a strategy emitted, written in the same transaction as the state that
-- emitted them, and deleted in the transaction that journals each one. A crash in
-- between leaves them here, and they are handed to the engine when the instance
-- starts again: the state never waits on an intent that was lost, and an intent
-- is never journaled twice.
CREATE TABLE strategy_outbox (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  strategy_id  TEXT NOT NULL,
  intent       TEXT NOT NULL,          -- JSON, amounts as decimal strings
  created_at   INTEGER NOT NULL
);
CREATE INDEX strategy_outbox_by_strategy ON strategy_outbox (strategy_id, id);
