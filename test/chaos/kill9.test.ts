/**
 * kill -9 of a real engine process at random points, then a restart, until the
 * script completes; afterwards: zero duplicate orders, fills equal row for row,
 * balances agree. The child is `fixtures/engine-child.ts`; swapping in the
 * daemon means changing `childCommand`.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { startVenue } from "../support/venue.js"
import { tempDbPath } from "../integration/engine-harness.js"
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

/** A small seeded generator, so a failing run can be repeated from its printed seed. */
const lcg = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    return state / 2 ** 32
  }
}

const children: Array<ChildProcess> = []
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Starts the child; resolves with "done" when it completes, or "killed" when it was killed after `killAfterMs`. */
const runChild = (target: ChildTarget, killAfterMs: number | undefined) =>
  new Promise<{ outcome: "done" | "killed"; stderr: string }>((resolve, reject) => {
    const [command, args] = childCommand(target)
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] })
    children.push(child)
    let stdout = ""
    let stderr = ""
    let killed = false
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const killTimer = killAfterMs === undefined ? undefined : setTimeout(() => ((killed = true), child.kill("SIGKILL")), killAfterMs)
    const deadline = setTimeout(() => child.kill("SIGKILL"), CHILD_DEADLINE_MS)
    child.on("exit", (code) => {
      clearTimeout(killTimer)
      clearTimeout(deadline)
      if (stdout.includes("done")) resolve({ outcome: "done", stderr })
      else if (killed) resolve({ outcome: "killed", stderr })
      else reject(new Error(`the engine child exited with ${code} before finishing:\n${stderr.slice(-4000)}`))
    })
  })

describe("chaos: kill -9", () => {
  it("kill -9 at random points and restarts lose nothing and duplicate nothing", async () => {
    const venue = await startVenue({ faults: { dropAcceptedRatio: 0.3, seed: 11 } })
    cleanups.push(() => venue.close())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    const seed = Date.now() % 100_000
    const random = lcg(seed)
    const target: ChildTarget = { url: venue.url, keyId: venue.keyId, secret: venue.secret, dbPath: db.path, intents: INTENTS }
    let kills = 0
    let finished = false
    while (!finished && kills < MAX_KILLS) {
      // The child needs about a second to start; kills land before, during and after its reconcile and submissions.
      const result = await runChild(target, 600 + Math.floor(random() * 2400))
      if (result.outcome === "killed") kills += 1
      else finished = true
    }
    if (!finished) await runChild(target, undefined)
    const verdict = await verify(venue, db.path)
    console.log(`${report("kill -9", verdict)}; kills ${kills}, seed ${seed}`)
    expect(verdict.intents).toBe(INTENTS)
    expectNothingLostOrDuplicated(verdict)
    expect(verdict.placed + verdict.refused + verdict.notPlaced + verdict.riskRefused).toBe(verdict.intents)
    expect(kills).toBeGreaterThan(0)
  }, 240_000)
})
