/**
 * The container tier's files run two at a time, and each starts by building the image: built
 * here once before any file starts, their builds are layer-cache hits instead of two full builds
 * racing for the same two cores.
 */
import { buildImage, unavailable } from "./compose.js"

export default async function setup(): Promise<void> {
  if (unavailable === undefined) await buildImage()
}
