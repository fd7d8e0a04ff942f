/**
 * A lease over several member leases, each on its own lock (and possibly its own Redis): what a
 * MultiLock or a RedLock grants. Renewing it renews the members; releasing it releases every
 * member, reporting each one's outcome instead of stopping at the first failure.
 * @module
 */

import { randomHex } from "../../ids.js";
import { Lease, type LeaseHost, type ReleaseResult } from "../../lease/lease.js";

/** What releasing one member found: its result, or the error its release failed with. */
export type MemberRelease =
  | { name: string; result: ReleaseResult }
  | { name: string; error: unknown };

/** What a composite lease starts from. Internal. */
export interface CompositeInit {
  kind: "multi-lock" | "redlock";
  owner: string;
  leaseTime: number;
  watchdog: boolean;
  expiresAt: number;
  /**
   * Both clocks when what set `expiresAt` began (a RedLock's round), when `expiresAt` is
   * measured from then: a wall-clock step while the round ran is then seen too (LeaseInit.sent).
   */
  sent?: { wall: number; mono: number };
  /** The members it holds (a RedLock's: those that granted). */
  members: readonly Lease[];
  /**
   * Members granted after the decision (a RedLock's late votes): they join the lease once every
   * endpoint has voted (at most its `endpointTimeout` later), and a release waits for them, so
   * none is left behind.
   */
  late?: Promise<readonly Lease[]>;
  /** Renews the members: see `LeaseHost.renew`. */
  renew: LeaseHost["renew"];
  lost(lease: Lease): void;
  backgroundError: LeaseHost["backgroundError"];
  /**
   * Told what the members' release came to (when each member answered), so that the composite
   * hold its acquire reported is reported as released too. A RedLock reports no acquire.
   */
  released?: (result: ReleaseResult, durationMs: number) => void;
}

/**
 * A lease on several locks at once. `name` joins the members' names with `+`; `expiresAt` is
 * the earliest member's (a RedLock's: its validity); `signal` aborts when it is found lost.
 * `release()` releases every member (in parallel) and answers `"released"` when each one was,
 * else the first other answer; `releaseAll()` gives each member's outcome. It cannot be
 * serialized: serialize its `members` instead.
 */
export class CompositeLease extends Lease {
  readonly #members: Lease[];
  readonly #outcomes: { value: MemberRelease[] | undefined };

  /** Internal: composite leases come from MultiLock and RedLock. */
  constructor(init: CompositeInit) {
    const outcomes: { value: MemberRelease[] | undefined } = { value: undefined };
    const members = [...init.members];
    const late = init.late?.then((more) => void members.push(...more)) ?? Promise.resolve();
    super({
      host: {
        kind: init.kind,
        renew: init.renew,
        release: async () => {
          const started = Date.now();
          await late;
          const settled = await Promise.allSettled(members.map((m) => m.release()));
          outcomes.value = settled.map((s, i) => {
            const name = members[i]?.name ?? "";
            return s.status === "fulfilled" ? { name, result: s.value } : { name, error: s.reason };
          });
          const failed = settled.find((s) => s.status === "rejected");
          // Each member's release is retried safely: a second call returns its first answer.
          if (failed) throw failed.reason;
          const results = settled.map((s) => (s.status === "fulfilled" ? s.value : "released"));
          const result = results.find((r) => r !== "released") ?? "released";
          init.released?.(result, Date.now() - started);
          return result;
        },
        lost: init.lost,
        backgroundError: init.backgroundError,
      },
      name: members.map((m) => m.name).join("+"),
      owner: init.owner,
      id: randomHex(),
      epoch: 0,
      leaseTime: init.leaseTime,
      watchdog: init.watchdog,
      expiresAt: init.expiresAt,
      ...(init.sent && { sent: init.sent }),
    });
    this.#members = members;
    this.#outcomes = outcomes;
  }

  /** The member leases: in the order of the locks (a RedLock's late grants last). */
  get members(): readonly Lease[] {
    return Object.freeze([...this.#members]);
  }

  /**
   * Releases every member, like `release()`, and reports each one's outcome; never throws (a
   * member whose release failed reports its error; calling again retries only the release).
   */
  async releaseAll(): Promise<MemberRelease[]> {
    await this.release().catch(() => {});
    return this.#outcomes.value ?? [];
  }

  /** @throws TypeError: a lease on several locks has no serialized form; use its members'. */
  override toJSON(): never {
    throw new TypeError(
      "a MultiLock or RedLock lease cannot be serialized: serialize its `members` instead",
    );
  }
}
