/**
 * `npm test` runs the tiers one after the other, not every file vitest.config.ts finds: a
 * test file outside every tier would never run in CI.
 */
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { ROOT } from "../support/daemon.js"
import { tierOf } from "../support/tiers.js"

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
})
