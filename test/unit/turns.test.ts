/**
 * Taking work in turns, held over any sequence of pushes and takes: it takes what the obvious
 * model takes (of the owners with work, the one whose turn came longest ago goes next, one
 * that never had a turn first), each owner's items in the order they came, and no owner
 * waits while another is served twice.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Turns } from "../../src/engine/Turns.js"

type Op = { readonly _tag: "push"; readonly owner: string } | { readonly _tag: "take"; readonly n: number }

const arbOps: fc.Arbitrary<ReadonlyArray<Op>> = fc.array(
  fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom("a", "b", "c", "d", "e").map((owner): Op => ({ _tag: "push", owner })) },
    { weight: 2, arbitrary: fc.integer({ min: 1, max: 4 }).map((n): Op => ({ _tag: "take", n })) }
  ),
  { maxLength: 120 }
)

interface Item {
  readonly owner: string
  readonly seq: number
}

/**
 * The obvious, slow model: a log of turns; of the owners with work, the one whose last turn is
 * earliest in the log goes next, owners without a turn in the log first, by their first item.
 */
const model = () => {
  const waiting: Array<Item> = []
  const turns: Array<string> = []
  const firstSeen: Array<string> = []
  const rank = (owner: string): number => {
    const last = turns.lastIndexOf(owner)
    return last === -1 ? firstSeen.indexOf(owner) - 1_000_000 : last
  }
  return {
    push: (item: Item) => {
      if (!firstSeen.includes(item.owner)) firstSeen.push(item.owner)
      waiting.push(item)
    },
    take: (): Item | undefined => {
      if (waiting.length === 0) return undefined
      const next = [...new Set(waiting.map((w) => w.owner))].reduce((a, b) => (rank(b) < rank(a) ? b : a))
      turns.push(next)
      return waiting.splice(waiting.findIndex((w) => w.owner === next), 1)[0]!
    }
  }
}

/** Runs the ops on a Turns and the model; every take of each, in order. */
const run = (ops: ReadonlyArray<Op>) => {
  const turns = new Turns<string, Item>()
  const reference = model()
  const taken: Array<Item> = []
  const expected: Array<Item> = []
  let seq = 0
  for (const op of ops) {
    if (op._tag === "push") {
      const item = { owner: op.owner, seq: seq++ }
      turns.push(op.owner, item)
      reference.push(item)
    } else {
      taken.push(...turns.takeUpTo(op.n))
      for (let i = 0; i < op.n; i++) {
        const item = reference.take()
        if (item !== undefined) expected.push(item)
      }
    }
  }
  return { turns, taken, expected, pushed: seq }
}

describe("Turns", () => {
  it("takes one item of each owner in turn, owners in the order they began to wait", () => {
    const turns = new Turns<string, string>()
    for (const item of ["a1", "a2", "a3", "a4", "b1", "b2", "c1"]) turns.push(item[0]!, item)
    expect(turns.takeAll()).toEqual(["a1", "b1", "c1", "a2", "b2", "a3", "a4"])
    expect(turns.size).toBe(0)
    expect(turns.take()).toBeUndefined()
  })

  it("serves an owner that never had a turn before the owners that had one", () => {
    const turns = new Turns<string, string>()
    for (const item of ["a1", "a2", "a3", "b1", "b2"]) turns.push(item[0]!, item)
    expect(turns.takeUpTo(2)).toEqual(["a1", "b1"])
    turns.push("c", "c1")
    expect(turns.takeAll()).toEqual(["c1", "a2", "b2", "a3"])
  })

  it("serves an owner that begins to wait again before the owners served since its last turn", () => {
    const turns = new Turns<string, string>()
    for (const item of ["a1", "b1", "b2", "b3", "c1", "c2", "c3"]) turns.push(item[0]!, item)
    expect(turns.takeUpTo(4)).toEqual(["a1", "b1", "c1", "b2"])
    turns.push("a", "a2")
    expect(turns.takeAll()).toEqual(["a2", "c2", "b3", "c3"])
  })

  it("takes what the model takes, over any pushes and takes", () => {
    fc.assert(
      fc.property(arbOps, (ops) => {
        const { taken, expected } = run(ops)
        expect(taken).toEqual(expected)
      })
    )
  })

  it("keeps each owner's items in order, loses none and takes none twice", () => {
    fc.assert(
      fc.property(arbOps, (ops) => {
        const { turns, taken, pushed } = run(ops)
        const all = [...taken, ...turns.takeAll()]
        expect(all.map((i) => i.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: pushed }, (_, i) => i))
        for (const owner of new Set(all.map((i) => i.owner))) {
          const seqs = all.filter((i) => i.owner === owner).map((i) => i.seq)
          expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
        }
      })
    )
  })

  it("serves no owner twice while another waits", () => {
    fc.assert(
      fc.property(arbOps, (ops) => {
        const turns = new Turns<string, Item>()
        /** Per owner waiting: the owners served since it began to wait or was last served. */
        const servedSince = new Map<string, Set<string>>()
        const left = new Map<string, number>()
        let seq = 0
        for (const op of ops) {
          if (op._tag === "push") {
            if (!servedSince.has(op.owner)) servedSince.set(op.owner, new Set())
            left.set(op.owner, (left.get(op.owner) ?? 0) + 1)
            turns.push(op.owner, { owner: op.owner, seq: seq++ })
            continue
          }
          for (const item of turns.takeUpTo(op.n)) {
            for (const [owner, served] of servedSince) {
              if (owner === item.owner) continue
              expect(served.has(item.owner), `${item.owner} served twice while ${owner} waited`).toBe(false)
              served.add(item.owner)
            }
            left.set(item.owner, left.get(item.owner)! - 1)
            // An owner with nothing left waits no more.
            if (left.get(item.owner) === 0) servedSince.delete(item.owner)
            else servedSince.set(item.owner, new Set())
          }
        }
      })
    )
  })
})

