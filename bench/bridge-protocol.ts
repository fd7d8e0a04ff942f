/**
 * Messages between the benchmark and its bridge child process (`bench/bridge-process.ts`).
 * @module
 */
import type { BridgeStats } from "../src/bridge/index.js";

/** Parent → child. */
export type BridgeRequest = { type: "stats"; id: number } | { type: "close" };

/** Child → parent. `cpuMicros`: the child's user + system CPU time since it started (µs). */
export type BridgeReply =
  | { type: "ready"; url: string }
  | { type: "stats"; id: number; stats: BridgeStats; cpuMicros: number };
