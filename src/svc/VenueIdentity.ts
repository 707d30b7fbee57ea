/**
 * How svc-venue names itself on every answer, so that a bot can tell a paper
 * venue from a real exchange before it sends a single signed request: paper
 * trading refuses anything else, live trading refuses svc-venue unless the run is
 * declared a staging run.
 */
export const VENUE_IMPLEMENTATION_HEADER = "x-venue-implementation"
export const VENUE_NAME = "svc-venue"
export const VENUE_VERSION = "0.1.0"
export const VENUE_IMPLEMENTATION = `${VENUE_NAME}/${VENUE_VERSION}`

/** Whether a header value names svc-venue (any version). */
export const isSvcVenue = (header: string | undefined): boolean => header !== undefined && header.startsWith(`${VENUE_NAME}/`)

/**
 * svc-venue's public record of the price steps its matching saw (an svc-venue extension, not
 * part of the exchange's API): `?symbol=S&after=SEQ&limit=N` answers
 * `{ symbol, epoch, oldestSeq, steps: [[seq, timeMs, "price"], …] }`; `epoch` changes when the
 * venue restarts, and its steps are numbered from 1 again.
 */
export const VENUE_STEPS_PATH = "/api/_venue/steps"
