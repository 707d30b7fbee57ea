/**
 * The SQLite database: one better-sqlite3 connection (the single writer), WAL
 * journal, migrated on open and closed when its scope ends. Every state change
 * of svcbot is one `transaction`.
 */
import BetterSqlite3 from "better-sqlite3"
import { Effect } from "effect"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { logEvent } from "../log/Logger.js"
import { DatabaseFromNewerVersion, DEFAULT_MIGRATIONS_DIR, migrate, MigrationFailed, readMigrations } from "./Migrations.js"

export interface DatabaseOptions {
  /** Path of the SQLite file; its directory is created when missing. */
  readonly path: string
  readonly migrationsDir?: string
}

const connect = (path: string): BetterSqlite3.Database => {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true })
  const db = new BetterSqlite3(path)
  db.pragma("journal_mode = WAL")
  // FULL: a journaled intent must survive a crash of the machine, not only of the process.
  db.pragma("synchronous = FULL")
  db.pragma("foreign_keys = ON")
  db.pragma("busy_timeout = 5000")
  return db
}

/** Opens and migrates the database file outside Effect (benchmarks, inspection tools); the caller closes it. */
export const openDatabase = (options: DatabaseOptions): BetterSqlite3.Database => {
  const db = connect(options.path)
  try {
    migrate(db, options.path, readMigrations(options.migrationsDir ?? DEFAULT_MIGRATIONS_DIR))
    return db
  } catch (error) {
    db.close()
    throw error
  }
}

export class Database extends Effect.Service<Database>()("svcbot/Database", {
  scoped: (options: DatabaseOptions) =>
    Effect.gen(function* () {
      const migrations = yield* Effect.try({
        try: () => readMigrations(options.migrationsDir ?? DEFAULT_MIGRATIONS_DIR),
        catch: (error) => (error instanceof MigrationFailed ? error : new MigrationFailed({ file: "(directory)", problem: String(error) }))
      })
      const sqlite = yield* Effect.acquireRelease(
        Effect.sync(() => connect(options.path)),
        (db) => Effect.sync(() => db.close())
      )
      const applied = yield* Effect.try({
        try: () => migrate(sqlite, options.path, migrations),
        catch: (error) =>
          error instanceof DatabaseFromNewerVersion || error instanceof MigrationFailed
            ? error
            : new MigrationFailed({ file: "(runner)", problem: String(error) })
      })
      if (applied.length > 0) {
        yield* logEvent("db.migrated", { path: options.path, applied: applied.map((m) => m.version) })
      }
      return {
        sqlite,
        path: options.path,
        /** Runs `body` as one SQLite transaction; a thrown error rolls it back and becomes a defect. */
        transaction: <A>(body: () => A): Effect.Effect<A> => Effect.sync(() => sqlite.transaction(body)())
      }
    })
}) {}
