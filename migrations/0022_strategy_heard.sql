-- What each strategy instance has been handed of what became of its orders, written in the
-- transaction that saves the state the handling left: an intent's final order update
-- (answered_at) and each fill (heard_at). Whatever is final and not handed yet (the cancels of
-- cancel-on-stop, which run after the strategies stopped; what happened while the process was
-- down; what the start-up reconcile decided) is handed to the restored instance before anything
-- new, once. Cancel intents get no answer of their own and stay NULL.
ALTER TABLE intents ADD COLUMN answered_at INTEGER;
ALTER TABLE fills ADD COLUMN heard_at INTEGER;
CREATE INDEX intents_unanswered ON intents (strategy_id, seq) WHERE answered_at IS NULL AND type <> 'cancel';
CREATE INDEX fills_unheard ON fills (time, fill_id) WHERE heard_at IS NULL;

-- Rows from before this migration: nothing recorded what was handed, so a finished outcome counts
-- as handed when it came before its instance's state was last saved, and as owed when it came
-- after (that state cannot have seen it). An order still open is owed its final update.
UPDATE intents SET answered_at = COALESCE((SELECT o.terminal_at FROM orders o WHERE o.intent_id = intents.intent_id), created_at)
WHERE type <> 'cancel'
  AND COALESCE((SELECT o.terminal_at FROM orders o WHERE o.intent_id = intents.intent_id),
               CASE WHEN EXISTS (SELECT 1 FROM orders o WHERE o.intent_id = intents.intent_id) THEN NULL ELSE created_at END)
      <= (SELECT s.updated_at FROM strategy_state s WHERE s.strategy_id = intents.strategy_id);
UPDATE fills SET heard_at = synced_at
WHERE NOT EXISTS (
  SELECT 1 FROM orders o JOIN strategy_state s ON s.strategy_id = o.strategy_id
  WHERE o.client_order_id = fills.client_order_id AND fills.synced_at > s.updated_at
);
