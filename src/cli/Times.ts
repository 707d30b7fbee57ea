/** Points in time as the commands take them on their command lines. */
import { Either } from "effect"
import { type CliError, usageError } from "./errors.js"

/** `--from`/`--to`/`--since`: epoch milliseconds or an ISO date such as 2024-03-01 or 2024-03-01T12:00:00Z. */
export const parseTime = (text: string, flag: string): Either.Either<number, CliError> => {
  if (/^\d+$/.test(text)) return Either.right(Number(text))
  const ms = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/.test(text) ? Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text) : Number.NaN
  return Number.isNaN(ms)
    ? Either.left(usageError(`${flag} must be epoch milliseconds or a UTC date such as 2024-03-01 or 2024-03-01T12:00:00Z, got "${text}"`))
    : Either.right(ms)
}
