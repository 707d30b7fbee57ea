/**
 * The optimiser's results file is opened like the daemon's database: the house pragmas and its
 * own migrations (migrations/results/). A file written before those migrations existed (its
 * schema marked by user_version 1) is adopted with its runs and results; one from a newer
 * svcbot is refused; the local run columns are the cluster's.
 */
import BetterSqlite3 from "better-sqlite3"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RUN_COLUMNS } from "../../src/optimize/PgResults.js"
import { ResultsStore, ResultsUnavailable } from "../../src/optimize/Results.js"

// The schema as the results store created it itself, before migrations/results/.
const USER_VERSION_SCHEMA = `
CREATE TABLE IF NOT EXISTS optimize_runs (
  run_id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at_ms BIGINT NOT NULL,
  strategy TEXT NOT NULL,
  source_hash TEXT NOT NULL,
  data TEXT NOT NULL,
  data_hash TEXT NOT NULL,
  symbol TEXT NOT NULL,
  settings TEXT NOT NULL,
  outcome TEXT
);
CREATE TABLE IF NOT EXISTS optimize_results (
  run_id INTEGER NOT NULL REFERENCES optimize_runs(run_id),
  job_key TEXT NOT NULL,
  params TEXT NOT NULL,
  from_ms INTEGER NOT NULL,
  to_ms INTEGER NOT NULL,
  metrics TEXT,
  error TEXT,
  PRIMARY KEY (run_id, job_key)
) WITHOUT ROWID;
`

const header = { createdAtMs: 1_700_000_000_000, strategy: "sma-crossover", sourceHash: "s1", data: "synthetic:7:1800", dataHash: "d1", symbol: "BTCUSDT", settings: { seed: 3 } }

let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "svcbot-results-"))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("results file", () => {
  it("adopts a file written with user_version 1, keeping its runs and results, and writes on after them", () => {
    const path = join(dir, "old.db")
    const old = new BetterSqlite3(path)
    old.pragma("journal_mode = WAL")
    old.exec(USER_VERSION_SCHEMA)
    old.pragma("user_version = 1")
    old.prepare("INSERT INTO optimize_runs (created_at_ms, strategy, source_hash, data, data_hash, symbol, settings, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .run(header.createdAtMs, header.strategy, header.sourceHash, header.data, header.dataHash, header.symbol, JSON.stringify(header.settings), JSON.stringify({ best: "k1" }))
    old.prepare("INSERT INTO optimize_results (run_id, job_key, params, from_ms, to_ms, metrics, error) VALUES (1, 'k1', '{\"fast\":3}', 10, 20, NULL, 'no trades')").run()
    old.close()

    const store = ResultsStore.open(path)
    try {
      expect(store.runIds()).toEqual([1])
      expect(store.run(1)).toEqual({ runId: 1, ...header, outcome: { best: "k1" } })
      expect(store.results(1)).toEqual([{ key: "k1", params: '{"fast":3}', fromMs: 10, toMs: 20, error: "no trades" }])
      const next = store.startRun({ ...header, createdAtMs: header.createdAtMs + 1 })
      expect(next).toBe(2)
      store.record(next, [{ key: "k1", params: '{"fast":3}', fromMs: 10, toMs: 20 }], [{ key: "k1", error: "again" }])
      expect(store.result(next, "k1")).toEqual({ key: "k1", error: "again" })
      expect(store.result(1, "k1")).toEqual({ key: "k1", error: "no trades" })
    } finally {
      store.close()
    }

    const db = new BetterSqlite3(path, { readonly: true })
    try {
      expect(db.prepare("SELECT version, name FROM schema_migrations").all()).toEqual([{ version: 1, name: "results" }])
      expect(db.pragma("journal_mode", { simple: true })).toBe("wal")
    } finally {
      db.close()
    }
    // Opened again, nothing is left to migrate and the rows stay.
    const reopened = ResultsStore.open(path)
    try {
      expect(reopened.runIds()).toEqual([2, 1])
    } finally {
      reopened.close()
    }
  })

  it("refuses a file a newer svcbot migrated further", () => {
    const path = join(dir, "newer.db")
    ResultsStore.open(path).close()
    const db = new BetterSqlite3(path)
    db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'later', 0)").run()
    db.close()
    expect(() => ResultsStore.open(path)).toThrow(ResultsUnavailable)
    expect(() => ResultsStore.open(path)).toThrow(/schema version 9999/)
  })

  it("has the run columns the cluster's Postgres has", () => {
    const path = join(dir, "columns.db")
    ResultsStore.open(path).close()
    const db = new BetterSqlite3(path, { readonly: true })
    try {
      const local = (db.prepare("SELECT name, type, \"notnull\" FROM pragma_table_info('optimize_runs') WHERE name <> 'run_id'").all() as Array<{ name: string; type: string; notnull: number }>).map(
        (c) => `${c.name} ${c.type}${c.notnull === 1 ? " NOT NULL" : ""}`
      )
      const cluster = RUN_COLUMNS.split(",").map((c) => c.trim())
      expect(local).toEqual(cluster)
    } finally {
      db.close()
    }
  })
})
