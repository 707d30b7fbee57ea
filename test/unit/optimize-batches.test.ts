/**
 * How a cluster run cuts its trials into batches and spreads them over lanes: one trial while
 * the trial time is unknown, then about a second of work, never more than an even share of what
 * is left per lane; two lanes kept on each worker, learnt from who answers, probes opened while
 * a live worker lacks its lanes.
 */
import { describe, expect, it } from "vitest"
import { BATCH_WORK_MS, batchSize, Lanes, MAX_BATCH, TrialClock } from "../../src/optimize/Batches.js"

describe("a batch's size", () => {
  it("is one trial until a worker has reported a trial's time", () => {
    expect(batchSize(undefined, 500, 4)).toBe(1)
    expect(new TrialClock().msPerTrial).toBeUndefined()
  })

  it("is about a second of work, from the mean time the workers reported", () => {
    const clock = new TrialClock()
    clock.observe(1, 30)
    clock.observe(3, 50)
    expect(clock.msPerTrial).toBe(20)
    expect(batchSize(clock.msPerTrial, 10_000, 4)).toBe(BATCH_WORK_MS / 20)
    expect(batchSize(0, 1_000_000, 1)).toBe(MAX_BATCH)
  })

  it("shrinks to an even share of what is left per lane, but not below a twentieth of a second of work while that much is left", () => {
    expect(batchSize(1, 1000, 4)).toBe(250)
    expect(batchSize(1, 100, 4)).toBe(50)
    expect(batchSize(10, 100, 4)).toBe(25)
    expect(batchSize(10, 30, 4)).toBe(8)
    expect(batchSize(10, 20, 4)).toBe(5)
    expect(batchSize(10, 3, 4)).toBe(3)
    expect(batchSize(100, 3, 4)).toBe(1)
    expect(batchSize(1, 0, 4)).toBe(0)
  })
})

describe("a run's lanes", () => {
  it("start two to a live worker, and keep two on each once they know where they go", () => {
    const lanes = new Lanes(2)
    const first = lanes.start(2)
    expect(first).toEqual([0, 1, 2, 3])
    const active = new Set(first)
    // Three lanes land on a, one on b: the third of a stops, and b lacks one, so a probe opens.
    expect(lanes.answered(0, "a")).toBe(true)
    expect(lanes.answered(1, "a")).toBe(true)
    expect(lanes.answered(3, "b")).toBe(true)
    expect(lanes.answered(2, "a")).toBe(false)
    active.delete(2)
    expect(lanes.topUp(active, 2)).toEqual([4])
    active.add(4)
    expect(lanes.answered(4, "b")).toBe(true)
    expect(lanes.topUp(active, 2)).toEqual([])
    // The next batch of trials starts on the lanes known to go to a and b, the stopped one left out.
    expect(lanes.start(2)).toEqual([0, 1, 3, 4])
  })

  it("stop a lane that lands on a worker holding its two, though those two have no batch out", () => {
    const lanes = new Lanes(2)
    for (const lane of lanes.start(2)) lanes.answered(lane, lane < 2 ? "a" : "b")
    // Lanes 0 and 1 ended their last batch (a run's tail); a probe then reaching a is still a third lane of a.
    expect(lanes.answered(4, "a")).toBe(false)
    expect(lanes.start(2)).toEqual([0, 1, 2, 3])
  })

  it("start at most two to a worker when more went to it, the lowest numbered kept", () => {
    const lanes = new Lanes(2)
    for (const lane of lanes.start(2)) lanes.answered(lane, "a")
    // Lanes 2 and 3 stopped when they answered from a, and two probes found b.
    expect(lanes.topUp(new Set([0, 1]), 2)).toEqual([4, 5])
    expect(lanes.answered(4, "b")).toBe(true)
    expect(lanes.answered(5, "b")).toBe(true)
    expect(lanes.start(2)).toEqual([0, 1, 4, 5])
    // Then shards moved: lane 1 answers from b, which so holds three lanes (1, 4, 5) and a one (0).
    expect(lanes.answered(1, "b")).toBe(true)
    // The next batch of trials starts on two of b's (1 and 4), a's one, and a probe for a's second.
    expect(lanes.start(2)).toEqual([0, 1, 4, 6])
  })

  it("open no probe while one is unanswered, and at most a bounded number in all", () => {
    const lanes = new Lanes(2)
    const active = new Set(lanes.start(1))
    expect(lanes.topUp(active, 3)).toEqual([])
    for (const lane of active) lanes.answered(lane, "a")
    let opened = 0
    for (let i = 0; i < 100; i++) {
      const probes = lanes.topUp(active, 3)
      for (const probe of probes) {
        lanes.answered(probe, "a")
        opened++
      }
    }
    expect(opened).toBeLessThanOrEqual(8 * 2 * 3)
  })
})
