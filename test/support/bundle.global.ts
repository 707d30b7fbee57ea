/**
 * The slow tier's files start daemons at once, and a start builds the bundle of the sources when
 * they changed since the last build: built here once, before any file starts, every start finds
 * it. Otherwise the first starts each build it, racing for the same two cores, and a crash loop's
 * start that builds can outlast the 3-10 s before its kill.
 */
import { freshBundle } from "../../bin/bundle.js"
import { ROOT } from "./daemon.js"

export default async function setup(): Promise<void> {
  await freshBundle(ROOT)
}
