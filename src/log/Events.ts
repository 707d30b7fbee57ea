/**
 * The event catalog: every structured log line svcbot and svc-venue write has an
 * `event` field naming one of these. Names are stable — dashboards, alerts and
 * the runbook are built on them. `level` is the level the line is written at.
 */
export type EventLevel = "debug" | "info" | "warn" | "error" | "fatal"

interface EventSpec {
  readonly level: EventLevel
  readonly meaning: string
}

const define = <const T extends Record<string, EventSpec>>(catalog: T): T => catalog

export const EventCatalog = define({
  // process and configuration
  "app.started": { level: "info", meaning: "a svcbot command started; carries mode and version" },
  "app.stopping": { level: "info", meaning: "shutdown began (signal or --for elapsed)" },
  "app.stopped": { level: "info", meaning: "shutdown finished; carries the exit code" },
  "engine.stopped": {
    level: "info",
    meaning:
      "the engine's graceful stop finished its work: every placement answered or withdrawn, cancel-on-stop confirmed, fills synced; carries withdrawn, ordersLeftOpen (resting by choice without cancelOnStop) and tookMs"
  },
  "engine.loop-failed": {
    level: "error",
    meaning: "a background loop of the engine (tracker, fill sync, reconcile, the sender's marker or answer recorder) ended in a defect, a bug: its cause is in detail, and the loop starts again after restartInMs"
  },
  "engine.stop-incomplete": {
    level: "warn",
    meaning:
      "the engine's graceful stop ran out of its bound (stopWithinMs) or of the rate budget before its work was done; carries what it left for the next start, whose reconcile finishes it: unsentIntents, placementsInDoubt (sent, answer not heard), ordersLeftOpen (cancel not confirmed), fillsSynced false, notRecorded (orders whose last changes a failing storage refused, with storage naming the file and the cause: the stop worked from memory); or, for a stop during start-up, the journal could not be opened (error). The exit code stays 0"
  },
  "config.invalid": { level: "error", meaning: "the configuration failed validation; every problem is listed by field" },
  "config.loaded": { level: "info", meaning: "the configuration was read and validated" },
  heartbeat: { level: "info", meaning: "once a minute per strategy: position, open orders, PnL, budget use" },
  "health.listening": { level: "info", meaning: "the /healthz and /metrics endpoints are serving; carries both urls" },
  "health.changed": { level: "info", meaning: "/healthz changed status; carries the status and every reason it is not ready" },
  "console.ready": { level: "info", meaning: "the console's API, page and event stream answer on the health server (health.port): the daemon trades" },
  "console.client-dropped": { level: "info", meaning: "a console page's event stream fell behind (more than its bound waiting in the socket) and was closed; the page reconnects and reads the state afresh" },
  "operator.action": { level: "info", meaning: "an operator used a console control (pause, resume, stop-entries, cancel-all, ack-lost); carries action, instance and outcome, one line per action" },
  "startup.waiting": { level: "warn", meaning: "start-up met a transient (server errors, timeouts, refused connections, an auth block or failure, an exchange listing no pair yet) and waits it out with backoff; the process stays up and not ready" },

  // the venue
  "venue.listening": { level: "info", meaning: "svc-venue is ready; carries its url" },
  "venue.dev-keys": { level: "info", meaning: "svc-venue started with the built-in development accounts and keys" },
  "venue.stopped": { level: "info", meaning: "svc-venue stopped" },
  "venue.fault": { level: "info", meaning: "a fault profile was set on svc-venue" },
  "venue.follow-lost": { level: "warn", meaning: "the venue svc-venue follows (--follow, venue.follow) is down or answers errors; prices stay at its last price until it answers again (one line per outage)" },
  "venue.follow-resumed": { level: "info", meaning: "the followed venue answers again; prices follow it again and the missed candles are fetched; carries lostForMs" },
  "venue.follow-slowed": { level: "info", meaning: "the follower polls more slowly: the followed venue reported its weight near the limit (once per window) or answered 429 (waits Retry-After)" },

  // client, clock, budgets, auth
  "clock.corrected": { level: "warn", meaning: "the server refused a timestamp; the clock offset was learned from server_time_ms" },
  "budget.status": { level: "info", meaning: "once a minute: weight and order budgets used and their limits" },
  "budget.wait": { level: "info", meaning: "a request waits for the next budget window instead of earning a 429" },
  "rate.limited": { level: "warn", meaning: "the server answered 429 RATE_LIMITED; the bucket is held for Retry-After" },
  "auth.blocked": { level: "error", meaning: "the server blocked key traffic after repeated failed authentication; all key requests pause for Retry-After" },
  "auth.invalid": { level: "error", meaning: "API_KEY_INVALID: the key was revoked, expired, or the secret or signature is wrong; key traffic stops until the probe interval" },
  "auth.not-permitted": { level: "error", meaning: "API_KEY_NOT_PERMITTED: the key lacks the scope named in requiredScope" },
  "account.blocked": { level: "error", meaning: "ACCOUNT_FROZEN, GEO_RESTRICTED_IP or LEGAL_ACCEPTANCE_REQUIRED: new placements stop until resolved on the website" },
  "request.retry": { level: "warn", meaning: "a GET or cancel is retried after a 5xx or network error" },
  "request.failed": { level: "warn", meaning: "a request failed with an error the caller must handle" },
  "venue.unreachable": { level: "error", meaning: "the venue has not answered (network errors, timeouts, server errors) for longer than the threshold; trading waits and health is not ready" },
  "venue.reachable": { level: "info", meaning: "the venue answers again after being unreachable" },

  // orders and fills
  "order.intent": { level: "info", meaning: "a strategy intent was journaled before it is sent" },
  "order.submitted": { level: "debug", meaning: "a placement request is being sent" },
  "order.accepted": { level: "info", meaning: "the server accepted a placement (HTTP 202) and created its clientOrderId" },
  "order.status": { level: "debug", meaning: "an order's kind changed" },
  "order.filled": { level: "info", meaning: "an order reached kind fill" },
  "order.rejected": { level: "warn", meaning: "an order reached kind rejected; carries the code" },
  "order.refused": { level: "warn", meaning: "the server refused a placement before accepting it; carries the code" },
  "order.cancelled": { level: "info", meaning: "an order was cancelled" },
  "order.withdrawn": { level: "info", meaning: "a placement journaled but not yet sent when the engine began to stop was withdrawn: it ends refused with code STOPPING and is never sent" },
  "order.cancel-too-late": { level: "info", meaning: "a cancel reached the venue after its order had filled or been rejected (409 ORDER_NOT_OPEN); the order's status says which, and the cancel is not sent again" },
  "order.unknown": { level: "warn", meaning: "a placement's answer was lost (timeout, reset, 5xx); it will be reconciled, never re-sent blindly" },
  "order.reconciled": { level: "info", meaning: "an unknown placement was resolved: adopted as accepted, or proven not placed" },
  "order.kind-unknown": { level: "warn", meaning: "the server reported an order kind svcbot does not know; polling goes on" },
  "reconcile.started": { level: "info", meaning: "reconciliation of journal, open orders and fills began" },
  "reconcile.completed": { level: "info", meaning: "reconciliation finished; carries counts of adopted, resolved and external orders" },
  "order.lost": { level: "error", meaning: "the venue no longer knows an order (ORDER_NOT_FOUND past the settle window, absent from open orders and fills); it is no longer polled and shows in health until acknowledged" },
  "reconcile.mismatch": { level: "error", meaning: "the ledger and the server disagree in a way reconciliation could not resolve" },
  "fill.synced": { level: "info", meaning: "fill pages were stored; carries the count of new fills" },
  "risk.refused": { level: "warn", meaning: "a pre-trade risk check refused an intent; it was not sent" },
  "risk.kill-switch": { level: "error", meaning: "the daily loss limit was reached; new placements stop for the day" },

  // strategies
  "strategy.started": { level: "info", meaning: "a strategy instance started" },
  "strategy.stopped": { level: "info", meaning: "a strategy instance stopped" },
  "strategy.error": { level: "error", meaning: "a strategy handler threw; that instance is paused, the others go on" },
  "strategy.missed": {
    level: "info",
    meaning:
      "a strategy instance started while final order updates or fills of its orders were owed to it (cancel-on-stop, fills while the process was down, the start-up reconcile's decisions): a restored instance hears them first, in the order they came about; one started from init does not; carries orderUpdates and fills"
  },
  "strategy.outbox": { level: "warn", meaning: "intents saved with a strategy's state but not journaled before a stop are handed to the engine on start" },
  "strategy.backoff": { level: "warn", meaning: "a strategy instance's intents were refused or rejected repeatedly for the same reason; it may not submit again until the backoff passes" },
  "strategy.paused": { level: "error", meaning: "a strategy instance was paused after repeated refusals or rejections of one kind; carries the reason; `svcbot resume INSTANCE` or a restart clears it" },
  "strategy.resumed": { level: "info", meaning: "a paused strategy instance was resumed (`svcbot resume`)" },
  "strategy.throttled": { level: "warn", meaning: "a strategy instance emitted more intents in a minute than its ceiling; the excess was refused unchecked (logged once a minute per instance)" },
  "strategy.warmup": { level: "info", meaning: "intents a strategy emitted while its warm-up history was replayed were dropped: warm-up feeds indicators only" },
  "strategy.demoted": { level: "error", meaning: "a strategy's source or params changed since its live promotion; it will not run live" },

  // backtests and promotion
  "backtest.completed": { level: "info", meaning: "a backtest finished; carries its metrics" },
  "promotion.granted": { level: "info", meaning: "a strategy was promoted" },
  "promotion.refused": { level: "warn", meaning: "a promotion was refused; carries every failed gate" },
  "paper.started": { level: "info", meaning: "a paper run of a strategy instance started recording evidence; carries its run id and allocation" },
  "paper.recorded": { level: "info", meaning: "a paper run ended cleanly and is complete as promotion evidence; carries its candles, fills and PnL" },
  "paper.interrupted": { level: "info", meaning: "paper runs a previous daemon left running (it did not stop cleanly) were marked interrupted; they keep what they recorded" },
  "paper.not-recorded": { level: "info", meaning: "a paper run could not be recorded as evidence (the pair is unknown, or a checkpoint could not be written); carries the reason" },
  "paper.tape-gap": { level: "warn", meaning: "the venue no longer had some price steps of a paper run when they were read; the run's replay misses them" },

  // optimisation on a cluster
  "library.log": { level: "info", meaning: "a line of a library svcbot runs on (the cluster's runner: listening, shard assignment, a lost connection), at the library's own level; its text in message" },
  "worker.started": { level: "info", meaning: "a svcbot worker joined an optimisation cluster; carries its address and the cluster's masked URL" },
  "optimize.study-loaded": { level: "info", meaning: "a worker prepared a study (strategy and dataset, fetched once by content hash) for the trials that follow" },
  "optimize.batch-done": {
    level: "info",
    meaning: "a worker ran a batch's missing optimisation trials and stored their results; carries the run id, how many ran in how many ms, every job key written and the error of any trial that failed"
  },

  // storage and alerts
  "db.migrated": { level: "info", meaning: "database migrations were applied" },
  "storage.failed": {
    level: "error",
    meaning:
      "a write to a database file was refused by its storage (disk full, read-only, I/O error, cannot open, permission denied, locked by another program), once per fault; carries path, cause and the error. New placements stop, strategies pause, cancels still go out, /healthz names the file and the cause until a write succeeds"
  },
  "storage.still-failing": { level: "warn", meaning: "a database file's writes are still refused; at most once a minute while the fault stands; carries path, cause, forMs and refusedWrites by cause" },
  "storage.recovered": { level: "info", meaning: "a database file takes writes again after storage.failed (a probe or a real write succeeded); carries path, cause and downMs. Trading resumes on its own" },
  "alert.sent": { level: "info", meaning: "an alert webhook was delivered" },
  "alert.failed": { level: "warn", meaning: "an alert webhook could not be delivered after its retries" }
})

export type EventName = keyof typeof EventCatalog
export const eventNames = Object.keys(EventCatalog) as ReadonlyArray<EventName>
export const isEventName = (name: string): name is EventName => Object.hasOwn(EventCatalog, name)
