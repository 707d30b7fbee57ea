-- When a placement's answer was lost (local clock). Reconciliation waits for the settle
-- delay and proves absence counting from here; sent_at stays the send time for matching.
ALTER TABLE orders ADD COLUMN lost_at INTEGER;
