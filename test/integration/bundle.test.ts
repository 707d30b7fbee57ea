/**
 * The bundle a checkout's programs start from (bin/bundle.js): built from the sources as they
 * are, rebuilt when one changes and not otherwise, with each module's own location and the
 * modules a plugin imports shared with the program's. A small tree stands in for the checkout.
 */
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"
import { freshBundle } from "../../bin/bundle.js"
import { sourceHashOfFile } from "../../src/domain/Hash.js"
import { ROOT, svcbot } from "../support/daemon.js"

const write = (root: string, file: string, text: string) => {
  mkdirSync(join(root, file, ".."), { recursive: true })
  writeFileSync(join(root, file), text)
}

const checkout = () => {
  const root = mkdtempSync(join(tmpdir(), "svcbot-bundle-"))
  write(root, "package.json", '{ "type": "module" }\n')
  mkdirSync(join(root, "node_modules"))
  write(root, "migrations/0001_first.sql", "CREATE TABLE t (x INTEGER);\n")
  write(root, "src/strategy/Strategy.ts", "export const token: object = {}\n")
  write(root, "src/store/Where.ts", 'export const where: string = import.meta.url\nexport const generation = 1\n')
  write(root, "apps/demo/main.ts", 'export { token } from "../../src/strategy/Strategy.js"\nexport { generation, where } from "../../src/store/Where.js"\n')
  return root
}

interface Demo {
  readonly token: object
  readonly where: string
  readonly generation: number
}
const load = (dir: string, file: string) => import(pathToFileURL(join(dir, file)).href) as Promise<Demo>

describe("the bundle of a checkout's sources", () => {
  it("gives each module the location its source has, mirrored, with the migrations beside it", async () => {
    const root = checkout()
    const dir = await freshBundle(root)
    const demo = await load(dir, "apps/demo/main.js")
    expect(demo.where).toBe(pathToFileURL(join(dir, "src/store/Where.js")).href)
    expect(readdirSync(join(dir, "migrations"))).toEqual(["0001_first.sql"])
  })

  it("shares the public modules with the program: what a plugin imports is the program's own", async () => {
    const root = checkout()
    const dir = await freshBundle(root)
    const [program, publicModule] = [await load(dir, "apps/demo/main.js"), await load(dir, "src/strategy/Strategy.js")]
    expect(program.token).toBe(publicModule.token)
  })

  it("is used again while the sources stay as they are, and built anew when one changes", async () => {
    const root = checkout()
    const first = await freshBundle(root)
    expect(await freshBundle(root)).toBe(first)
    write(root, "src/store/Where.ts", 'export const where: string = import.meta.url\nexport const generation = 2\n')
    const second = await freshBundle(root)
    expect(second).not.toBe(first)
    expect((await load(second, "apps/demo/main.js")).generation).toBe(2)
    expect((await load(first, "apps/demo/main.js")).generation).toBe(1)
  })
})

describe("a shipped strategy run from the checkout's bundle", () => {
  it("is the checkout's source file where it is shown and hashed for promotion records", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svcbot-bundle-grid-"))
    const run = svcbot(["backtest", "--strategy", "grid", "--synthetic", "42:300", "--json", "--db", join(dir, "b.db")])
    expect(await run.exit, run.stderr.join("")).toBe(0)
    const out = JSON.parse(run.lines.join("\n")) as { readonly sourceHash: string; readonly strategy: string }
    expect(out.strategy).toBe("grid")
    expect(out.sourceHash).toBe(sourceHashOfFile(join(ROOT, "strategies/grid.ts")))
  })
})
