// The container's HEALTHCHECK: healthy when the URL answers 2xx within 4 seconds.
// Otherwise the answer's body (svcbot names the reasons it is degraded) goes to
// stderr, which `docker inspect` shows under State.Health.
// With a health token (SVC_HEALTH_TOKEN or SVC_HEALTH_TOKEN_FILE, as the daemon reads it)
// the probe sends it, since svcbot gives the reasons only to a request that carries it.
// The slim image has no curl; node is always there. Usage: node healthcheck.mjs [url]
import { readFileSync } from "node:fs"

const port = process.env.SVC_HEALTH_PORT ?? "8081"
const url = process.argv[2] ?? `http://127.0.0.1:${port}/healthz`

const token = (() => {
  const file = process.env.SVC_HEALTH_TOKEN_FILE
  if (file !== undefined && file !== "") {
    try {
      return readFileSync(file, "utf8").replace(/\r?\n$/, "")
    } catch {
      // Without the token the status still answers: the check goes on, only the reasons are missing.
      return undefined
    }
  }
  return process.env.SVC_HEALTH_TOKEN || undefined
})()

try {
  const response = await fetch(url, { signal: AbortSignal.timeout(4000), headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })
  if (!response.ok) {
    const body = (await response.text()).slice(0, 1000)
    process.stderr.write(`${url} answered HTTP ${response.status}: ${body}\n`)
    process.exit(1)
  }
} catch (error) {
  process.stderr.write(`${url} unreachable: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
}
