import { tierConfig } from "./test/support/tiers.js"

// Pure units and strategies: CPU work, one worker per core, the modules imported once per worker.
export default tierConfig("fast", { maxWorkers: 2, isolate: false })
