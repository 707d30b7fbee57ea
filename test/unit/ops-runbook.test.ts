import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { EventCatalog, isEventName } from "../../src/log/Events.js"
import { DEFAULT_ALERT_EVENTS } from "../../src/ops/AlertWebhook.js"

const runbook = readFileSync("docs/operations.md", "utf8")
const runbookPart = runbook.slice(runbook.indexOf("\n## Runbook"))

/** `### \`event\` (level)` or `### \`event\` (level, alert)` sections, each with its text. */
const entries = [...runbookPart.matchAll(/^### `([^`]+)` \(([a-z]+)(, alert)?\)\n([\s\S]*?)(?=^### |(?![\s\S]))/gm)].map((match) => ({
  event: match[1]!,
  level: match[2]!,
  alert: match[3] !== undefined,
  text: match[4]!
}))

describe("operations runbook", () => {
  it("has an entry for every warning, error and fatal event of the catalog, at its level", () => {
    const byEvent = new Map(entries.map((entry) => [entry.event, entry]))
    for (const [event, spec] of Object.entries(EventCatalog)) {
      if (spec.level === "debug" || spec.level === "info") continue
      const entry = byEvent.get(event)
      expect(entry, `docs/operations.md has a runbook entry for ${event}`).toBeDefined()
      expect(entry?.level, event).toBe(spec.level)
    }
  })

  it("every entry names a catalog event once and says what it means and what to do", () => {
    expect(entries.length).toBeGreaterThan(0)
    expect(new Set(entries.map((entry) => entry.event)).size).toBe(entries.length)
    for (const entry of entries) {
      expect(isEventName(entry.event), `${entry.event} is in src/log/Events.ts`).toBe(true)
      expect(entry.text, entry.event).toContain("**Means:**")
      expect(entry.text, entry.event).toContain("**Do:**")
    }
  })

  it("marks exactly the events the alert webhook sends", () => {
    expect(entries.filter((entry) => entry.alert).map((entry) => entry.event).sort()).toEqual([...DEFAULT_ALERT_EVENTS].sort())
  })

  it("opens with the README section on running in a container", () => {
    expect(/^## (.+)$/m.exec(runbook)?.[1]).toBe("Running in a container")
  })
})
