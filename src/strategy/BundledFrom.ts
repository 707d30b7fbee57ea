/**
 * The checkout a bundle of svcbot was built from, or undefined when svcbot runs from its sources
 * (tsx) or compiled (the image). bin/bundle.js gives this module that value in the bundle, where
 * each module's own location is a mirror of its source's and no longer the file a user reads.
 */
export const BUNDLED_FROM: string | undefined = undefined
