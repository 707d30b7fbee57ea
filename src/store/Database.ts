/**
 * The SQLite database: one better-sqlite3 connection, WAL journal, migrated on
 * open and closed when its scope ends. It has one other writer in the process:
 * the fill ledger's thread (FillWriter.ts), which stores pages of fills through
 * a connection of its own. Every write transaction of either is IMMEDIATE: it
 * waits for the write lock at its start (the busy timeout), where a deferred one
 * that read first would be refused at its first write once the other writer
 * committed. Every state change of svcbot is one `transaction`; what must be on
 * disk before a request leaves (an order marked as being sent) is made so by
 * `syncToDisk`. Every SQLite file svcbot keeps (the daemon's, the optimiser's results) is opened here, with the
 * same pragmas and its own folder of migrations. A file svcbot cannot write, that
 * another `svcbot run` holds, that is damaged or that a newer svcbot wrote is
 * refused before anything is written to it.
 */
import BetterSqlite3 from "better-sqlite3"
import { Data, Effect, type Scope } from "effect"
import { accessSync, constants, existsSync, statfsSync, statSync } from "node:fs"
import { type FileHandle, open } from "node:fs/promises"
import { dirname, join } from "node:path"
import { logEvent } from "../log/Logger.js"
import {
  appliedVersionsOf,
  DatabaseFromNewerVersion,
  DEFAULT_MIGRATIONS_DIR,
  fromNewerVersion,
  migrate,
  MigrationFailed,
  readMigrations
} from "./Migrations.js"
import { BUSY_TIMEOUT_MS, connect, createDatabaseFile, ROOM_TO_OPEN_BYTES, SHM_BYTES } from "./Connection.js"
import { StorageHealth, storageCauseOf } from "./StorageHealth.js"

/** A list of known words (order states) as an SQL list, `('a', 'b')`: never text from outside. */
export const sqlList = (words: Iterable<string>): string => `(${[...words].map((w) => `'${w}'`).join(", ")})`

export interface DatabaseOptions {
  /** Path of the SQLite file; it and its directory are created when missing, for its owner only. */
  readonly path: string
  readonly migrationsDir?: string
}

/**
 * Opens an existing database file for reading only, neither creating nor migrating it: for
 * commands that inspect a file a daemon may be writing (they wait out its write lock).
 */
export const openReadOnlyDatabase = (path: string): BetterSqlite3.Database => {
  const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true })
  try {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
    // The first read makes SQLite's index beside the file where none is: a full disk shows here, not later.
    db.prepare("SELECT 1 FROM sqlite_master LIMIT 1").get()
    return db
  } catch (error) {
    db.close()
    throw storageCauseOf(error) === "disk full" ? fullDisk(path, "read", SHM_BYTES) : error
  }
}

/** Why a database file is not opened, and what the operator does about it: one line. */
export class DatabaseRefused extends Data.TaggedError("DatabaseRefused")<{
  readonly path: string
  readonly problem: string
  readonly fix: string
}> {
  override get message() {
    return `the database ${this.path} ${this.problem}: ${this.fix}`
  }
}

const errorCode = (error: unknown): string => String((error as { code?: unknown }).code ?? "")

/** The nearest folder of `path` that exists: where a missing file would be created. */
const existingFolderOf = (path: string): string => {
  let folder = dirname(path)
  while (!existsSync(folder) && dirname(folder) !== folder) folder = dirname(folder)
  return folder
}

/**
 * Refuses a file this process may not write: the file, its -wal and -shm beside it, and the folder
 * SQLite creates them in. access(2) answers for root as well (a read-only mount), where the mode
 * bits alone would not.
 */
const checkWritable = (path: string): void => {
  if (existsSync(path) && statSync(path).isDirectory()) {
    throw new DatabaseRefused({ path, problem: "is a folder, not a file", fix: `point the config's database.path at a file, e.g. ${join(path, "svcbot.db")}` })
  }
  const paths = existsSync(path) ? [path, dirname(path), ...[`${path}-wal`, `${path}-shm`].filter(existsSync)] : [existingFolderOf(path)]
  for (const each of paths) {
    try {
      accessSync(each, constants.W_OK)
    } catch (error) {
      const where = each === path ? "" : ` (${each})`
      throw errorCode(error) === "EROFS"
        ? new DatabaseRefused({ path, problem: `is on a read-only file system${where}`, fix: "remount it read-write, or point the config at a file on a writable volume" })
        : new DatabaseRefused({
            path,
            problem: `is read-only for this user (uid ${process.getuid?.() ?? "?"})${where}`,
            fix: "make the file and its folder writable by the user svcbot runs as (chown or chmod u+w), or point the config at another file"
          })
    }
  }
}

const sizeText = (bytes: number): string => (bytes < 1024 * 1024 ? `${Math.floor(bytes / 1024)} KiB` : `${(bytes / (1024 * 1024)).toFixed(1)} MiB`)

/** The bytes this process may still write on the volume holding `folder`. */
const freeBytesIn = (folder: string): number => {
  const stats = statfsSync(folder)
  return stats.bavail * stats.bsize
}

const fullDisk = (path: string, use: "read" | "write" = "write", needed = ROOM_TO_OPEN_BYTES): DatabaseRefused => {
  const folder = existingFolderOf(path)
  return new DatabaseRefused({
    path,
    problem: `is on a full disk (${sizeText(freeBytesIn(folder))} free in ${folder}, ${sizeText(needed)} needed to open it for ${use === "read" ? "reading" : "writing"})`,
    fix: "free space on that volume, or point the config's database.path at a volume with room"
  })
}

/** Files a database may need to make beside it: itself, its write-ahead log, the log's index and the run's lock file. */
const FILES_TO_OPEN = 4

/**
 * Refuses a file whose volume lacks ROOM_TO_OPEN_BYTES, or room for FILES_TO_OPEN new files (a
 * volume that counts them: one reporting no file count at all has no such limit).
 */
const checkRoom = (path: string): void => {
  const { bavail, bsize, files, ffree } = statfsSync(existingFolderOf(path))
  if (bavail * bsize < ROOM_TO_OPEN_BYTES) throw fullDisk(path)
  if (files > 0 && ffree < FILES_TO_OPEN) {
    throw new DatabaseRefused({
      path,
      problem: `is on a volume with no room for new files (${ffree} of its ${files} inodes free, ${FILES_TO_OPEN} needed for the database, its write-ahead log, the log's index and the lock file)`,
      fix: "delete files on that volume (`df -i` shows its inodes), or point the config's database.path at another volume"
    })
  }
}

/**
 * The refusal for an open or a migration that the storage failed (a disk that filled since
 * `checkRoom`, an I/O error), in place of SQLite's error; undefined for any other failure.
 */
/** A file whose lock another process held for longer than a statement waits for it. */
const lockedElsewhere = (path: string): DatabaseRefused =>
  new DatabaseRefused({ path, problem: "is locked by another process", fix: "stop the process that holds it, or point the config at another file" })

const refusedByStorage = (path: string, error: unknown): DatabaseRefused | undefined => {
  const cause = storageCauseOf(error)
  if (cause === undefined) return undefined
  if (cause === "disk full") return fullDisk(path)
  if (cause === "locked") return lockedElsewhere(path)
  return new DatabaseRefused({
    path,
    problem: `cannot be written (${cause}: ${error instanceof Error ? error.message : String(error)})`,
    fix: "check the volume it is on (`df`, the kernel log), or point the config's database.path at another file"
  })
}

/**
 * Reads an existing file without writing to it (a read-only connection never checkpoints) and
 * refuses it when it is locked beyond the busy timeout, fails `PRAGMA quick_check`, or carries a
 * migration `migrations` lacks.
 */
const checkContents = (path: string, migrationsDir: string): void => {
  const damaged = (finding: string) =>
    new DatabaseRefused({
      path,
      problem: `is damaged (${finding})`,
      fix: "stop svcbot, restore the file from a backup or salvage it with `sqlite3 FILE .recover`, or move it aside to start afresh (what it held stays in the moved file)"
    })
  let db: BetterSqlite3.Database | undefined
  try {
    db = new BetterSqlite3(path, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS })
    const findings = (db.pragma("quick_check(3)") as Array<{ quick_check: string }>).map((row) => row.quick_check)
    if (findings.join() !== "ok") throw damaged(`quick_check: ${findings.join("; ").replace(/\s+/g, " ")}`)
    const newer = fromNewerVersion(path, appliedVersionsOf(db), readMigrations(migrationsDir))
    if (newer !== undefined) throw newer
  } catch (error) {
    if (error instanceof DatabaseRefused || error instanceof DatabaseFromNewerVersion || error instanceof MigrationFailed) throw error
    const code = errorCode(error)
    if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) throw lockedElsewhere(path)
    if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") throw damaged(error instanceof Error ? error.message : code)
    // A reader of a WAL database makes its index beside it: on a full disk that is what fails.
    if (storageCauseOf(error) === "disk full") throw fullDisk(path)
    throw new DatabaseRefused({ path, problem: `cannot be read (${error instanceof Error ? error.message : String(error)})`, fix: "check the file and its folder, or point the config at another file" })
  } finally {
    db?.close()
  }
}

/**
 * Refuses, with a `DatabaseRefused` or a `DatabaseFromNewerVersion`, a database file svcbot must not
 * open for writing; writes nothing. A missing file passes when its folder is writable.
 */
export const checkDatabase = (path: string, migrationsDir: string = DEFAULT_MIGRATIONS_DIR): void => {
  if (path === ":memory:") return
  checkWritable(path)
  checkRoom(path)
  if (existsSync(path)) checkContents(path, migrationsDir)
}

/** The file beside a daemon's database whose lock says a `svcbot run` uses the database. */
export const runLockPathOf = (path: string): string => `${path}.lock`

/**
 * Claims the database for one `svcbot run` until the scope ends: an exclusive SQLite lock on the
 * lock file beside it (an fcntl lock, which the kernel drops with the process, so a run killed
 * with SIGKILL never blocks the next start), then `checkDatabase`. Other commands (status,
 * resume, backtests) share the database with a running daemon and take no such lock.
 */
export const claimDatabaseForRun = (path: string): Effect.Effect<void, DatabaseRefused | DatabaseFromNewerVersion | MigrationFailed, Scope.Scope> =>
  path === ":memory:"
    ? Effect.void
    : Effect.acquireRelease(
        Effect.try({
          try: () => {
            checkWritable(path)
            checkRoom(path)
            const lockPath = runLockPathOf(path)
            createDatabaseFile(lockPath)
            const lock = new BetterSqlite3(lockPath, { timeout: 0 })
            try {
              // The transaction is never committed, only held: no journal file beside it.
              lock.pragma("journal_mode = MEMORY")
              lock.exec("BEGIN EXCLUSIVE")
            } catch (error) {
              lock.close()
              throw errorCode(error).startsWith("SQLITE_BUSY")
                ? new DatabaseRefused({
                    path,
                    problem: `is in use by another svcbot process (\`svcbot run\` holds ${lockPath})`,
                    fix: "stop that process before starting this one, or give this one its own database.path"
                  })
                : error
            }
            try {
              if (existsSync(path)) checkContents(path, DEFAULT_MIGRATIONS_DIR)
            } catch (error) {
              lock.close()
              throw error
            }
            return lock
          },
          catch: (error) =>
            error instanceof DatabaseRefused || error instanceof DatabaseFromNewerVersion || error instanceof MigrationFailed
              ? error
              : new DatabaseRefused({ path, problem: `cannot be locked (${error instanceof Error ? error.message : String(error)})`, fix: "check the folder of the file, or point the config at another file" })
        }),
        (lock) => Effect.sync(() => lock.close())
      ).pipe(Effect.asVoid)

/**
 * Opens and migrates a database file outside Effect (the optimiser's results, benchmarks,
 * commands) once `checkDatabase` passes it; the caller closes it. `migrationsDir` defaults to the
 * daemon's migrations.
 */
export const openDatabase = (options: DatabaseOptions): BetterSqlite3.Database => {
  const migrationsDir = options.migrationsDir ?? DEFAULT_MIGRATIONS_DIR
  checkDatabase(options.path, migrationsDir)
  let db: BetterSqlite3.Database | undefined
  try {
    db = connect(options.path)
    migrate(db, options.path, readMigrations(migrationsDir))
    return db
  } catch (error) {
    db?.close()
    throw refusedByStorage(options.path, error) ?? error
  }
}

/**
 * The storage health of a writable connection to `path`. Its probe sets the header's user_version
 * to the value it has (svcbot keeps no meaning in it): a one-page commit that changes nothing.
 * The probe's writes do not wait for a lock held elsewhere: the fault is that lock.
 */
export const storageHealthOf = (path: string, sqlite: BetterSqlite3.Database): StorageHealth =>
  new StorageHealth(
    path,
    () => {
      const version = sqlite.pragma("user_version", { simple: true }) as number
      sqlite.pragma(`user_version = ${version}`)
    },
    (write) => {
      sqlite.pragma("busy_timeout = 0")
      try {
        return write()
      } finally {
        sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
      }
    }
  )

export class Database extends Effect.Service<Database>()("svcbot/Database", {
  scoped: (options: DatabaseOptions) =>
    Effect.gen(function* () {
      const migrations = yield* Effect.try({
        try: () => readMigrations(options.migrationsDir ?? DEFAULT_MIGRATIONS_DIR),
        catch: (error) => (error instanceof MigrationFailed ? error : new MigrationFailed({ file: "(directory)", problem: String(error) }))
      })
      // A volume without room, or one that fails the open or the migration, is refused as `checkDatabase`
      // refuses it, naming the cause; any other failure of the open is a defect.
      const sqlite = yield* Effect.acquireRelease(
        Effect.suspend(() => {
          try {
            if (options.path !== ":memory:") checkRoom(options.path)
            return Effect.succeed(connect(options.path))
          } catch (error) {
            const refused = error instanceof DatabaseRefused ? error : refusedByStorage(options.path, error)
            if (refused === undefined) throw error
            return Effect.fail(refused)
          }
        }),
        (db) => Effect.sync(() => db.close())
      )
      const applied = yield* Effect.try({
        try: () => migrate(sqlite, options.path, migrations),
        catch: (error) =>
          error instanceof DatabaseFromNewerVersion || error instanceof MigrationFailed
            ? error
            : (refusedByStorage(options.path, error) ?? new MigrationFailed({ file: "(runner)", problem: String(error) }))
      })
      if (applied.length > 0) {
        yield* logEvent("db.migrated", { path: options.path, applied: applied.map((m) => m.version) })
      }
      const storage = storageHealthOf(options.path, sqlite)
      yield* storage.watch
      // The write-ahead log, opened at the first sync that finds it (SQLite creates it) and kept open:
      // fsync of any descriptor of the file flushes what every writer of it wrote. An open that fails
      // (the file not there yet, no descriptor left) is tried again at the next sync, which until then
      // falls back to a checkpoint: a failure kept for good would leave every later sync on the event loop.
      let wal: FileHandle | undefined
      let opening: Promise<FileHandle> | undefined
      const walHandle = Effect.tryPromise(() => {
        if (wal !== undefined) return Promise.resolve(wal)
        opening ??= open(`${options.path}-wal`, "r").then(
          (handle) => (wal = handle),
          (error: unknown) => {
            opening = undefined
            throw error
          }
        )
        return opening
      })
      yield* Effect.addFinalizer(() => Effect.promise(async () => (wal ?? (await opening?.catch(() => undefined)))?.close()))
      return {
        sqlite,
        path: options.path,
        /** Whether the file takes writes: every writer of it guards its writes with this. */
        storage,
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
        /**
         * Runs `body` as one SQLite transaction; a thrown error rolls it back and becomes a defect
         * (a `StorageFailure` when the storage refused the write). IMMEDIATE (see above).
         */
        transaction: <A>(body: () => A): Effect.Effect<A> => Effect.sync(() => storage.guard(() => sqlite.transaction(body).immediate()))
      }
    })
}) {}
