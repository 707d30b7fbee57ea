/**
 * `svcbot run` when its disk fails under it, as an operator meets it: a grid and a market maker
 * trade on an external svc-venue with the database on a small tmpfs. When the tmpfs fills (a
 * filler file takes what trading left), or is remounted read-only, `/healthz` turns not ready
 * naming the file and the cause, `storage.failed` is logged once, and nothing is placed while it
 * lasts; once the tmpfs grows or is writable again the daemon is ready and trades again on its
 * own, and its ledger comes to equal the venue's fills. A SIGTERM while the disk is full cancels
 * the open orders from memory and exits 0. Figures printed: lines logged per minute while the
 * disk is full, seconds to not ready, seconds to ready once space returns. A start on a disk
 * already full is refused with exit 2, naming the disk and the room it needs, and writes nothing.
 * Another program holding the database's write lock for longer than a statement waits for it is
 * met the same way, as `locked`, until it lets go.
 *
 * Mounting needs root (CI runs as root); where the mount is refused the tests skip, saying why.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { events, freeLoopbackPort, healthz, killAll, pollUntil, query, svcbot, type Run } from "../support/daemon.js"
import { expectRefused } from "../support/refusals.js"
import { fillUp, mountTmpfs as mountVolume, remount } from "../support/tmpfs.js"
import { startVenue, type TestVenue } from "../support/venue.js"

afterAll(killAll)
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  killAll()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const GRID = { id: "grid", strategy: "grid", symbol: "BTCUSDT", pollMs: 500, params: { lowerPrice: "59000", upperPrice: "61000", levels: 11, orderQty: "0.002" }, allocation: { USDT: "10000", BTC: "0.1" } }
const MM = { id: "mm", strategy: "market-maker", symbol: "ETHUSDT", pollMs: 500, params: { halfSpreadBps: 15, orderQty: "0.05", maxInventory: "0.5", skewBps: 20, requoteBps: 5 }, allocation: { USDT: "5000", ETH: "2" } }

/** A tmpfs for the test's database, unmounted after it. */
const mountTmpfs = (size: string): string | { readonly refused: string } => {
  const mounted = mountVolume(size)
  if ("refused" in mounted) return mounted
  cleanups.push(mounted.unmount)
  return mounted.path
}

interface Setup {
  readonly v: TestVenue
  readonly run: Run
  readonly dbPath: string
  readonly mountPoint: string
  readonly health: string
}

const start = async (mountPoint: string): Promise<Setup> => {
  const v = await startVenue({ tape: { kind: "synthetic", seed: 11 }, tickMs: 200, settleMs: 20 })
  cleanups.push(() => v.close())
  const dir = mkdtempSync(join(tmpdir(), "svcbot-storage-config-"))
  const dbPath = join(mountPoint, "svcbot.db")
  const port = await freeLoopbackPort()
  const configPath = join(dir, "config.json")
  writeFileSync(configPath, JSON.stringify({ mode: "paper", venue: { embedded: false, baseUrl: v.url }, database: { path: dbPath }, health: { port }, heartbeatMs: 5000, strategies: [GRID, MM] }))
  const run = svcbot(["run", "--config", configPath], { SVC_API_KEY: v.keyId, SVC_API_SECRET: v.secret })
  const health = `http://127.0.0.1:${port}/healthz`
  await pollUntil(async () => ((await healthz(health))?.status === 200 ? true : undefined), 90_000, "ready", 100)
  await pollUntil(async () => (count(run, "order.accepted") >= 6 ? true : undefined), 60_000, "orders accepted", 100)
  return { v, run, dbPath, mountPoint, health }
}

const count = (run: Run, event: string): number => events(run).filter((e) => e.event === event).length

/** Polls /healthz until `holds` is true of its answer; returns the seconds it took from `since`. */
const healthUntil = async (url: string, what: string, timeoutMs: number, since: number, holds: (status: number, body: string) => boolean): Promise<{ seconds: number; body: string }> => {
  const answer = await pollUntil(async () => {
    const current = await healthz(url)
    return current !== undefined && holds(current.status, current.body) ? current : undefined
  }, timeoutMs, what, 50)
  return { seconds: (Date.now() - since) / 1000, body: answer.body }
}

const openOnVenue = async (v: TestVenue) =>
  ((await v.admin("GET", `/_venue/orders?uid=${v.uid}`)).orders as Array<{ clientOrderId: string; kind: string }>).filter((o) => o.kind === "resting" || o.kind === "pending")
const venueOrderCount = async (v: TestVenue) => ((await v.admin("GET", `/_venue/orders?uid=${v.uid}`)).orders as Array<unknown>).length
const venueFillIds = async (v: TestVenue) => ((await v.admin("GET", `/_venue/fills?uid=${v.uid}`)).fills as Array<{ fillId: string }>).map((f) => f.fillId).sort()
const ledgerFillIds = (dbPath: string) => query<{ fill_id: string }>(dbPath, "SELECT fill_id FROM fills ORDER BY fill_id").map((row) => row.fill_id)

/**
 * The fault as the daemon meets it: health names the file and `cause` within the bound, one
 * `storage.failed`, and no placement while it lasts (`holdMs`). Returns the figures.
 */
const expectStoppedSafely = async (s: Setup, cause: RegExp, faultAt: number, holdMs: number) => {
  // The goal is 5 s; the bound leaves room for a loaded machine, and the seconds it took are printed.
  const notReady = await healthUntil(s.health, `not ready naming ${s.dbPath}`, 10_000, faultAt, (status, body) => status === 503 && body.includes(`database ${s.dbPath}`) && cause.test(body))
  // Placements in flight when the fault came are answered; from a second after, none is sent.
  await new Promise((done) => setTimeout(done, 1000))
  const linesBefore = s.run.lines.length
  const ordersBefore = await venueOrderCount(s.v)
  const submittedBefore = count(s.run, "order.submitted")
  await new Promise((done) => setTimeout(done, holdMs))
  const window = s.run.lines.slice(linesBefore)
  const linesPerMinute = (window.length * 60_000) / holdMs
  const byEvent: Record<string, number> = {}
  for (const line of window) {
    const event = String((JSON.parse(line) as { event?: unknown }).event)
    byEvent[event] = (byEvent[event] ?? 0) + 1
  }
  console.log(`lines in ${holdMs / 1000} s of the fault, by event: ${JSON.stringify(byEvent)}`)
  expect(await venueOrderCount(s.v), "orders placed on the venue while the storage failed").toBe(ordersBefore)
  expect(count(s.run, "order.submitted"), "placements marked for sending while the storage failed").toBe(submittedBefore)
  expect(count(s.run, "storage.failed")).toBe(1)
  expect(s.run.child.exitCode).toBeNull()
  expect(events(s.run).filter((e) => e.event === "reconcile.mismatch"), "the fault is the storage's, not a disagreement with the exchange").toEqual([])
  return { secondsToNotReady: notReady.seconds, linesPerMinute, reasons: JSON.parse(notReady.body).reasons as Array<string> }
}

/** Once the storage takes writes: ready within the bound, trading again, and the ledger equal to the venue's fills. */
const expectRecovered = async (s: Setup, restoredAt: number) => {
  const ready = await healthUntil(s.health, "ready again", 30_000, restoredAt, (status) => status === 200)
  const accepted = count(s.run, "order.accepted")
  await pollUntil(async () => (count(s.run, "order.accepted") > accepted ? true : undefined), 30_000, "an order accepted after the storage recovered", 100)
  expect(count(s.run, "storage.recovered")).toBeGreaterThanOrEqual(1)
  const venueFills = await pollUntil(
    async () => {
      const fromVenue = await venueFillIds(s.v)
      return fromVenue.length > 0 && JSON.stringify(fromVenue) === JSON.stringify(ledgerFillIds(s.dbPath)) ? fromVenue : undefined
    },
    60_000,
    "the ledger to equal the venue's fills"
  )
  return { secondsToReady: ready.seconds, fills: venueFills.length }
}

describe("svcbot run on a disk that fails under it", () => {
  it("a tmpfs that fills: stops placing and says so, resumes when it grows, and a SIGTERM on a full disk cancels and exits 0", async (context) => {
    const mounted = mountTmpfs("16m")
    if (typeof mounted !== "string") return context.skip(mounted.refused)
    const s = await start(mounted)

    fillUp(join(mounted, "filler"))
    const fullAt = Date.now()
    const full = await expectStoppedSafely(s, /disk full/, fullAt, 20_000)
    console.log(`disk full: not ready after ${full.secondsToNotReady.toFixed(2)} s, ${full.linesPerMinute.toFixed(0)} lines per minute while full; reasons: ${JSON.stringify(full.reasons)}`)

    remount(mounted, "size=64m")
    const grown = await expectRecovered(s, Date.now())
    console.log(`disk grown: ready after ${grown.secondsToReady.toFixed(2)} s, ledger equal to the venue's ${grown.fills} fills`)

    // Full again, then a stop: the engine cancels what it knows from memory and exits 0.
    fillUp(join(mounted, "filler-2"))
    await healthUntil(s.health, "not ready again", 10_000, Date.now(), (status, body) => status === 503 && body.includes("disk full"))
    expect((await openOnVenue(s.v)).length).toBeGreaterThan(0)
    s.run.child.kill("SIGTERM")
    const code = await s.run.exit
    const report = events(s.run).find((e) => e.event === "engine.stop-incomplete" || e.event === "engine.stopped")
    console.log(`SIGTERM on a full disk: exit ${code}, ${JSON.stringify(report)}`)
    expect(code, s.run.stderr.join("")).toBe(0)
    expect(await openOnVenue(s.v)).toEqual([])
  }, 300_000)

  it("a start on a full disk is refused with exit 2 naming the disk and the room needed, writes nothing, and starts once there is room", async (context) => {
    const mounted = mountTmpfs("16m")
    if (typeof mounted !== "string") return context.skip(mounted.refused)
    const v = await startVenue({ tape: { kind: "synthetic", seed: 11 }, tickMs: 200, settleMs: 20 })
    cleanups.push(() => v.close())
    const dir = mkdtempSync(join(tmpdir(), "svcbot-storage-config-"))
    const dbPath = join(mounted, "data", "svcbot.db")
    const configPath = join(dir, "config.json")
    writeFileSync(configPath, JSON.stringify({ mode: "paper", venue: { embedded: false, baseUrl: v.url }, database: { path: dbPath }, health: { port: await freeLoopbackPort() }, strategies: [GRID] }))
    const keys = { SVC_API_KEY: v.keyId, SVC_API_SECRET: v.secret }
    const runFor = async (seconds: number) => {
      const run = svcbot(["run", "--config", configPath, "--for", `${seconds}s`], keys)
      return { code: await run.exit, stderr: run.stderr.join(""), run }
    }
    const refusedStart = () =>
      expectRefused(svcbot(["run", "--config", configPath], keys), `the database ${dbPath} is on a full disk`, /needed to open it for writing\): free space on that volume, or point the config's database\.path at a volume with room$/)

    // A first start, on a volume already full: nothing of the database is made.
    fillUp(join(mounted, "filler"))
    console.log(`start on a full disk: ${await refusedStart()}`)
    expect(existsSync(dbPath)).toBe(false)

    // Room again: it starts and trades; full again: refused, the file as it was.
    rmSync(join(mounted, "filler"))
    const first = await runFor(4)
    expect(first.code, first.stderr).toBe(0)
    expect(count(first.run, "order.accepted")).toBeGreaterThan(0)
    const before = readFileSync(dbPath)
    fillUp(join(mounted, "filler"))
    await refusedStart()
    expect(readFileSync(dbPath).equals(before), "the database file after the refused start").toBe(true)
    // Status on the full disk says the same, rather than an I/O error.
    const status = svcbot(["status", "--config", configPath])
    expect(await status.exit).toBe(1)
    expect(status.stderr.join("")).toContain(`the database ${dbPath} is on a full disk`)

    rmSync(join(mounted, "filler"))
    const again = await runFor(2)
    expect(again.code, again.stderr).toBe(0)
  }, 300_000)

  it("a read-only remount mid-run: stops placing and says so, resumes once writable", async (context) => {
    const mounted = mountTmpfs("64m")
    if (typeof mounted !== "string") return context.skip(mounted.refused)
    const s = await start(mounted)
    try {
      remount(mounted, "ro")
    } catch (error) {
      return context.skip(`remounting the tmpfs read-only under a running svcbot is refused here: ${String((error as { stderr?: unknown }).stderr ?? error).trim()}`)
    }
    const readOnly = await expectStoppedSafely(s, /read-only|I\/O error/, Date.now(), 10_000)
    console.log(`read-only: not ready after ${readOnly.secondsToNotReady.toFixed(2)} s, ${readOnly.linesPerMinute.toFixed(0)} lines per minute; reasons: ${JSON.stringify(readOnly.reasons)}`)
    remount(mounted, "rw")
    const writable = await expectRecovered(s, Date.now())
    console.log(`writable again: ready after ${writable.secondsToReady.toFixed(2)} s, ledger equal to the venue's ${writable.fills} fills`)
    s.run.child.kill("SIGTERM")
    expect(await s.run.exit).toBe(0)
  }, 300_000)

  it("another program holding the database's write lock past the busy timeout: stops placing and says so, resumes once it lets go", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svcbot-storage-lock-"))
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const s = await start(dir)
    // Another program (an operator's shell, a backup) takes the write lock and sits on it,
    // long enough for the fault to be seen (a statement waits 5 s for the lock) and watched for 10 s.
    const holdMs = 30_000
    const holder = spawn(process.execPath, [
      "-e",
      `const db = new (require("better-sqlite3"))(${JSON.stringify(s.dbPath)}); db.exec("BEGIN IMMEDIATE"); process.stdout.write("locked\\n"); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${holdMs}); db.exec("COMMIT"); db.close()`
    ], { cwd: process.cwd(), stdio: ["ignore", "pipe", "inherit"] })
    const released = new Promise<void>((done) => holder.on("exit", () => done()))
    cleanups.push(() => void holder.kill())
    await new Promise<void>((done) => holder.stdout.once("data", () => done()))
    const lockedAt = Date.now()
    const locked = await expectStoppedSafely(s, /locked/, lockedAt, 10_000)
    console.log(`write lock held elsewhere: not ready after ${locked.secondsToNotReady.toFixed(2)} s, ${locked.linesPerMinute.toFixed(0)} lines per minute; reasons: ${JSON.stringify(locked.reasons)}`)
    await released
    const free = await expectRecovered(s, Date.now())
    console.log(`lock let go: ready after ${free.secondsToReady.toFixed(2)} s, ledger equal to the venue's ${free.fills} fills`)
    expect(events(s.run).filter((e) => e.event === "engine.loop-failed"), "a lock held elsewhere is the storage's fault, not a bug of a loop").toEqual([])
    s.run.child.kill("SIGTERM")
    expect(await s.run.exit).toBe(0)
  }, 300_000)
})
