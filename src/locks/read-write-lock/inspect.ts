/**
 * What inspecting a read-write lock reports.
 * @module
 */
import type { Inspection } from "../../inspect.js";
import type { LockHolder } from "../lock/inspect.js";

/** One holder of a read-write lock: the reentrant holder plus the side it holds. */
export interface ReadWriteLockHolder extends LockHolder {
  /** `"read"` or `"write"`; a writer that also took the read lock appears once per side. */
  side: "read" | "write";
}

/**
 * What `readWriteLock.inspect()` (or either side's) reports, e.g.
 * `{ kind: "read-write-lock", name, locked: true, ttl: 9_870, mode: "read", holders: [{ owner,
 * holdCount: 1, side: "read" }, ...] }`. Readers whose holds all lapsed still appear until a
 * release or a writer's attempt clears them.
 */
export interface ReadWriteLockInspection extends Inspection {
  kind: "read-write-lock";
  /** True when the lock's key exists. */
  locked: boolean;
  /** `"write"` while a writer holds it, `"read"` while only readers do, `null` when free. */
  mode: "read" | "write" | null;
  holders: ReadWriteLockHolder[];
}
