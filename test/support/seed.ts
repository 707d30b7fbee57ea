/**
 * Seeded randomness for chaos runs: every run prints its seed, and `CHAOS_SEED=<seed>`
 * repeats a failing one.
 */

/** The run's seed: `CHAOS_SEED` when set, else one taken from the clock. */
export const chaosSeed = (): number => Number(process.env.CHAOS_SEED ?? Date.now() % 100_000)

/** A small linear congruential generator: numbers in [0, 1), the same sequence for the same seed. */
export const seededRandom = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    return state / 2 ** 32
  }
}

/**
 * The seed of one item of a run, such as the n-th answer of an endpoint: the same run seed and
 * name always give the same one, whatever else happened in the run, and names that differ in
 * one character give unrelated ones (FNV-1a over both, spread by murmur3's finalizer), which
 * consecutive seeds of the generator above would not be.
 */
export const seedFor = (seed: number, name: string): number => {
  let hash = 0x811c9dc5
  for (const c of `${seed}/${name}`) hash = Math.imul(hash ^ c.charCodeAt(0), 0x01000193)
  hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b)
  hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35)
  return (hash ^ (hash >>> 16)) >>> 0
}
