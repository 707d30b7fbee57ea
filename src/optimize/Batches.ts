/**
 * How trials are cut into the batches a cluster message carries, and over which lanes they go.
 *
 * A batch carries about a second of work (`BATCH_WORK_MS`), sized from the trial time the
 * workers measured and reported, so that a message's round trips through Postgres are small
 * beside the work it carries. Near the end of a run the batches shrink (guided
 * self-scheduling: at most an even share of what is left per lane), so that the workers
 * finish together instead of one running a last full second while the others wait; but not
 * below a twentieth of a second of work, or the messages' round trips would idle the workers.
 *
 * A lane is an entity of the trial entity type: the library routes an entity to the worker
 * owning its shard, by hash, so the run cannot name a worker, but it can learn where a lane
 * goes from the worker named in its answers. The run keeps `LANES_PER_WORKER` lanes on each
 * worker, each sending its next batch when its last is answered: a worker always has the next
 * batch at hand while it answers one, and a worker with more lanes than that has them retired.
 * Until every live worker has its lanes, the run opens more (probes), as a lane's worker is
 * only known once it answered.
 */

/** About a second of work per message. */
export const BATCH_WORK_MS = 1000
/**
 * The least work a message carries while that many trials are left: a message's round trip (the
 * request written to Postgres and routed, the results written, the reply) takes tens of
 * milliseconds, and a batch shorter than its sibling lane's round trip leaves its worker idle.
 */
export const MIN_BATCH_WORK_MS = 50
/** Bounds a message's size whatever the trial time: a request's trials are read one by one on the worker. */
export const MAX_BATCH = 1000
/** Batches in flight per worker: one it runs, one waiting behind it. */
export const LANES_PER_WORKER = 2

/** The mean trial time the workers measured, over every trial they reported. */
export class TrialClock {
  private trials = 0
  private ms = 0

  observe(trials: number, ms: number): void {
    this.trials += trials
    this.ms += ms
  }

  /** Undefined until a worker has reported a trial's time. */
  get msPerTrial(): number | undefined {
    return this.trials === 0 ? undefined : this.ms / this.trials
  }
}

/**
 * How many of the `remaining` trials the next batch of one of `lanes` lanes takes: one while the
 * trial time is unknown (its answer tells it), else about a second's worth, bounded by an even
 * share of what is left (a worker has two lanes, so it holds at most two shares when the others
 * run out), but never less than `MIN_BATCH_WORK_MS` of work while that much is left.
 */
export const batchSize = (msPerTrial: number | undefined, remaining: number, lanes: number): number => {
  if (remaining <= 0) return 0
  if (msPerTrial === undefined) return 1
  const perTrial = Math.max(msPerTrial, 1e-3)
  const aSecond = Math.floor(BATCH_WORK_MS / perTrial)
  const least = Math.ceil(MIN_BATCH_WORK_MS / perTrial)
  const share = Math.ceil(remaining / Math.max(1, lanes))
  return Math.max(1, Math.min(Math.max(Math.min(aSecond, share), least), MAX_BATCH, remaining))
}

/** The lanes of one run and the worker each was last answered by; lanes are numbered from 0 and never reused once retired. */
export class Lanes {
  private readonly workerOf = new Map<number, string>()
  private readonly retired = new Set<number>()
  private opened = 0

  constructor(private readonly perWorker = LANES_PER_WORKER) {}

  /** Bounds the probes of a run whose lanes keep landing on the same workers. */
  private cap(live: number): number {
    return 8 * this.perWorker * Math.max(1, live)
  }

  private open(count: number, live: number): Array<number> {
    const lanes: Array<number> = []
    while (lanes.length < count && this.opened < this.cap(live)) lanes.push(this.opened++)
    return lanes
  }

  /**
   * The lanes a batch of trials starts on with `live` workers registered: the known ones, at most
   * `perWorker` to a worker (the lowest numbered; the rest are retired), and probes for the workers
   * not yet reached. A worker holding more lanes than the others would be sent more batches at once
   * and finish last while the others wait.
   */
  start(live: number): Array<number> {
    const held = new Map<string, number>()
    const known: Array<number> = []
    for (const [lane, worker] of [...this.workerOf].sort(([a], [b]) => a - b)) {
      if (this.retired.has(lane)) continue
      const count = held.get(worker) ?? 0
      if (count >= this.perWorker) {
        this.retired.add(lane)
        continue
      }
      held.set(worker, count + 1)
      known.push(lane)
    }
    if (known.length === 0) return this.open(this.perWorker * Math.max(1, live), live)
    return [...known, ...this.topUp(new Set(known), live)]
  }

  /**
   * Records that `lane` was answered by `worker`; false when the lane is to stop: its worker
   * already holds `perWorker` lanes of lower number, whether or not they have a batch out now (a
   * lane idle at the end of one batch of trials starts the next).
   */
  answered(lane: number, worker: string): boolean {
    this.workerOf.set(lane, worker)
    let before = 0
    for (const [other, holder] of this.workerOf) if (other < lane && holder === worker && !this.retired.has(other)) before++
    if (before < this.perWorker) return true
    this.retired.add(lane)
    return false
  }

  /** New lanes to open beside the `active` ones: probes while a live worker may lack its lanes, none while a probe is unanswered. */
  topUp(active: ReadonlySet<number>, live: number): Array<number> {
    const lanesOf = new Map<string, number>()
    for (const lane of active) {
      const worker = this.workerOf.get(lane)
      if (worker === undefined) return []
      lanesOf.set(worker, (lanesOf.get(worker) ?? 0) + 1)
    }
    const missingWorkers = Math.max(0, live - lanesOf.size)
    const short = [...lanesOf.values()].filter((n) => n < this.perWorker).length
    return missingWorkers > 0 || short > 0 ? this.open(Math.max(missingWorkers * this.perWorker, 1), live) : []
  }
}
