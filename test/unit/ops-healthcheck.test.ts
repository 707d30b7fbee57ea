import { execFile } from "node:child_process"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** Runs the image's HEALTHCHECK command; resolves with its exit code and stderr. */
const healthcheck = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(process.execPath, ["ops/healthcheck.mjs", ...args], { env: { ...process.env, ...env }, timeout: 30_000 }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stderr })
    })
  })

describe("container health check", () => {
  const server = createServer((request, response) => {
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
