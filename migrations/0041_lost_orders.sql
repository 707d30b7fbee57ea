-- Orders the service no longer knows: how many status probes in a row answered
-- ORDER_NOT_FOUND past the settle window (the order is marked lost after a bounded
-- number), and when an operator acknowledged a lost order (health names it until then).
ALTER TABLE orders ADD COLUMN not_found_probes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN acknowledged_at INTEGER;
