/**
 * Storage health: whether svcbot can write one of its SQLite files. Every writer of the
 * file (the order journal, the fill ledger, strategy states, paper evidence, budget weights,
 * pair rules) runs its writes through `guard`, which tells a write the storage refused (a
 * full disk, a read-only mount, an I/O error, a file it cannot open or may not write, a write
 * lock another program holds) from any other failure by SQLite's error code, here and nowhere
 * else.
 *
 * A refused write turns the file's health failing at once: `/healthz` names the file and the
 * cause, strategies pause, and the refused write is thrown as a `StorageFailure`, which the
 * loops that write wait out instead of dying. While it fails, a probe write is tried every
 * second; the first write that succeeds, probe or real, turns it healthy again. The watcher
 * logs each change once (`storage.failed`, `storage.recovered`) and a reminder at most once a
 * minute in between: the log shows the fault, not every write it refused.
 */
import { Effect, Option, Schedule, type Scope } from "effect"
import { logEvent } from "../log/Logger.js"

/** What the storage refused a write for, in the operator's words. */
export type StorageCause = "disk full" | "read-only" | "I/O error" | "cannot open" | "permission denied" | "locked"

const codeOf = (error: unknown): string => String((error as { code?: unknown } | null)?.code ?? "")

/** The storage cause of a failed SQLite call, by its error code; undefined for any other failure. */
export const storageCauseOf = (error: unknown): StorageCause | undefined => {
  const code = codeOf(error)
  // SHMSIZE: the index SQLite keeps beside a WAL database could not be made or grown, which on a
  // volume without room is what a new connection meets before any write.
  if (code === "SQLITE_FULL" || code === "SQLITE_IOERR_SHMSIZE") return "disk full"
  if (code.startsWith("SQLITE_READONLY")) return "read-only"
  if (code.startsWith("SQLITE_IOERR")) return "I/O error"
  if (code.startsWith("SQLITE_CANTOPEN")) return "cannot open"
  if (code === "SQLITE_PERM") return "permission denied"
  // Another program (a shell, a backup) held the write lock for longer than a statement waits for it.
  if (code.startsWith("SQLITE_BUSY")) return "locked"
  return undefined
}

/** A write the storage refused: thrown by `guard` in place of SQLite's error, so that a loop can tell it from a bug. */
export class StorageFailure extends Error {
  constructor(
    readonly path: string,
    readonly storageCause: StorageCause,
    readonly detail: string
  ) {
    super(`database ${path}: ${storageCause} (${detail})`)
    this.name = "StorageFailure"
  }
}

/** Whether a defect is a write the storage refused. */
export const isStorageFailure = (defect: unknown): defect is StorageFailure => defect instanceof StorageFailure

/** Runs `effect`; a write the storage refused inside it (a defect) becomes `onFailure`'s result. */
export const waitingOutStorage = <A, E, R, B>(effect: Effect.Effect<A, E, R>, onFailure: (failure: StorageFailure) => Effect.Effect<B>): Effect.Effect<A | B, E, R> =>
  Effect.catchSomeDefect(effect, (defect) => (isStorageFailure(defect) ? Option.some(onFailure(defect)) : Option.none()))

/** A refused write's standing: what refused it, since when. */
export interface StorageFault {
  readonly cause: StorageCause
  readonly detail: string
  readonly since: number
}

/** How often a failing file is probed with a small write. */
const PROBE_MS = 1000
/** How often the watcher looks for a change to log; health reads the state directly. */
const WATCH_MS = 250
/** A storage that keeps failing is reminded of at most this often. */
const REMINDER_MS = 60_000

/** The health of one SQLite file's writes; plain calls, for the writers' synchronous code. */
export class StorageHealth {
  private current: StorageFault | undefined
  private refusedWrites = new Map<StorageCause, number>()
  private readonly writable = Effect.unsafeMakeLatch(true)
  private readonly retries: Array<() => void> = []

  /**
   * `probe` writes next to nothing to learn whether the file takes writes again; `withoutWaiting`
   * runs the probe's writes so that a lock held elsewhere refuses them at once, rather than after
   * the wait for it that every other statement makes, which would hold up the daemon each second.
   */
  constructor(
    readonly path: string,
    private readonly probe: () => void,
    private readonly withoutWaiting: <A>(write: () => A) => A = (write) => write()
  ) {}

  /** Runs a write; a refusal by the storage is noted and thrown as a `StorageFailure`, a success ends a fault. */
  guard<A>(write: () => A): A {
    let result: A
    try {
      result = write()
    } catch (error) {
      const cause = storageCauseOf(error)
      if (cause === undefined) throw error
      throw this.failed(cause, error)
    }
    if (this.current !== undefined) this.recovered()
    return result
  }

  /** Notes a write the storage refused; returns it as the failure to throw. */
  failed(cause: StorageCause, error: unknown): StorageFailure {
    const detail = error instanceof Error ? error.message : String(error)
    this.refusedWrites.set(cause, (this.refusedWrites.get(cause) ?? 0) + 1)
    if (this.current === undefined) {
      this.current = { cause, detail, since: Date.now() }
      this.writable.unsafeClose()
    }
    return new StorageFailure(this.path, cause, detail)
  }

  private recovered(): void {
    this.current = undefined
    this.writable.unsafeOpen()
  }

  /** Work to do again before the probe, once the file takes writes again (what a writer kept in memory). */
  retryOnProbe(retry: () => void): void {
    this.retries.push(retry)
  }

  /** The standing fault, if writes fail now. */
  get fault(): StorageFault | undefined {
    return this.current
  }

  /** The health reason while writes fail: the file and the cause. */
  get reason(): string | undefined {
    return this.current === undefined ? undefined : `database ${this.path}: ${this.current.cause}`
  }

  /** Writes the storage refused so far, by cause. */
  get refused(): ReadonlyMap<StorageCause, number> {
    return this.refusedWrites
  }

  /** Waits until the file takes writes (at once when it does). */
  get awaitWritable(): Effect.Effect<void> {
    return this.writable.await
  }

  /** One try at writing again: what writers kept in memory, then the probe. A retry throws nothing but a refusal. */
  private tryWrite = (): void => {
    try {
      this.guard(() =>
        this.withoutWaiting(() => {
          for (const retry of this.retries) retry()
          this.probe()
        })
      )
    } catch (error) {
      // Still refused: the fault stands.
      if (!isStorageFailure(error)) throw error
    }
  }

  /** Logs each change of the file's health and probes it while it fails, for the lifetime of the scope. */
  watch: Effect.Effect<void, never, Scope.Scope> = Effect.gen(this, function* () {
    let logged: StorageFault | undefined
    let remindedAt = 0
    let probedAt = 0
    const look = Effect.gen(this, function* () {
      const now = Date.now()
      if (this.current !== undefined && now - probedAt >= PROBE_MS) {
        probedAt = now
        yield* Effect.sync(this.tryWrite)
      }
      const fault = this.current
      if (fault !== undefined && logged === undefined) {
        logged = fault
        remindedAt = now
        yield* logEvent("storage.failed", { path: this.path, cause: fault.cause, error: fault.detail, action: "new placements stopped and strategies paused until a write succeeds; cancels still go out" })
      } else if (fault !== undefined && now - remindedAt >= REMINDER_MS) {
        remindedAt = now
        yield* logEvent("storage.still-failing", { path: this.path, cause: fault.cause, forMs: now - fault.since, refusedWrites: Object.fromEntries(this.refusedWrites) })
      } else if (fault === undefined && logged !== undefined) {
        yield* logEvent("storage.recovered", { path: this.path, cause: logged.cause, downMs: now - logged.since })
        logged = undefined
      }
    })
    yield* Effect.forkScoped(Effect.repeat(look, Schedule.spaced(WATCH_MS)))
  })
}
