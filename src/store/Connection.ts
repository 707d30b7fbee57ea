/**
 * A writable connection to one of svcbot's SQLite files, with the pragmas every writer of it
 * uses: the daemon's connection (Database.ts) and the fill ledger's writer thread
 * (FillWriterThread.ts). Kept apart from Database.ts so that the thread loads no more than
 * better-sqlite3.
 */
import BetterSqlite3 from "better-sqlite3"
import { closeSync, mkdirSync, openSync } from "node:fs"
import { dirname } from "node:path"

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
export const BUSY_TIMEOUT_MS = 5000

/** The WAL file's size once a checkpoint has copied it into the database: twice what an automatic checkpoint lets it reach. */
const WAL_SIZE_LIMIT_BYTES = 8 * 1024 * 1024

/** The index SQLite makes beside a WAL database for its first connection, a reader's too. */
export const SHM_BYTES = 32 * 1024

/** Pages a commit may leave in the WAL before it checkpoints them into the database (SQLite's default, stated). */
const WAL_AUTOCHECKPOINT_PAGES = 1000

/**
 * The room a database needs free on its volume to be opened for writing: a write-ahead log of
 * WAL_AUTOCHECKPOINT_PAGES pages of 4 KiB (SQLite's page size here) and its index. Until the first
 * checkpoint the log only grows, so a start with less would meet a full disk within its first
 * minutes of trading; refused at once, it says so before anything is written.
 */
export const ROOM_TO_OPEN_BYTES = WAL_AUTOCHECKPOINT_PAGES * 4096 + SHM_BYTES

export const connect = (path: string): BetterSqlite3.Database => {
  createDatabaseFile(path)
  const db = new BetterSqlite3(path)
  db.pragma("journal_mode = WAL")
  // A commit that leaves more than 1000 pages (4 MB) in the WAL checkpoints them into the database
  // (SQLite's default, stated so that it stays on). A checkpoint does not shrink the WAL file: SQLite
  // writes it again from the start, so a burst (a long fill sync, a migration) would leave it at its
  // largest for good; journal_size_limit cuts it back after each checkpoint. What could still let it
  // grow is a reader whose transaction stays open (a checkpoint cannot pass the oldest snapshot in
  // use): every svcbot read, in this process or another, runs its statement to the end at once.
  db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`)
  db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`)
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
