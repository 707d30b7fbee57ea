/** A bench's sizes, taken from the environment so that a run can be made shorter or longer. */

/** `process.env[name]` as a whole number from `min` to `max`, else `fallback` when unset; anything else stops the bench naming the variable. */
export const wholeNumber = (name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new Error(`${name} must be a whole number from ${min} to ${max}, got ${process.env[name]}`)
  return value
}
