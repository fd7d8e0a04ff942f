/**
 * The names of the idempotency key that its entry (`edgelock/idempotency`) and the root (`edgelock`) both
 * export: its types and its limit. Written once here, re-exported by both.
 * @module
 */
export {
  type ClaimOptions,
  type ClaimResult,
  type IdempotencyKey,
  MAX_COMPLETION_TTL_MS,
} from "./index.js";
