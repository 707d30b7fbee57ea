/**
 * kill -9 of a real engine process at seeded random points of its progress, then a
 * restart, until the script completes; afterwards: zero duplicate orders, fills equal row for row,
 * balances agree. The child is `fixtures/engine-child.ts`; swapping in the
 * daemon means changing `childCommand`. A second run kills it exactly where a group
 * commit could fail its promise: after placements were marked `submitting` and before
 * they were sent, and after the venue accepted one and before its answer was recorded.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { defaultDialect } from "../../src/svc/Dialect.js"
import type { VenueRequest } from "../../src/venue/Venue.js"
import { query } from "../support/daemon.js"
import { chaosSeed, seededRandom } from "../support/seed.js"
import { startVenue } from "../support/venue.js"
import { tempDbPath } from "../integration/engine-harness.js"
import { scriptedIntents } from "./fixtures/script.js"
import { expectNothingLostOrDuplicated, report, verify } from "./verify.js"

const FIXTURE = fileURLToPath(new URL("./fixtures/engine-child.ts", import.meta.url))

interface ChildTarget {
  readonly url: string
  readonly keyId: string
  readonly secret: string
  readonly dbPath: string
  readonly intents: number
  /** Intents per submit (one strategy batch); 1 when absent. */
  readonly perSubmit?: number
}

const childCommand = (t: ChildTarget): readonly [string, ReadonlyArray<string>] => [
  process.execPath,
  ["--import", "tsx", FIXTURE, t.url, t.keyId, t.secret, t.dbPath, String(t.intents), String(t.perSubmit ?? 1)]
]

const INTENTS = 40
const MAX_KILLS = 6
const CHILD_DEADLINE_MS = 90_000

const children: Array<ChildProcess> = []
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface ChildOptions {
  /** Extra environment of the child. */
  readonly env?: Readonly<Record<string, string>>
  /** Hands the caller a way to kill the child from outside its progress lines (SIGKILL, counted as a planned kill). */
  readonly onSpawn?: (kill: () => void) => void
}

/**
 * Starts the child; resolves with "done" when it completes, or "killed" when it was killed on
 * reaching the progress point `killAt` (see `fixtures/engine-child.ts`) or by the caller.
 * `submitted` collects the tags it reports as submitted.
 */
const runChild = (target: ChildTarget, killAt: string | undefined, submitted: Set<string>, options: ChildOptions = {}) =>
  new Promise<{ outcome: "done" | "killed"; stderr: string }>((resolve, reject) => {
    const [command, args] = childCommand(target)
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...options.env } })
    children.push(child)
    let stdout = ""
    let partial = ""
    let stderr = ""
    let killed = false
    const kill = () => {
      if (killed) return
      killed = true
      child.kill("SIGKILL")
    }
    options.onSpawn?.(kill)
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString()
      // Whole lines only: a chunk can end in the middle of one.
      const lines = (partial + chunk.toString()).split("\n")
      partial = lines.pop() ?? ""
      for (const line of lines) {
        if (line.startsWith("progress submitted ")) submitted.add(line.slice("progress submitted ".length))
        if (killAt !== undefined && line === `progress ${killAt}`) kill()
      }
    })
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const deadline = setTimeout(() => child.kill("SIGKILL"), CHILD_DEADLINE_MS)
    child.on("exit", (code) => {
      clearTimeout(deadline)
      if (stdout.includes("done")) resolve({ outcome: "done", stderr })
      else if (killed) resolve({ outcome: "killed", stderr })
      else reject(new Error(`the engine child exited with ${code} before finishing:\n${stderr.slice(-4000)}`))
    })
  })

/**
 * Where the next run is killed: one of the points it will pass (start-up, inside the startup
 * reconcile, after it, after one of the submissions still to come, while settling). The first
 * kill lands after a submission in the first half of the script, so every run has kills.
 */
const killPoint = (random: () => number, submitted: ReadonlySet<string>, first: boolean): string => {
  const ahead = scriptedIntents(INTENTS).map((i) => i.tag).filter((tag) => !submitted.has(tag))
  if (first) return `submitted ${ahead[Math.floor(random() * Math.ceil(ahead.length / 2))]}`
  const points = ["starting", "reconciling", "reconciled", ...ahead.map((tag) => `submitted ${tag}`), "settling"]
  return points[Math.floor(random() * points.length)]!
}

describe("chaos: kill -9", () => {
  it("kill -9 at random points and restarts lose nothing and duplicate nothing", async () => {
    const venue = await startVenue({ faults: { dropAcceptedRatio: 0.3, seed: 11 } })
    cleanups.push(() => venue.close())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    const seed = chaosSeed()
    const random = seededRandom(seed)
    const target: ChildTarget = { url: venue.url, keyId: venue.keyId, secret: venue.secret, dbPath: db.path, intents: INTENTS }
    const submitted = new Set<string>()
    const killedAt: Array<string> = []
    let finished = false
    while (!finished && killedAt.length < MAX_KILLS) {
      const point = killPoint(random, submitted, killedAt.length === 0)
      const result = await runChild(target, point, submitted)
      if (result.outcome === "killed") killedAt.push(point)
      else finished = true
    }
    if (!finished) await runChild(target, undefined, submitted)
    const kills = killedAt.length
    const verdict = await verify(venue, db.path)
    console.log(`${report("kill -9", verdict)}; kills ${kills} (at ${killedAt.join(", ")}), seed ${seed}`)
    expect(verdict.intents).toBe(INTENTS)
    expectNothingLostOrDuplicated(verdict)
    expect(verdict.placed + verdict.refused + verdict.notPlaced + verdict.riskRefused).toBe(verdict.intents)
    expect(kills).toBeGreaterThan(0)
  }, 240_000)

  it("kill -9 between the commit that marks placements submitting and their send, and after a send before its answer: nothing lost, nothing duplicated", async () => {
    const venue = await startVenue()
    cleanups.push(() => venue.close())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    const seed = chaosSeed()
    const random = seededRandom(seed)
    // Three intents per submit: each batch is journaled in one transaction and marked for sending in one commit.
    const target: ChildTarget = { url: venue.url, keyId: venue.keyId, secret: venue.secret, dbPath: db.path, intents: INTENTS, perSubmit: 3 }
    const placementPaths = new Set([defaultDialect.paths.limitOrder, defaultDialect.paths.marketOrder, defaultDialect.paths.stopLimitOrder])
    // The venue accepts the chosen placement, then the child dies before the answer reaches it.
    let killAfterPlacement: { at: number; kill: () => void } | undefined
    let placements = 0
    const handle = venue.venue.handle.bind(venue.venue)
    venue.venue.handle = (request: VenueRequest) => {
      const answer = handle(request)
      if (request.method === "POST" && placementPaths.has(request.target.split("?")[0] ?? "")) {
        placements += 1
        if (killAfterPlacement !== undefined && placements === killAfterPlacement.at) killAfterPlacement.kill()
      }
      return answer
    }
    const submitted = new Set<string>()
    const kills: Array<string> = []
    let finished = false
    while (!finished && kills.length < MAX_KILLS) {
      // What the journal already holds is never submitted again, whatever the child printed before it died.
      const journaled = existsSync(db.path) ? new Set(query<{ tag: string }>(db.path, "SELECT tag FROM intents").map((row) => row.tag)) : new Set<string>()
      const ahead = scriptedIntents(INTENTS).map((i) => i.tag).filter((tag) => !journaled.has(tag))
      const tag = ahead[Math.floor(random() * Math.ceil(ahead.length / 2))]
      const betweenCommitAndSend = kills.length % 2 === 0
      let result: { outcome: "done" | "killed" }
      if (betweenCommitAndSend && tag !== undefined) {
        result = await runChild(target, `marked ${tag}`, submitted, { env: { CHAOS_HALT_AT_MARK: tag } })
        if (result.outcome === "killed") kills.push(`marked ${tag}`)
      } else {
        const at = placements + 1 + Math.floor(random() * 6)
        result = await runChild(target, undefined, submitted, { onSpawn: (kill) => (killAfterPlacement = { at, kill }) })
        killAfterPlacement = undefined
        if (result.outcome === "killed") kills.push(`venue accepted placement ${at}`)
      }
      finished = result.outcome === "done"
    }
    if (!finished) await runChild(target, undefined, submitted)
    const verdict = await verify(venue, db.path)
    console.log(`${report("kill -9 around the send", verdict)}; kills ${kills.length} (at ${kills.join(", ")}), seed ${seed}`)
    expect(verdict.intents).toBe(INTENTS)
    expectNothingLostOrDuplicated(verdict)
    expect(verdict.placed + verdict.refused + verdict.notPlaced + verdict.riskRefused).toBe(verdict.intents)
    // Marked and never sent: proven absent. Accepted with the answer lost: found and adopted.
    expect(kills.some((k) => k.startsWith("marked"))).toBe(true)
    expect(kills.some((k) => k.startsWith("venue accepted"))).toBe(true)
    expect(verdict.notPlaced).toBeGreaterThan(0)
    expect(verdict.adoptedAfterLoss).toBeGreaterThan(0)
  }, 300_000)
})
