/**
 * Writing an optimisation's winner into a daemon config as a new strategy
 * instance. The file is edited as text: the new instance is inserted at the end
 * of the top-level `strategies` list, and every other byte of the file stays as
 * it was (layout, key order, number spelling). The result must still
 * be a valid config, and an instance id already there is never overwritten.
 */
import { Data, Either } from "effect"
import { parseConfig } from "../config/Load.js"
import { parse, stringify } from "../domain/Json.js"
import { isObject } from "./Space.js"

export class InstanceRefused extends Data.TaggedError("InstanceRefused")<{ readonly message: string }> {}

/** The index just past the string starting at `start` (a double quote). */
const pastString = (text: string, start: number): number => {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === "\\") i++
    else if (text[i] === '"') return i + 1
  }
  return text.length
}

/** The index of the bracket closing the one at `open`. */
const closing = (text: string, open: number): number => {
  let depth = 0
  for (let i = open; i < text.length; i++) {
    const c = text[i]
    if (c === '"') i = pastString(text, i) - 1
    else if (c === "[" || c === "{") depth++
    else if (c === "]" || c === "}") {
      if (--depth === 0) return i
    }
  }
  return -1
}

const skipSpace = (text: string, i: number): number => {
  while (i < text.length && /\s/.test(text[i]!)) i++
  return i
}

/** Where the top-level `strategies` array opens, or -1 when the object has no such key. */
const strategiesArrayAt = (text: string, objectOpen: number): number => {
  let depth = 0
  for (let i = objectOpen; i < text.length; i++) {
    const c = text[i]
    if (c === '"') {
      const end = pastString(text, i)
      if (depth === 1) {
        const after = skipSpace(text, end)
        if (text[after] === ":" && JSON.parse(text.slice(i, end)) === "strategies") {
          const value = skipSpace(text, after + 1)
          return text[value] === "[" ? value : -1
        }
      }
      i = end - 1
    } else if (c === "[" || c === "{") depth++
    else if (c === "]" || c === "}") depth--
  }
  return -1
}

const indentOfLine = (text: string, at: number): string => {
  const lineStart = text.lastIndexOf("\n", at) + 1
  return /^[ \t]*/.exec(text.slice(lineStart))![0]
}

/**
 * The config text with `instance` (already holding its id) appended to `strategies`; refused
 * when the id is taken, the file is not a JSON object, or the result would not be a valid config.
 */
export const insertInstance = (text: string, source: string, instance: Readonly<Record<string, unknown>>): Either.Either<string, InstanceRefused> => {
  let raw: unknown
  try {
    raw = parse(text)
  } catch (error) {
    return Either.left(new InstanceRefused({ message: `${source} is not JSON (${error instanceof Error ? error.message : String(error)}); fix it before writing an instance into it` }))
  }
  if (!isObject(raw)) return Either.left(new InstanceRefused({ message: `${source} must hold a JSON object to take a strategy instance` }))
  const existing = Array.isArray(raw.strategies) ? raw.strategies : []
  const ids = existing.flatMap((entry) => (isObject(entry) && typeof entry.id === "string" ? [entry.id] : []))
  if (ids.includes(String(instance.id))) {
    return Either.left(new InstanceRefused({ message: `${source} already has a strategy instance "${String(instance.id)}"; choose a new id for --write-instance (taken: ${ids.join(", ")})` }))
  }
  const objectOpen = text.indexOf("{")
  const arrayOpen = strategiesArrayAt(text, objectOpen)
  const entry = stringify(instance)
  let updated: string
  if (arrayOpen >= 0) {
    const arrayClose = closing(text, arrayOpen)
    const lastContent = text.slice(0, arrayClose).trimEnd().length
    const empty = lastContent === arrayOpen + 1
    const outer = indentOfLine(text, arrayOpen)
    // The last instance's closing line is indented as the instances are, one line or pretty-printed.
    const inner = empty ? `${outer}  ` : indentOfLine(text, lastContent - 1)
    updated = empty
      ? `${text.slice(0, arrayOpen + 1)}\n${inner}${entry}\n${outer}${text.slice(arrayClose)}`
      : `${text.slice(0, lastContent)},\n${inner}${entry}${text.slice(lastContent)}`
  } else {
    const objectClose = closing(text, objectOpen)
    const lastContent = text.slice(0, objectClose).trimEnd().length
    const separator = lastContent === objectOpen + 1 ? "" : ","
    updated = `${text.slice(0, lastContent)}${separator}\n  "strategies": [\n    ${entry}\n  ]\n${text.slice(objectClose)}`
  }
  const check = parseConfig(JSON.parse(updated) as unknown, source)
  if (Either.isLeft(check)) {
    return Either.left(new InstanceRefused({ message: `the instance would leave ${source} invalid, so nothing was written:\n${check.left.problems.map((p) => `  - ${p}`).join("\n")}` }))
  }
  return Either.right(updated)
}
