/**
 * Places in a sequence: work that may run side by side but must end in the order it began.
 * The sender marks groups of placements one after the other, each in its own commit, and
 * syncs each to disk on libuv's thread pool; two syncs can be in flight (a second submit
 * while the first group syncs), and the later one may end first. Each group takes a place
 * when it is marked and hands its placements to the senders only at its turn, so an
 * instance's placements go out in the order they were journaled whichever sync ends first.
 */
import { Deferred, Effect, Exit, FiberId } from "effect"

export interface Place {
  /** Waits until every place taken before this one has been released. */
  readonly turn: Effect.Effect<void>
  /** Releases this place; the next one's turn comes once this one's has. Idempotent. */
  readonly release: Effect.Effect<void>
}

export const makeSequence = (): { readonly take: () => Place } => {
  let last: Deferred.Deferred<void> | undefined
  return {
    take: () => {
      const before = last
      const mine = Deferred.unsafeMake<void>(FiberId.none)
      last = mine
      // A place released before its turn came still ends after the ones before it.
      const release = Effect.asVoid(Deferred.done(mine, Exit.void))
      return {
        turn: before === undefined ? Effect.void : Deferred.await(before),
        release: before === undefined ? release : Effect.zipRight(Deferred.await(before), release)
      }
    }
  }
}
