/**
 * The SQLite database: one better-sqlite3 connection (the single writer), WAL
 * journal, migrated on open and closed when its scope ends. Every state change
 * of svcbot is one `transaction`; what must be on disk before a request leaves
 * (an order marked as being sent) is made so by `syncToDisk`. Every SQLite file
 * svcbot keeps (the daemon's, the optimiser's results) is opened here, with the
 * same pragmas and its own folder of migrations.
 */
import BetterSqlite3 from "better-sqlite3"
import { Effect } from "effect"
import { closeSync, mkdirSync, openSync } from "node:fs"
import { type FileHandle, open } from "node:fs/promises"
import { dirname } from "node:path"
import { logEvent } from "../log/Logger.js"
import { DatabaseFromNewerVersion, DEFAULT_MIGRATIONS_DIR, migrate, MigrationFailed, readMigrations } from "./Migrations.js"

/** A list of known words (order states) as an SQL list, `('a', 'b')`: never text from outside. */
export const sqlList = (words: Iterable<string>): string => `(${[...words].map((w) => `'${w}'`).join(", ")})`

export interface DatabaseOptions {
  /** Path of the SQLite file; it and its directory are created when missing, for its owner only. */
  readonly path: string
  readonly migrationsDir?: string
}

/**
 * Creates a database file that does not exist yet, readable and writable by its owner alone (0600),
 * in a folder created 0700 where the folder is missing: a ledger, a journal, strategy states and
 * promotion evidence are nobody else's to read. SQLite gives the -wal and -shm files it makes
 * beside it the database file's permissions. An existing file or folder keeps the mode it has.
 */
export const createDatabaseFile = (path: string): void => {
  if (path === ":memory:") return
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  try {
    closeSync(openSync(path, "wx", 0o600))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
  }
}

/** How long a statement waits for another connection's write lock before it fails. */
const BUSY_TIMEOUT_MS = 5000

const connect = (path: string): BetterSqlite3.Database => {
  createDatabaseFile(path)
  const db = new BetterSqlite3(path)
  db.pragma("journal_mode = WAL")
  // NORMAL: a commit is written to the WAL but not fsync'd, so a kill of the process loses
  // nothing (the OS has the pages) and a power loss can lose the last commits. WAL frames are
  // replayed in order up to the last whole commit, so what survives is always a prefix of the
  // commit history: the database looks as if the process had been killed a little earlier.
  // That is safe for everything except a request that already left: the venue would know an
  // order the journal forgot. So after the commit that marks placements `submitting`, the WAL
  // is synced to disk (`syncToDisk`, what FULL does at each commit) before any of them is
  // sent: that commit and every one before it survive. What a power loss can then lose: strategy states with outbox rows
  // whose intents were never sent (the strategy re-decides from its older state; nothing was
  // placed for them), intents journaled but not sent (the older state no longer wants them),
  // acceptances and progress (the order is `submitting` or behind at the next start, becomes
  // `unknown` and reconciliation finds it among open orders and fills), and fill pages (their
  // cursor is stored with them, so the next pass reads them again). No order the venue saw is
  // missing from the journal, so none is sent twice and none is lost.
  db.pragma("synchronous = NORMAL")
  db.pragma("foreign_keys = ON")
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
  return db
}

/**
 * Opens an existing database file for reading only, neither creating nor migrating it: for
 * commands that inspect a file a daemon may be writing (they wait out its write lock).
 */
export const openReadOnlyDatabase = (path: string): BetterSqlite3.Database => {
  const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true })
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
  return db
}

/**
 * Opens and migrates a database file outside Effect (the optimiser's results, benchmarks,
 * commands); the caller closes it. `migrationsDir` defaults to the daemon's migrations.
 */
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
      // The write-ahead log, opened at the first sync (SQLite creates it) and kept open: fsync of any
      // descriptor of the file flushes what every writer of it wrote.
      let wal: FileHandle | undefined
      const walHandle = yield* Effect.cached(Effect.tryPromise(async () => (wal = await open(`${options.path}-wal`, "r"))))
      yield* Effect.addFinalizer(() => Effect.promise(async () => wal?.close()))
      return {
        sqlite,
        path: options.path,
        /**
         * Makes every commit so far durable: the WAL is synced to disk on libuv's thread pool, so the
         * event loop goes on meanwhile (a commit with `synchronous = FULL` would hold it for the fsync).
         * Should the file not open or sync, a checkpoint does it on the event loop: it syncs the WAL,
         * copies it into the database file and syncs that.
         */
        syncToDisk:
          options.path === ":memory:"
            ? Effect.void
            : Effect.flatMap(walHandle, (handle) => Effect.tryPromise(() => handle.datasync())).pipe(
                Effect.catchAllCause(() => Effect.sync(() => sqlite.pragma("wal_checkpoint(FULL)"))),
                Effect.asVoid
              ),
        /** Runs `body` as one SQLite transaction; a thrown error rolls it back and becomes a defect. */
        transaction: <A>(body: () => A): Effect.Effect<A> => Effect.sync(() => sqlite.transaction(body)())
      }
    })
}) {}
