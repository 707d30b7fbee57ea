/**
 * A small tmpfs for a database whose disk is made to fail under it: filled up, remounted
 * read-only. Mounting needs root (CI runs as root); where it is refused, the caller skips,
 * saying why.
 */
import { execFileSync } from "node:child_process"
import { closeSync, mkdtempSync, openSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Mounts a tmpfs of `size` (`16m`) on a new folder; `unmount` is the caller's to run. */
export const mountTmpfs = (size: string): { readonly path: string; readonly unmount: () => void } | { readonly refused: string } => {
  const path = mkdtempSync(join(tmpdir(), "svcbot-storage-"))
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", path], { stdio: "pipe" })
  } catch (error) {
    return { refused: `mounting a tmpfs is refused here: ${String((error as { stderr?: unknown }).stderr ?? error).trim()}` }
  }
  return { path, unmount: () => void execFileSync("umount", ["-l", path], { stdio: "pipe" }) }
}

/** Remounts it with `options` (`ro`, `rw`, `size=64m`). */
export const remount = (path: string, options: string): void => void execFileSync("mount", ["-o", `remount,${options}`, path], { stdio: "pipe" })

/** Writes a file until the volume has no room left: what trading would have done a little later. */
export const fillUp = (path: string): void => {
  const fd = openSync(path, "w")
  const chunk = Buffer.alloc(64 * 1024, 0x5a)
  try {
    for (;;) writeSync(fd, chunk)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error
  } finally {
    closeSync(fd)
  }
}
