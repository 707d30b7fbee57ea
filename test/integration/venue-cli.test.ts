/**
 * The svc-venue program: prints the dev keys when no accounts file is given, logs one
 * JSON `venue.listening` line with its url, serves, and stops cleanly on SIGTERM.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { decodeAccounts, devAccounts } from "../../src/venue/Accounts.js"

const BIN = join(import.meta.dirname, "..", "..", "bin", "svc-venue.js")

const run = (args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const line = async (event: string, timeoutMs = 45_000): Promise<Record<string, unknown>> => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const found = stdout
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.event === event)
      if (found !== undefined) return found
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no ${event} line; stdout: ${stdout} stderr: ${stderr}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  return { child, exited, line, output: () => ({ stdout, stderr }) }
}

describe("svc-venue program", () => {
  it("the example accounts file config/venue-accounts.json is valid", () => {
    const file = decodeAccounts(JSON.parse(readFileSync(join(import.meta.dirname, "..", "..", "config", "venue-accounts.json"), "utf8")))
    expect(file.accounts.length).toBeGreaterThan(0)
    expect(() => decodeAccounts({ ...file, accounts: [{ uid: 1, keys: [{ id: "svk_live_short", secret: "x", permissions: ["read"] }] }] })).toThrow(/svk_live_/)
  })

  it("logs venue.listening with its url, prints the dev keys, serves, and stops on SIGTERM", async () => {
    const p = run(["--port", "0", "--tape", "manual"])
    const listening = await p.line("venue.listening")
    expect(listening.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(p.output().stderr).toContain(devAccounts.accounts[0]!.keys![0]!.secret)
    const ticker = await fetch(`${String(listening.url)}/api/spot/ticker?symbol=BTCUSDT`)
    expect(await ticker.json()).toMatchObject({ symbol: "BTCUSDT", price: "60000" })
    p.child.kill("SIGTERM")
    expect(await p.exited).toBe(0)
    expect(p.output().stdout).toContain('"event":"venue.stopped"')
  })

  it("a --port in use exits 2 with one line naming it and the fix", async () => {
    const first = run(["--port", "0", "--tape", "manual"])
    const port = Number(new URL(String((await first.line("venue.listening")).url)).port)
    try {
      const second = run(["--port", String(port), "--tape", "manual"])
      expect(await second.exited).toBe(2)
      const last = second.output().stderr.trimEnd().split("\n").at(-1)
      expect(last).toBe(`svc-venue: --port ${port} is in use on 127.0.0.1: give a free --port, or --port 0 for any free one`)
    } finally {
      first.child.kill("SIGTERM")
      await first.exited
    }
  })

  it("flags that are wrong together, or name a file that is not there, exit 2 with one line and print no keys", async () => {
    for (const [args, line] of [
      [["--tls-cert", "cert.pem"], "svc-venue: --tls-cert and --tls-key go together"],
      [["--tape", "synthetic:seven"], "svc-venue: --tape synthetic:seven: write synthetic:SEED with an integer seed, e.g. synthetic:42"],
      [["--follow-poll-ms", "500"], "svc-venue: --follow-poll-ms goes with --follow URL"],
      [["--accounts", "/nonexistent/accounts.json"], "svc-venue: cannot read the accounts file /nonexistent/accounts.json: ENOENT: no such file or directory, open '/nonexistent/accounts.json'"]
    ] as const) {
      const p = run(["--port", "0", ...args])
      expect(await p.exited, args.join(" ")).toBe(2)
      expect(p.output().stderr).toBe(`${line}\n`)
    }
  })

  it("serves the accounts of --accounts FILE and does not print dev keys", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-venue-"))
    const file = join(dir, "accounts.json")
    writeFileSync(file, JSON.stringify({ ...devAccounts, pairs: [{ ...devAccounts.pairs[0]!, price: "12345" }] }))
    const p = run(["--port", "0", "--tape", "manual", "--accounts", file])
    const listening = await p.line("venue.listening")
    const ticker = await fetch(`${String(listening.url)}/api/spot/ticker?symbol=BTCUSDT`)
    expect(await ticker.json()).toMatchObject({ price: "12345" })
    expect(p.output().stderr).not.toContain("svs_live_")
    p.child.kill("SIGTERM")
    expect(await p.exited).toBe(0)
  })
})
