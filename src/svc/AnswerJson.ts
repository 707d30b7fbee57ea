/**
 * Answers read to exactly what `Json.parse` gives (every number a LosslessNumber
 * holding its token), natively when that is exact.
 *
 * Native JSON.parse is several times faster than any parser written in
 * JavaScript, but reads numbers as doubles. When JSON.stringify writes the parsed
 * value back as exactly the same text, every number token in it was the shortest
 * form of its double, so the token is that double's String() and nothing was
 * lost. That holds for compact answers such as svc-venue writes. Anything else
 * (whitespace, exponents, trailing zeros, digits a double cannot hold, escapes
 * written differently, duplicate keys) is read by `Json.parse`.
 */
import { LosslessNumber, parse } from "../domain/Json.js"

/** JSON.parse's value of `text` when it reads the text exactly, else undefined (JSON.parse never gives undefined). */
export const parseNatively = (text: string): unknown => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  return JSON.stringify(value) === text ? value : undefined
}

/** The LosslessNumber of a number `parseNatively` read, or its value with every number inside so replaced. */
export const exact = (value: unknown): unknown => {
  if (typeof value === "number") return new LosslessNumber(String(value))
  if (typeof value === "object" && value !== null) exactNumbersIn(value)
  return value
}

const exactNumbersIn = (container: object): void => {
  if (Array.isArray(container)) {
    for (let index = 0; index < container.length; index++) {
      const value: unknown = container[index]
      if (typeof value === "number" || (typeof value === "object" && value !== null)) container[index] = exact(value)
    }
    return
  }
  const record = container as Record<string, unknown>
  for (const key in record) {
    const value = record[key]
    if (typeof value === "number" || (typeof value === "object" && value !== null)) record[key] = exact(value)
  }
}

/**
 * The deepest nesting of arrays and objects an answer may have. The Dialect's answers nest
 * three levels (`{"fills": [{...}]}`, `{"steps": [[...]]}`); the rest is room for fields an
 * exchange adds. What reads an answer after JSON.parse (the exactness check, lossless-json,
 * the decoders and their error messages) recurses once a level, and a few thousand levels
 * exhaust the stack, so deeper text is refused before any of it runs.
 */
export const MAX_ANSWER_DEPTH = 64

const QUOTE = 34
const BACKSLASH = 92
const OPEN_ARRAY = 91
const CLOSE_ARRAY = 93
const OPEN_OBJECT = 123
const CLOSE_OBJECT = 125

/** Whether JSON text opens more than `levels` arrays and objects inside one another (brackets inside strings aside). */
export const nestedDeeperThan = (text: string, levels: number): boolean => {
  // Each level takes two characters at least.
  if (text.length <= 2 * levels) return false
  let depth = 0
  for (let at = 0; at < text.length; at++) {
    const c = text.charCodeAt(at)
    if (c === QUOTE) {
      for (at++; at < text.length; at++) {
        const inside = text.charCodeAt(at)
        if (inside === BACKSLASH) at++
        else if (inside === QUOTE) break
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > levels) return true
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--
  }
  return false
}

/** Parses an answer to what `Json.parse` gives; throws InvalidJson as it does. */
export const parseAnswer = (text: string): unknown => {
  const value = parseNatively(text)
  return value === undefined ? parse(text) : exact(value)
}
