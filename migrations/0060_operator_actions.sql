-- What an operator did to the running daemon through its controls (pause, resume,
-- stop-entries, cancel-all, lost/ack), one row per action with its outcome, so that
-- `svcbot status` and the console's API show it; and the instances whose new entries
-- an operator stopped (exits and cancels still go out) until they are resumed or the
-- daemon restarts. Owned by src/console/Actions.ts.
CREATE TABLE operator_actions (
  action_id  INTEGER PRIMARY KEY,
  at         INTEGER NOT NULL,
  action     TEXT NOT NULL,
  instance   TEXT,
  outcome    TEXT NOT NULL,
  detail     TEXT
);

CREATE TABLE entries_stopped (
  strategy_id  TEXT PRIMARY KEY,
  since        INTEGER NOT NULL
);
