/**
 * Secrets never reach a log line. Each secret value is registered here when it is
 * loaded (config, venue accounts); the logger scrubs every registered value from
 * each line before it is written, on top of pino's path-based redaction.
 */
/** Every form a registered secret can take in a line, longest first so that no shorter form cuts into a longer one. */
let secretForms: ReadonlyArray<string> = []
/**
 * Whether a line holds any of the forms, in one pass over it: with one search per form, every
 * line's cost would grow with the number of secrets registered (a key per strategy instance, the
 * venue's keys).
 */
let anySecretForm: RegExp | undefined

/** JSON's escaping of a string's characters (`"` and `\` and control characters), without the quotes. */
const jsonEscaped = (text: string): string => JSON.stringify(text).slice(1, -1)

/**
 * The forms a secret takes on its way into a line: as it is; JSON-escaped, as a field's value
 * is written, and twice, as a JSON text inside a field is (an answer's body); and URL-encoded,
 * as a path or query carries it (a form body writes a space as `+`).
 */
const formsOf = (secret: string): ReadonlyArray<string> => {
  return [secret, jsonEscaped(secret), jsonEscaped(jsonEscaped(secret)), encodeURIComponent(secret), new URLSearchParams({ s: secret }).toString().slice(2)]
}

/** Registers a secret so that no log line can carry it. Short values are ignored: they would mask ordinary text. */
export const registerSecret = (value: string): void => {
  if (value.length < 8) return
  secretForms = [...new Set([...secretForms, ...formsOf(value)])].sort((a, b) => b.length - a.length)
  anySecretForm = new RegExp(secretForms.map((form) => form.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"))
}

export const REDACTED = "[REDACTED]"

export const scrub = (line: string): string => {
  if (anySecretForm === undefined || !anySecretForm.test(line)) return line
  let out = line
  for (const form of secretForms) {
    if (out.includes(form)) out = out.split(form).join(REDACTED)
  }
  return out
}

/**
 * Field paths censored wherever they appear in a log object. The logger censors them itself, on a
 * copy of the fields made only where one of them is present (pino's redact option is not used).
 */
export const redactPaths: ReadonlyArray<string> = [
  "secret",
  "apiSecret",
  "signature",
  "*.secret",
  "*.apiSecret",
  "*.signature",
  "headers[\"x-svc-signature\"]",
  "headers[\"X-SVC-SIGNATURE\"]",
  "headers.authorization",
  "headers.Authorization",
  "*.headers[\"x-svc-signature\"]",
  "*.headers[\"X-SVC-SIGNATURE\"]"
]

/** API key ids appear in logs only as their first 12 characters. */
export const maskKeyId = (keyId: string): string => (keyId.length > 12 ? `${keyId.slice(0, 12)}…` : keyId)

const KEY_FIELDS = new Set(["apiKey", "keyId", "x-svc-apikey", "X-SVC-APIKEY"])

/** Masks key ids found in known fields, one level deep and inside `headers`. */
export const maskKeyFields = (object: Record<string, unknown>): Record<string, unknown> => {
  let out = object
  for (const field in object) {
    if (!Object.hasOwn(object, field)) continue
    const value = object[field]
    if (KEY_FIELDS.has(field) && typeof value === "string") {
      out = out === object ? { ...object } : out
      out[field] = maskKeyId(value)
    } else if (field === "headers" && value !== null && typeof value === "object") {
      out = out === object ? { ...object } : out
      out[field] = maskKeyFields(value as Record<string, unknown>)
    }
  }
  return out
}
