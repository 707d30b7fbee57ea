/**
 * Bisection over anything kept in order. `below(index)` must hold for a leading run of the indices
 * in [0, count) and for none after it (a sorted array asked "is this element below the target?");
 * the answer is the first index where it does not hold, or `count` when it holds for all.
 */
export const firstNotBelow = (count: number, below: (index: number) => boolean): number => {
  let low = 0
  let high = count
  while (low < high) {
    const mid = (low + high) >>> 1
    if (below(mid)) low = mid + 1
    else high = mid
  }
  return low
}
