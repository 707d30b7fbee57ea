import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

const SECRET = "svs_live_" + "k3J5h7G9f1D3s5A7p9O1i3U5y7T9r1E3w5Q7a9S1d3F5g7H9j"
const KEY = "svk_live_" + "Pq1Rs2Tu3Vw4Xy5Za6Bc7D"

const svcbot = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  spawnSync(process.execPath, ["bin/svcbot.js", ...args], { encoding: "utf8", env: { PATH: process.env.PATH ?? "", ...env } })

const opensslHmac = (canonical: string) =>
  execFileSync("openssl", ["dgst", "-sha256", "-hmac", SECRET], { input: canonical }).toString().trim().split(/\s+/).pop()

describe("svcbot sign", () => {
  it("--json prints the canonical string, the signature openssl computes, and the headers", () => {
    const body = '{"symbol":"BTCUSDT","side":"buy","baseQty":0.5,"limitPrice":60000}'
    const run = svcbot(["sign", "--method", "POST", "--target", "/api/spot/limit?b=2&a=1", "--body", body, "--timestamp", "1764000000000", "--recv-window", "5000", "--json"], {
      SVC_API_SECRET: SECRET,
      SVC_API_KEY: KEY
    })
    expect(run.stderr).toBe("")
    expect(run.status).toBe(0)
    const out = JSON.parse(run.stdout) as { canonical: string; signature: string; headers: Record<string, string> }
    const bodyHash = execFileSync("openssl", ["dgst", "-sha256"], { input: body }).toString().trim().split(/\s+/).pop()
    expect(out.canonical).toBe(`SVC1\nPOST\n/api/spot/limit\nb=2&a=1\n1764000000000\n5000\n${bodyHash}`)
    expect(out.signature).toBe(opensslHmac(out.canonical))
    expect(out.headers).toEqual({
      "X-SVC-APIKEY": KEY,
      "X-SVC-TIMESTAMP": "1764000000000",
      "X-SVC-RECV-WINDOW": "5000",
      "X-SVC-SIGNATURE": out.signature,
      "Content-Type": "application/json"
    })
    expect(run.stdout).not.toContain(SECRET)
  })

  it("reads the secret and the exact body bytes from files and shows each line feed", () => {
    const dir = mkdtempSync(join(tmpdir(), "svcbot-sign-"))
    writeFileSync(join(dir, "secret"), `${SECRET}\n`)
    writeFileSync(join(dir, "body.json"), '{"clientOrderId":"abc"}\n')
    const run = svcbot(["sign", "--method", "post", "--target", "/api/spot/cancel", "--body-file", join(dir, "body.json"), "--timestamp", "1", "--secret-file", join(dir, "secret")])
    expect(run.status).toBe(0)
    expect(run.stdout).toContain("SVC1\\n\nPOST\\n\n/api/spot/cancel\\n\n\\n\n1\\n\n5000\\n\n")
    const bodyHash = execFileSync("openssl", ["dgst", "-sha256"], { input: '{"clientOrderId":"abc"}\n' }).toString().trim().split(/\s+/).pop()
    const canonical = `SVC1\nPOST\n/api/spot/cancel\n\n1\n5000\n${bodyHash}`
    expect(run.stdout).toContain(`signature: ${opensslHmac(canonical)}`)
    expect(run.stdout).not.toContain(SECRET)
  })

  it("refuses a malformed secret with a fix and without echoing it", () => {
    const bad = SECRET.slice(0, 40)
    const run = svcbot(["sign", "--method", "GET", "--target", "/api/wallets/spot", "--timestamp", "1"], { SVC_API_SECRET: bad })
    expect(run.status).toBe(2)
    expect(run.stderr).toMatch(/svs_live_ followed by 49 characters/)
    expect(run.stderr + run.stdout).not.toContain(bad)
  })

  it("refuses a missing secret and a non-numeric timestamp", () => {
    expect(svcbot(["sign", "--method", "GET", "--target", "/api", "--timestamp", "1"]).stderr).toMatch(/set SVC_API_SECRET or pass --secret-file/)
    const run = svcbot(["sign", "--method", "GET", "--target", "/api", "--timestamp", "soon"], { SVC_API_SECRET: SECRET })
    expect(run.status).toBe(2)
    expect(run.stderr).toMatch(/--timestamp must be a whole number/)
  })
})
