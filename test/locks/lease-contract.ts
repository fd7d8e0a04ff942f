/**
 * The lease contract: what every lease keeps, whichever kind issued it, run by
 * lease-contract.test.ts with `describeLeaseContract(kind, traits, setup)` for each kind:
 * - a hold excludes a rival until released;
 * - a release (and a late cancel, for kinds with their own) carrying an old epoch never touches
 *   a newer hold of the same owner;
 * - `signal` aborts within 50 ms after `expiresAt` when no renewal confirmed, never before: the
 *   least late of three leases whose expiries lie 200 ms apart (so that one stall of a loaded
 *   machine's event loop cannot delay them all), each of them under 500 ms late and none early;
 * - `expiresAt` counts from the send and never passes Redis's expiry (acquire and renewal under
 *   300 ms of latency);
 * - a renewal never shortens, in Redis or in `expiresAt`;
 * - a grant whose answer was lost and which the client resent returns what it granted (epoch,
 *   token, permit ids) and holds once.
 * Real parts only: independent redis-servers behind their own bridges
 * (test/support/endpoints.ts), whose faults and latency the contract sets, and raw clients that
 * read what Redis holds behind the bridges' back.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Bridge } from "../../src/bridge/index.js";
import { type Lease, LeaseLostError } from "../../src/index.js";
import { keyPrefix } from "../support/env.js";
import { aborted, abortTime } from "../support/locks.js";

/** What a lease claims, or what Redis holds for it, in comparable terms (see `grant`). */
export type Grant = Record<string, unknown>;

/** What the contract needs of a kind, for one name. */
export interface LeaseUnderContract {
  /** The bridges this kind's requests go through (the contract sets faults and latency). */
  bridges: readonly Bridge[];
  /** The bridge whose answer the replay step loses (a member's, for kinds over several). */
  replayBridge: Bridge;
  /** One acquire attempt (no wait, no keep-alive): the lease, or null when excluded. */
  acquire(options: {
    leaseTime: number;
    owner?: string;
    signal?: AbortSignal;
  }): Promise<Lease | null>;
  /** An acquire by another party that the hold excludes (leases of 10 s). */
  rival(): Promise<Lease | null>;
  /** Ms Redis still keeps `lease`'s hold, read behind the bridge's back; ≤ 0 once gone. */
  remaining(lease: Lease): Promise<number>;
  /** What `lease` claims and what Redis holds for it (hold counts included): equal when true. */
  grant(lease: Lease): Promise<{ claimed: Grant; stored: Grant }>;
  /** Whether Redis shows any hold of the name (of any owner, any member). */
  anyHold(): Promise<boolean>;
  /** Background work of the kind's clients (cancels of unanswered acquires). */
  background: Promise<unknown>[];
}

/**
 * Most lateness accepted of `signal` after `expiresAt`, in ms, for the least late of the leases
 * timed: the expiry timer fires at `expiresAt`, so only the event loop can make it later.
 */
const EXPIRY_SLACK_MS = 50;
/** Most lateness accepted of every lease timed, in ms (a stall of a loaded 2-core machine). */
const EXPIRY_BOUND_MS = 500;
/**
 * Lease times of the independent leases whose expiry is timed, in ms: acquired together, they
 * expire 200 ms apart, so a stall that delays one leaves the others on time.
 */
const EXPIRY_LEASE_TIMES = [300, 500, 700];
/** Latency added at every bridge in the timing steps, in ms. */
const LATENCY_MS = 300;
/**
 * Most time a call spends before its request leaves (validation, a script's first hash), in
 * ms: far less than the latency an answer-based `expiresAt` would add.
 */
const SEND_SLACK_MS = 50;

function held<T extends Lease>(lease: T | null): T {
  if (!lease) throw new Error("not acquired");
  return lease;
}

/** What a kind can be asked to do at all. */
export interface LeaseKindTraits {
  /**
   * `"own"`: an unanswered acquire sends the kind's own cancel, and the late-cancel step runs.
   * `"members"`: a kind over several locks (MultiLock, RedLock), whose cancels are its member
   * locks' own, which those kinds' runs of the contract cover; the step is not declared.
   */
  cancel: "own" | "members";
}

/** Runs the lease contract for one kind; `setup` gives that kind's parts for a name. */
export function describeLeaseContract(
  kind: string,
  traits: LeaseKindTraits,
  setup: (name: string) => Promise<LeaseUnderContract>,
): void {
  describe(`lease contract: ${kind}`, () => {
    const prefix = keyPrefix();
    const made: LeaseUnderContract[] = [];
    const open = async (name: string) => {
      const parts = await setup(`${prefix}${name}`);
      made.push(parts);
      return parts;
    };
    afterEach(async () => {
      for (const parts of made) for (const bridge of parts.bridges) bridge.clearFaults();
      await Promise.allSettled(made.flatMap((parts) => parts.background.splice(0)));
      made.length = 0;
    });
    /**
     * Loads the kind's scripts into Redis before the parts under test are made, so that their
     * first calls are EVALSHA (a client that met NOSCRIPT sends its other scripts with EVAL) and
     * a fault on EVALSHA hits the call under test.
     */
    const warm = async () => {
      const warmUp = await open("warm");
      await held(await warmUp.acquire({ leaseTime: 1_000 })).release();
    };

    it("excludes a rival while held; the rival gets in after the release", async () => {
      const parts = await open("exclusion");
      const lease = held(await parts.acquire({ leaseTime: 10_000 }));
      expect(await parts.rival()).toBeNull();
      expect(await lease.release()).toBe("released");
      const rival = held(await parts.rival());
      expect(await rival.release()).toBe("released");
    });

    it("releasing a lease whose hold expired answers expired and leaves the owner's newer hold alone", async () => {
      const parts = await open("stale-release");
      const stale = held(await parts.acquire({ leaseTime: 300 }));
      await aborted(stale.signal);
      await expect
        .poll(() => parts.remaining(stale), { timeout: 3_000, interval: 20 })
        .toBeLessThanOrEqual(0);
      const fresh = held(await parts.acquire({ leaseTime: 10_000, owner: stale.owner }));
      expect(await stale.release()).toBe("expired");
      expect(await parts.remaining(fresh)).toBeGreaterThan(8_000);
      expect(await parts.rival()).toBeNull();
      expect(fresh.signal.aborted).toBe(false);
      expect(await fresh.release()).toBe("released");
    });

    if (traits.cancel === "own") {
      it("a cancel that lands after the hold expired and was re-made leaves the newer hold alone", async () => {
        await warm();
        const parts = await open("late-cancel");
        const anyHold = () => parts.anyHold();
        const bridge = parts.replayBridge;
        const owner = `${kind}:late-cancel`;
        bridge.setFaults({ rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }] });
        const controller = new AbortController();
        const pending = parts.acquire({ leaseTime: 300, owner, signal: controller.signal });
        await expect.poll(anyHold, { timeout: 2_000, interval: 5 }).toBe(true);
        // The cancel sent on abort waits at the bridge until long after the hold expired.
        const before = bridge.stats().byCommand.evalsha ?? 0;
        bridge.setFaults({ delayMs: 1_200 });
        const reason = new Error("gave up");
        controller.abort(reason);
        await expect(pending).rejects.toBe(reason);
        await expect
          .poll(() => bridge.stats().byCommand.evalsha ?? 0, { timeout: 1_000, interval: 5 })
          .toBeGreaterThan(before);
        bridge.clearFaults();
        await expect.poll(anyHold, { timeout: 3_000, interval: 20 }).toBe(false);
        const fresh = held(await parts.acquire({ leaseTime: 10_000, owner }));
        expect(parts.background.length).toBeGreaterThan(0);
        await Promise.all(parts.background); // the cancel lands now, on the newer hold
        expect(await parts.remaining(fresh)).toBeGreaterThan(8_000);
        expect(await parts.rival()).toBeNull();
        expect(await fresh.release()).toBe("released");
      });
    }

    it(`signal aborts within ${EXPIRY_SLACK_MS} ms after expiresAt when no renewal confirmed, never before`, async () => {
      // Each lease on its own name: independent holds, timers and (for composites) members.
      const lateness = await Promise.all(
        EXPIRY_LEASE_TIMES.map(async (leaseTime, i) => {
          const parts = await open(`expiry:${i}`);
          const lease = held(await parts.acquire({ leaseTime }));
          // Already ended, it could not be timed (the acquire took longer than the lease).
          expect(lease.signal.aborted).toBe(false);
          const { at, reason } = await abortTime(lease);
          expect(reason).toBeInstanceOf(LeaseLostError);
          return at - lease.expiresAt;
        }),
      );
      const report = `ms after expiresAt: ${lateness.join(", ")}`;
      for (const late of lateness) {
        expect(late, report).toBeGreaterThanOrEqual(0);
        expect(late, report).toBeLessThan(EXPIRY_BOUND_MS);
      }
      expect(Math.min(...lateness), report).toBeLessThan(EXPIRY_SLACK_MS);
    });

    it("expiresAt counts from the send and never passes Redis's expiry, for an acquire and a renewal under latency", async () => {
      const parts = await open("latency");
      for (const bridge of parts.bridges) bridge.setFaults({ delayMs: LATENCY_MS });
      const sent = Date.now();
      const lease = held(await parts.acquire({ leaseTime: 5_000 }));
      expect(Date.now() - sent).toBeGreaterThanOrEqual(LATENCY_MS);
      expect(lease.expiresAt).toBeLessThanOrEqual(sent + 5_000 + SEND_SLACK_MS);
      let read = Date.now();
      expect(lease.expiresAt).toBeLessThanOrEqual(read + (await parts.remaining(lease)));
      const renewSent = Date.now();
      await lease.renew(8_000);
      expect(Date.now() - renewSent).toBeGreaterThanOrEqual(LATENCY_MS);
      // Moved (a RedLock's validity keeps back the clock drift), but only from the send.
      expect(lease.expiresAt).toBeGreaterThan(renewSent + 8_000 - 200);
      expect(lease.expiresAt).toBeLessThanOrEqual(renewSent + 8_000 + SEND_SLACK_MS);
      read = Date.now();
      expect(lease.expiresAt).toBeLessThanOrEqual(read + (await parts.remaining(lease)));
      for (const bridge of parts.bridges) bridge.clearFaults();
      expect(await lease.release()).toBe("released");
    });

    it("a renewal shorter than what is left keeps Redis's TTL and never moves expiresAt earlier", async () => {
      const parts = await open("no-shorten");
      const lease = held(await parts.acquire({ leaseTime: 10_000 }));
      const expiresAt = lease.expiresAt;
      await lease.renew(1_000);
      expect(lease.expiresAt).toBeGreaterThanOrEqual(expiresAt);
      expect(await parts.remaining(lease)).toBeGreaterThan(8_000);
      expect(lease.signal.aborted).toBe(false);
      expect(await lease.release()).toBe("released");
    });

    it("a grant applied but unanswered, then resent, returns what it granted and holds once", async () => {
      await warm();
      const parts = await open("replay");
      const bridge = parts.replayBridge;
      const faults = bridge.stats().faultsInjected;
      bridge.setFaults({ rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }] });
      const lease = held(await parts.acquire({ leaseTime: 10_000 }));
      expect(bridge.stats().faultsInjected - faults).toBe(1);
      const { claimed, stored } = await parts.grant(lease);
      expect(stored).toEqual(claimed);
      expect(await parts.rival()).toBeNull();
      expect(await lease.release()).toBe("released");
    });
  });
}
