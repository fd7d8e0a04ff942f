/**
 * The hold protocol of an idempotency key: the reentrant lock's scripts (lua/lock/*.lua) with
 * the completion marker as their optional last key, so a claim finds completed work and a
 * completion is recorded in the same step as the release.
 * @module
 */
import type { ReleaseResult } from "../../lease/lease.js";
import { LockHolds } from "../lock/hold.js";
import { type HoldRef, runRelease } from "../protocol.js";

/** Completion marker of an idempotency key: same hash slot as the name. */
export const doneKey = (name: string) => `edgelock_done:{${name}}`;

/** Hold operations on one idempotency key. Internal to the primitive. */
export class IdempotencyHolds extends LockHolds {
  /** A waiter must see the completion marker, so a release only wakes it (no hand-off). */
  override get handsOff(): boolean {
    return false;
  }

  /** An attempt also checks the marker: a completed key answers `"completed"`. */
  protected override acquireKeys(): string[] {
    return [...super.acquireKeys(), doneKey(this.name)];
  }

  /**
   * Releases one hold like {@link release} and records the completion marker for `ttl` ms in
   * the same request (an existing marker is kept).
   */
  complete(hold: HoldRef, ttl: number): Promise<ReleaseResult> {
    return runRelease(this.ctx, this.releaseCall(hold, { key: doneKey(this.name), ttl }));
  }
}
