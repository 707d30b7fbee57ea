/**
 * kill -9 of a real engine process at seeded random points of its progress, then a
 * restart, until the script completes; afterwards: zero duplicate orders, fills equal row for row,
 * balances agree. The child is `fixtures/engine-child.ts`; swapping in the
 * daemon means changing `childCommand`.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
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
}

const childCommand = (t: ChildTarget): readonly [string, ReadonlyArray<string>] => [
  process.execPath,
  ["--import", "tsx", FIXTURE, t.url, t.keyId, t.secret, t.dbPath, String(t.intents)]
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

/**
 * Starts the child; resolves with "done" when it completes, or "killed" when it was killed on
 * reaching the progress point `killAt` (see `fixtures/engine-child.ts`). `submitted` collects
 * the tags it reports as submitted.
 */
const runChild = (target: ChildTarget, killAt: string | undefined, submitted: Set<string>) =>
  new Promise<{ outcome: "done" | "killed"; stderr: string }>((resolve, reject) => {
    const [command, args] = childCommand(target)
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] })
    children.push(child)
    let stdout = ""
    let partial = ""
    let stderr = ""
    let killed = false
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString()
      // Whole lines only: a chunk can end in the middle of one.
      const lines = (partial + chunk.toString()).split("\n")
      partial = lines.pop() ?? ""
      for (const line of lines) {
        if (line.startsWith("progress submitted ")) submitted.add(line.slice("progress submitted ".length))
        if (!killed && killAt !== undefined && line === `progress ${killAt}`) {
          killed = true
          child.kill("SIGKILL")
        }
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
})
