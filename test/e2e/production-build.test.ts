/**
 * The production build as the container image runs it: `tsc -p tsconfig.build.json`
 * compiled into a scratch directory laid out like the image (dist/, bin/, config/,
 * package.json, migrations at dist/migrations, no TypeScript sources), so that
 * bin/launch.js takes the compiled path. The daemon must become ready on
 * `/healthz` and stop cleanly on SIGTERM. The checkout's own tree is not touched.
 */
import { execFile, spawn } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { freeLoopbackPort, healthz } from "../support/daemon.js"
import { afterAll, describe, expect, it } from "vitest"

const ROOT = resolve(import.meta.dirname, "../..")
const ENV = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" }

const scratch = mkdtempSync(join(tmpdir(), "svcbot-build-"))
const children: Array<ReturnType<typeof spawn>> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
  rmSync(scratch, { recursive: true, force: true })
})

const run = (file: string, args: ReadonlyArray<string>, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((done) => {
    execFile(file, args, { cwd, env: ENV, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr })
    )
  })

/** Every file under `dir` whose name ends with `.ts` (declaration files aside). */
const typeScriptSources = (dir: string): Array<string> =>
  readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((path) => path.endsWith(".ts") && !path.endsWith(".d.ts"))

describe("the production build", () => {
  it("compiles, becomes ready on /healthz from dist/ alone, and exits 0 on SIGTERM", async () => {
    const repoHadDist = existsSync(join(ROOT, "dist"))
    const build = await run(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json", "--outDir", join(scratch, "dist")], ROOT)
    expect(build.stdout + build.stderr, "tsc -p tsconfig.build.json").toBe("")
    expect(build.code).toBe(0)
    expect(existsSync(join(ROOT, "dist")), "the build went to the scratch directory, not the checkout").toBe(repoHadDist)

    // The image's layout (see Dockerfile): compiled code, launchers, configs, migrations next to dist/src/store.
    for (const part of ["bin", "config", "package.json"]) cpSync(join(ROOT, part), join(scratch, part), { recursive: true })
    cpSync(join(ROOT, "migrations"), join(scratch, "dist/migrations"), { recursive: true })
    symlinkSync(join(ROOT, "node_modules"), join(scratch, "node_modules"), "dir")
    expect(existsSync(join(scratch, "dist/apps/bot/main.js"))).toBe(true)
    expect(readdirSync(join(scratch, "dist/strategies")).filter((f) => f.endsWith(".js")).length).toBeGreaterThan(0)
    expect(typeScriptSources(join(scratch, "dist"))).toEqual([])
    expect(existsSync(join(scratch, "apps")) || existsSync(join(scratch, "src"))).toBe(false)

    const port = await freeLoopbackPort()
    const config = JSON.parse(readFileSync(join(ROOT, "config/default.json"), "utf8")) as Record<string, unknown>
    mkdirSync(join(scratch, "data"))
    const dbPath = join(scratch, "data/svcbot.db")
    writeFileSync(join(scratch, "config/production-test.json"), JSON.stringify({ ...config, database: { path: dbPath }, health: { host: "127.0.0.1", port } }))

    const child = spawn(process.execPath, [join(scratch, "bin/svcbot.js"), "run", "--config", "config/production-test.json"], {
      cwd: scratch,
      env: { ...ENV, NODE_ENV: "production" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.push(child)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    const exit = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))

    const url = `http://127.0.0.1:${port}/healthz`
    const deadline = Date.now() + 90_000
    let last: { status: number; body: string } | undefined
    while (!(last?.status === 200) && child.exitCode === null && Date.now() < deadline) {
      last = await healthz(url)
      if (last?.status !== 200) await new Promise((done) => setTimeout(done, 250))
    }
    expect(child.exitCode, `the compiled daemon exited early:\n${stderr}\n${stdout}`).toBeNull()
    expect(last?.status, `no 200 from ${url} within the deadline; last answer ${JSON.stringify(last)}`).toBe(200)
    expect(JSON.parse(last!.body)).toMatchObject({ status: "ready" })

    child.kill("SIGTERM")
    expect(await exit).toBe(0)
    expect(stderr).toBe("")
    const events = stdout.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line) as { event: string; exitCode?: number })
    expect(events.filter((e) => e.event === "strategy.started").length).toBeGreaterThan(0)

    // `docker compose exec bot node bin/svcbot.js status` from the same image.
    const shown = await run(process.execPath, [join(scratch, "bin/svcbot.js"), "status", "--config", "config/production-test.json", "--json"], scratch)
    expect(shown.stderr).toBe("")
    expect(shown.code).toBe(0)
    expect((JSON.parse(shown.stdout) as { database: string }).database).toBe(dbPath)

    // A stop by signal is a clean stop, and the log says so.
    expect(events.find((e) => e.event === "app.stopped")).toMatchObject({ exitCode: 0 })
  }, 300_000)
})
