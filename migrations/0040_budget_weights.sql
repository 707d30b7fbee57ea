-- Endpoint weights the client learned from the budget headers, per key id: the next
-- process on the same key starts knowing them instead of guessing, so that a restart
-- (a crash loop above all) does not hold heavy requests back until a window has room
-- for a wrong guess.
CREATE TABLE budget_weights (
  key_id      TEXT NOT NULL,
  endpoint    TEXT NOT NULL,          -- method and Dialect path, e.g. "GET /api/spot/fills"
  weight      INTEGER NOT NULL,
  learned_at  INTEGER NOT NULL,
  PRIMARY KEY (key_id, endpoint)
);
