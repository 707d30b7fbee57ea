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
