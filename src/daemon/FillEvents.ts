/** A fill of the ledger as the strategy that owns its order sees it. */
import type { LedgerFill } from "../store/FillLedger.js"
import type { FillEvent } from "../strategy/Strategy.js"

export const fillEventOf = (fill: LedgerFill, tag: string): FillEvent => ({
  tag,
  fillId: fill.fillId,
  side: fill.side === "sell" ? "sell" : "buy",
  price: fill.price,
  baseQty: fill.baseQty,
  quoteQty: fill.quoteQty,
  fee: fill.fee,
  feeAsset: fill.feeAsset,
  liquidity: fill.liquidity === "maker" ? "maker" : "taker",
  time: fill.time
})
