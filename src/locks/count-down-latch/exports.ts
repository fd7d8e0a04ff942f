/**
 * The names of the count-down latch that its entry (`edgelock/count-down-latch`) and the root (`edgelock`) both
 * export: its types. Written once here, re-exported by both.
 * @module
 */
export type {
  CountDownLatch,
  CountDownLatchAwaitOptions,
  CountDownLatchInspection,
  CountDownOptions,
} from "./index.js";
