/**
 * How a start that svcbot refuses looks to an operator. Kept out of support/daemon.ts: the
 * container tier's global setup imports that, and vitest's `expect` cannot load there.
 */
import { expect } from "vitest"
import type { Run } from "./daemon.js"

/** A start refused as an operator sees it: exit 2 and one line on stderr naming `what` and the cause, no stack trace. Returns the line. */
export const expectRefused = async (run: Run, what: string, cause: RegExp): Promise<string> => {
  expect(await run.exit).toBe(2)
  const lines = run.stderr.join("").trimEnd().split("\n")
  expect(lines).toHaveLength(1)
  expect(lines[0]).toContain(what)
  expect(lines[0]).toMatch(cause)
  expect(lines[0]).not.toMatch(/Error:|\bat .*:\d+:\d+/)
  return lines[0]!
}
