// The container's HEALTHCHECK: healthy when the URL answers 2xx within 4 seconds.
// Otherwise the answer's body (svcbot names the reasons it is degraded) goes to
// stderr, which `docker inspect` shows under State.Health.
// The slim image has no curl; node is always there. Usage: node healthcheck.mjs [url]
const port = process.env.SVC_HEALTH_PORT ?? "8081"
const url = process.argv[2] ?? `http://127.0.0.1:${port}/healthz`

try {
  const response = await fetch(url, { signal: AbortSignal.timeout(4000) })
  if (!response.ok) {
    const body = (await response.text()).slice(0, 1000)
    process.stderr.write(`${url} answered HTTP ${response.status}: ${body}\n`)
    process.exit(1)
  }
} catch (error) {
  process.stderr.write(`${url} unreachable: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
}
