import { tierConfig } from "./test/support/tiers.js"

// Pure units and strategies: CPU work, one worker per core.
export default tierConfig("fast", 2)
