/**
 * The fill ledger's writer thread (FillWriter.ts starts it): stores the pages it is handed, one
 * transaction each, through a connection of its own to each ledger file, opened at the file's
 * first page. An error is answered with SQLite's code and message, for the daemon's thread to
 * judge as it judges its own writes.
 */
import type BetterSqlite3 from "better-sqlite3"
import { parentPort } from "node:worker_threads"
import { connect } from "./Connection.js"
import { pageWriter } from "./FillPages.js"
import type { WriterReply, WriterRequest } from "./FillWriter.js"

interface Ledger {
  readonly sqlite: BetterSqlite3.Database
  readonly store: ReturnType<typeof pageWriter>
}

const ledgers = new Map<string, Ledger>()

const ledgerAt = (path: string): Ledger => {
  const known = ledgers.get(path)
  if (known !== undefined) return known
  const sqlite = connect(path)
  try {
    const opened = { sqlite, store: pageWriter(sqlite) }
    ledgers.set(path, opened)
    return opened
  } catch (error) {
    sqlite.close()
    throw error
  }
}

const answer = (request: WriterRequest): WriterReply => {
  try {
    if (request.op === "store") return { id: request.id, fresh: ledgerAt(request.path).store(request.rows, request.progress, request.now) }
    ledgers.get(request.path)?.sqlite.close()
    ledgers.delete(request.path)
    return { id: request.id }
  } catch (error) {
    return {
      id: request.id,
      error: { code: String((error as { code?: unknown } | null)?.code ?? ""), message: error instanceof Error ? error.message : String(error) }
    }
  }
}

parentPort!.on("message", (request: WriterRequest) => parentPort!.postMessage(answer(request)))
