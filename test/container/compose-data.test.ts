/**
 * The `data` profile: the recorder writes closed candles into its volume and, after
 * `docker compose restart record`, continues the same file without a hole or a repeated row.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { pollUntil } from "../support/daemon.js"
import { buildImage, project, unavailable, untilHealthy, type Project } from "./compose.js"

const MINUTE = 60_000

describe.skipIf(unavailable !== undefined)(`the data profile's recorder${unavailable === undefined ? "" : ` (skipped: ${unavailable})`}`, () => {
  let p: Project

  beforeAll(async () => {
    await buildImage()
    p = await project("data")
  }, 900_000)

  afterAll(async () => {
    await p?.down()
  }, 120_000)

  /** The open times of the recorded rows (the header skipped). */
  const recorded = async (): Promise<Array<number>> => {
    const file = await p.compose(["--profile", "data", "exec", "-T", "record", "cat", "/app/data/BTCUSDT-1m.csv"])
    if (file.status !== 0) return []
    return file.stdout.split("\n").slice(1).filter((line) => line !== "").map((line) => Number(line.split(",")[0]))
  }
  const withRows = (atLeast: number) => async () => {
    const rows = await recorded()
    return rows.length >= atLeast ? rows : undefined
  }

  it("records closed candles and continues the file after a restart", async () => {
    const up = await p.compose(["--profile", "data", "up", "-d", "record"])
    expect(up.status, up.stderr).toBe(0)
    await untilHealthy(p, "venue", 120_000)
    const first = await pollUntil(withRows(1), 90_000, "a recorded candle", 2000)

    const restart = await p.compose(["--profile", "data", "restart", "record"])
    expect(restart.status, restart.stderr).toBe(0)
    // The next minute's candle closes at most a minute later, and the recorder polls every 5 s.
    const after = await pollUntil(withRows(first.length + 1), 3 * MINUTE, "a candle recorded after the restart", 2000)
    expect(after.slice(0, first.length)).toEqual(first)
    for (let i = 1; i < after.length; i++) expect(after[i]! - after[i - 1]!, `row ${i + 1} follows row ${i} by one interval`).toBe(MINUTE)
    expect((await p.inspect("record")).restarts).toBe(0)
  }, 600_000)
})
