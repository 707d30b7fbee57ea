/**
 * `npm test` (scripts/test.mjs) runs the typecheck and the tiers, not every file vitest.config.ts
 * finds: a test file outside every tier, or a tier the script leaves out, would never run in CI.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { ROOT } from "../support/daemon.js"
import { SLOW_LONGEST_FIRST, tierOf } from "../support/tiers.js"

const testFiles = (folder: string): Array<string> =>
  readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".test.ts"))
    .map((name) => `${folder}/${name.split("\\").join("/")}`)

describe("test tiers", () => {
  it("put every test file in a tier", () => {
    const files = [...testFiles("test"), ...testFiles("strategies")]
    expect(files.length).toBeGreaterThan(100)
    expect(files.filter((file) => tierOf(file) === undefined)).toEqual([])
  })

  it("keep the fast tier in its own process: no spawned command, worker thread, listening socket, venue, Postgres or browser", () => {
    const forbidden = ["child_process", "worker_threads", ".listen(", "startVenue(", "startPostgres(", "playwright", "svcbot(", "new Worker("]
    // signer.test.ts asks openssl for its test vectors: a few milliseconds, nothing left running.
    // This file only names the words it looks for.
    const allowed = new Map([
      ["test/unit/signer.test.ts", ["child_process"]],
      ["test/unit/test-tiers.test.ts", forbidden]
    ])
    const fast = [...testFiles("test"), ...testFiles("strategies")].filter((file) => tierOf(file) === "fast")
    expect(fast.length).toBeGreaterThan(50)
    const offending = fast.flatMap((file) => {
      const text = readFileSync(join(ROOT, file), "utf8")
      return forbidden.filter((word) => !(allowed.get(file) ?? []).includes(word) && text.includes(word)).map((word) => `${file}: ${word}`)
    })
    expect(offending).toEqual([])
  })

  it("start the slow tier's longest files first: every file so named is a slow-tier file", () => {
    expect(SLOW_LONGEST_FIRST.filter((file) => !existsSync(join(ROOT, file)) || tierOf(file) !== "slow")).toEqual([])
  })

  it("are each run by npm test, with the typecheck", () => {
    const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts
    expect(scripts.test).toBe("node scripts/test.mjs")
    const runner = readFileSync(join(ROOT, "scripts/test.mjs"), "utf8")
    const tiers = Object.keys(scripts).filter((name) => name.startsWith("test:"))
    expect(tiers.sort()).toEqual(["test:container", "test:fast", "test:integration", "test:slow"])
    expect([...tiers, "typecheck"].filter((name) => !runner.includes(`"${name}"`))).toEqual([])
  })
})
