/**
 * The fill ledger's writer thread, seen from the daemon: a page of fills goes there to be stored,
 * so that the event loop reads the next page while SQLite writes this one (a backfill's pages
 * cost SQLite about as much as everything else on that path together). One thread per process,
 * started by the first page, with a connection per ledger file it was handed pages of; it holds
 * the process open only while a page is with it. A thread that fails or exits fails the pages it
 * held, and the next page starts a new one.
 */
import type { Worker } from "node:worker_threads"
import { Effect } from "effect"
import { startModuleWorker } from "../domain/ModuleWorker.js"
import type { FillColumns, PageProgress } from "./FillPages.js"
import type { StorageHealth } from "./StorageHealth.js"

export type WriterRequest =
  | {
      readonly id: number
      readonly op: "store"
      readonly path: string
      readonly rows: ReadonlyArray<FillColumns>
      readonly progress: PageProgress
      readonly now: number
    }
  | { readonly id: number; readonly op: "close"; readonly path: string }

/** A store's new rows (their indexes), or what SQLite threw: its code (SQLITE_FULL, ...) and message. */
export interface WriterReply {
  readonly id: number
  readonly fresh?: Array<number>
  readonly error?: { readonly code: string; readonly message: string }
}

/** An error the thread reported, rebuilt with SQLite's code for `storageCauseOf`. */
export class WriterError extends Error {
  constructor(
    readonly code: string,
    message: string
  ) {
    super(message)
    this.name = "WriterError"
  }
}

interface Thread {
  readonly worker: Worker
  readonly pending: Map<number, (reply: WriterReply) => void>
}

let thread: Thread | undefined
let lastId = 0

const threadNow = (): Thread => {
  if (thread !== undefined) return thread
  const worker = startModuleWorker(import.meta.url, "FillWriterThread", undefined)
  const started: Thread = { worker, pending: new Map() }
  worker.unref()
  worker.on("message", (reply: WriterReply) => {
    const done = started.pending.get(reply.id)
    started.pending.delete(reply.id)
    if (started.pending.size === 0) worker.unref()
    done?.(reply)
  })
  const ended = (message: string) => {
    if (thread === started) thread = undefined
    for (const [id, done] of started.pending) done({ id, error: { code: "", message } })
    started.pending.clear()
  }
  worker.on("error", (error) => ended(`the fill ledger's writer thread failed: ${error.message}`))
  worker.on("exit", (code) => ended(`the fill ledger's writer thread exited (code ${code})`))
  thread = started
  return started
}

/** A request before it is numbered. */
type Unnumbered<R> = R extends unknown ? Omit<R, "id"> : never

/**
 * Posts `request` to the thread now and returns the wait for its answer. Posted here rather than
 * when the wait first runs, so that the thread starts on a page while this thread reads the next.
 * An interrupted wait forgets the answer; the thread still finishes the page, whole or not at all.
 */
const post = (request: Unnumbered<WriterRequest>): Effect.Effect<WriterReply> => {
  const { worker, pending } = threadNow()
  const id = ++lastId
  let answered: WriterReply | undefined
  let waiting: ((reply: WriterReply) => void) | undefined
  pending.set(id, (reply) => {
    answered = reply
    waiting?.(reply)
  })
  if (pending.size === 1) worker.ref()
  worker.postMessage({ ...request, id })
  return Effect.async<WriterReply>((resume) => {
    if (answered !== undefined) return resume(Effect.succeed(answered))
    waiting = (reply) => resume(Effect.succeed(reply))
    return Effect.sync(() => {
      waiting = undefined
    })
  })
}

/**
 * Hands a page of the ledger at `path` to the writer thread (FillPages.ts's `pageWriter`); the
 * effect returned waits for the indexes of its new rows. What SQLite threw there is thrown here
 * through `storage`'s guard, as a write on this thread would be: a refusal by the storage as a
 * `StorageFailure`.
 */
export const startOnWriter = (
  storage: StorageHealth,
  rows: ReadonlyArray<FillColumns>,
  progress: PageProgress,
  now: number
): Effect.Effect<Effect.Effect<Array<number>>> =>
  Effect.sync(() =>
    Effect.flatMap(post({ op: "store", path: storage.path, rows, progress, now }), (reply) =>
      Effect.sync(() =>
        storage.guard(() => {
          if (reply.error !== undefined) throw new WriterError(reply.error.code, reply.error.message)
          return reply.fresh ?? []
        })
      )
    )
  )

/** Closes the thread's connection to `path`, if it has one (a ledger's scope ends). */
export const closeOnWriter = (path: string): Effect.Effect<void> =>
  Effect.suspend(() => (thread === undefined ? Effect.void : Effect.asVoid(post({ op: "close", path }))))
