import { SLOW_LONGEST_FIRST, tierConfig } from "./test/support/tiers.js"

// Whole daemons and the chaos suite: mostly waiting on candles, polls, kills and restarts, so four
// files at a time on two cores; a daemon's start costs about a second of CPU (the bundle, built
// once before the files start). The files that take minutes start first.
export default tierConfig("slow", {
  maxWorkers: 4,
  isolate: true,
  longestFirst: SLOW_LONGEST_FIRST,
  globalSetup: ["test/support/bundle.global.ts"]
})
