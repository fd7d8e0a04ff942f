/**
 * The reentrant lock's one attempt that never waits, apart from the lock class: code that never
 * waits (the cron guard) bundles neither the wait loop nor the wake-ups this way. Internal.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { checkName, checkOptions } from "../../validate.js";
import {
  type AcquireResult,
  acquireOnce,
  holdSettings,
  LEASE_OPTION_KEYS,
  type LeaseOptions,
} from "../protocol.js";
import { LockHolds } from "./hold.js";

/**
 * `getLock(client, name).tryAcquire(options)` with `waitTime` 0: one attempt (Redisson
 * RedissonLock#tryLockInnerAsync), same validation, requests, events and errors.
 * @throws TypeError / RangeError for a bad name or option, before any request.
 * @throws {TransportError} when Redis could not be reached.
 */
export function tryLockOnce(
  client: EdgeLockClient,
  name: string,
  options?: LeaseOptions,
): Promise<AcquireResult> {
  const ctx = contextOf(client);
  const holds = new LockHolds(ctx, checkName(name));
  const o = checkOptions(options, "tryLock", LEASE_OPTION_KEYS);
  return acquireOnce(ctx, holds, holdSettings(ctx, o));
}
