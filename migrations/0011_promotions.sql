-- Promotion records: a strategy's exact source and params were let through the gates of a stage.
-- Live trading starts a strategy only when a live record matches its current hashes.
CREATE TABLE promotions (
  promotion_id    INTEGER PRIMARY KEY AUTOINCREMENT,
  strategy        TEXT NOT NULL,
  stage           TEXT NOT NULL CHECK (stage IN ('paper', 'live')),
  source_hash     TEXT NOT NULL,
  params_hash     TEXT NOT NULL,
  source_path     TEXT NOT NULL,
  evidence        TEXT NOT NULL,              -- JSON: the run ids and every gate with its measured value
  promoted_at     INTEGER NOT NULL
);
CREATE INDEX promotions_by_strategy ON promotions (strategy, stage, promotion_id);
