/**
 * Storage health: a write the storage refuses is told from any other failure by SQLite's error
 * code, thrown as a StorageFailure naming the file and the cause, and turns the file failing
 * until a write succeeds; a refusal from a real SQLite file (a page limit it cannot grow past) is
 * classified as the disk being full.
 */
import BetterSqlite3 from "better-sqlite3"
import { Effect, Fiber } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { isStorageFailure, StorageFailure, storageCauseOf, StorageHealth } from "../../src/store/StorageHealth.js"

const sqliteError = (code: string): Error => Object.assign(new Error(`${code} from SQLite`), { code })

describe("storage health", () => {
  it("classifies SQLite's codes: full, read-only, I/O error, cannot open, permission; anything else is not the storage's", () => {
    expect(storageCauseOf(sqliteError("SQLITE_FULL"))).toBe("disk full")
    expect(storageCauseOf(sqliteError("SQLITE_IOERR_SHMSIZE"))).toBe("disk full")
    expect(storageCauseOf(sqliteError("SQLITE_READONLY"))).toBe("read-only")
    expect(storageCauseOf(sqliteError("SQLITE_READONLY_DBMOVED"))).toBe("read-only")
    expect(storageCauseOf(sqliteError("SQLITE_IOERR_WRITE"))).toBe("I/O error")
    expect(storageCauseOf(sqliteError("SQLITE_IOERR_FSYNC"))).toBe("I/O error")
    expect(storageCauseOf(sqliteError("SQLITE_CANTOPEN"))).toBe("cannot open")
    expect(storageCauseOf(sqliteError("SQLITE_PERM"))).toBe("permission denied")
    expect(storageCauseOf(sqliteError("SQLITE_BUSY"))).toBe("locked")
    expect(storageCauseOf(sqliteError("SQLITE_BUSY_SNAPSHOT"))).toBe("locked")
    for (const other of ["SQLITE_CONSTRAINT_UNIQUE", "SQLITE_LOCKED", "SQLITE_ERROR"]) expect(storageCauseOf(sqliteError(other))).toBeUndefined()
    expect(storageCauseOf(new Error("no code"))).toBeUndefined()
    expect(storageCauseOf(undefined)).toBeUndefined()
  })

  it("a refused write fails the file, named with its cause, until a write succeeds; other errors pass through untouched", async () => {
    const storage = new StorageHealth("/data/svcbot.db", () => undefined)
    expect(storage.reason).toBeUndefined()
    const constraint = sqliteError("SQLITE_CONSTRAINT_UNIQUE")
    expect(() => storage.guard(() => { throw constraint })).toThrow(constraint)
    expect(storage.fault).toBeUndefined()

    let thrown: unknown
    try {
      storage.guard(() => { throw sqliteError("SQLITE_FULL") })
    } catch (error) {
      thrown = error
    }
    expect(isStorageFailure(thrown)).toBe(true)
    expect((thrown as StorageFailure).message).toBe("database /data/svcbot.db: disk full (SQLITE_FULL from SQLite)")
    expect(storage.reason).toBe("database /data/svcbot.db: disk full")
    expect(() => storage.guard(() => { throw sqliteError("SQLITE_FULL") })).toThrow(StorageFailure)
    expect(storage.refused.get("disk full")).toBe(2)

    const waiting = Effect.runFork(storage.awaitWritable)
    expect(storage.guard(() => 42)).toBe(42)
    await Effect.runPromise(Fiber.join(waiting))
    expect(storage.fault).toBeUndefined()
    expect(storage.refused.get("disk full")).toBe(2)
  })

  it("SQLite refusing to grow a real file is a full disk", () => {
    const db = new BetterSqlite3(join(mkdtempSync(join(tmpdir(), "svcbot-storage-health-")), "full.db"))
    db.exec("CREATE TABLE t (text TEXT)")
    const pages = db.pragma("page_count", { simple: true }) as number
    db.pragma(`max_page_count = ${pages}`)
    const storage = new StorageHealth("full.db", () => undefined)
    expect(() => storage.guard(() => db.prepare("INSERT INTO t VALUES (?)").run("x".repeat(100_000)))).toThrow(StorageFailure)
    expect(storage.fault?.cause).toBe("disk full")
    db.close()
  })
})
