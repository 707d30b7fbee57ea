import { execFile } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** Runs the image's HEALTHCHECK command; resolves with its exit code and stderr. */
const healthcheck = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(process.execPath, ["ops/healthcheck.mjs", ...args], { env: { ...process.env, ...env }, timeout: 30_000 }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stderr })
    })
  })

describe("container health check", () => {
  const TOKEN = "0123456789abcdef0123456789abcdef"
  const server = createServer((request, response) => {
    // As svcbot with a health token: the reasons only to a request that carries it.
    if (request.url === "/tokened") {
      response.statusCode = 503
      response.end(request.headers.authorization === `Bearer ${TOKEN}` ? '{"status":"degraded","reasons":["daily loss limit reached"]}' : '{"status":"degraded"}')
      return
    }
    response.statusCode = request.url === "/healthz" ? 200 : 503
    response.end(request.url === "/healthz" ? '{"status":"ready","reasons":[]}' : '{"status":"degraded","reasons":["daily loss limit reached"]}')
  })
  let port = 0
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    port = (server.address() as AddressInfo).port
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

  it("is healthy when /healthz on SVC_HEALTH_PORT answers 2xx", async () => {
    expect(await healthcheck([], { SVC_HEALTH_PORT: String(port) })).toEqual({ code: 0, stderr: "" })
  })

  it("is unhealthy on a non-2xx answer, and passes on the reasons the daemon gives", async () => {
    const result = await healthcheck([`http://127.0.0.1:${port}/degraded`])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("HTTP 503")
    expect(result.stderr).toContain("daily loss limit reached")
  })

  it("sends the health token from SVC_HEALTH_TOKEN or SVC_HEALTH_TOKEN_FILE, so the reasons reach docker inspect", async () => {
    const url = `http://127.0.0.1:${port}/tokened`
    const file = join(mkdtempSync(join(tmpdir(), "svcbot-healthcheck-")), "svc_health_token")
    writeFileSync(file, `${TOKEN}\n`)
    for (const env of [{ SVC_HEALTH_TOKEN: TOKEN }, { SVC_HEALTH_TOKEN_FILE: file }]) {
      const result = await healthcheck([url], env)
      expect(result.code).toBe(1)
      expect(result.stderr, JSON.stringify(env)).toContain("daily loss limit reached")
    }
    // Without the token the status alone still decides.
    const bare = await healthcheck([url], { SVC_HEALTH_TOKEN: "" })
    expect(bare.code).toBe(1)
    expect(bare.stderr).toContain('HTTP 503: {"status":"degraded"}')
  })

  it("is unhealthy when nothing listens", async () => {
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const closedPort = (closed.address() as AddressInfo).port
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const result = await healthcheck([], { SVC_HEALTH_PORT: String(closedPort) })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("unreachable")
  })
})
