/** A throwaway certificate for 127.0.0.1, made by openssl, for tests of svc-venue over HTTPS. */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface SelfSigned {
  readonly dir: string
  /** For NODE_EXTRA_CA_CERTS of a child that must trust it. */
  readonly certPath: string
  readonly cert: string
  readonly key: string
}

/** `subjectAltName` in openssl's form; a container test adds the compose service's name (`DNS:venue`). */
export const selfSigned = (prefix: string, subjectAltName = "IP:127.0.0.1"): SelfSigned => {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`))
  const certPath = join(dir, "cert.pem")
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
    "-addext", `subjectAltName=${subjectAltName}`, "-keyout", join(dir, "key.pem"), "-out", certPath
  ], { stdio: "ignore" })
  return { dir, certPath, cert: readFileSync(certPath, "utf8"), key: readFileSync(join(dir, "key.pem"), "utf8") }
}
