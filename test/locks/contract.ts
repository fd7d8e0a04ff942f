/**
 * The lock contract: behaviours every lock kind keeps, run by each kind's test file with
 * `describeLockContract(kind, make)`. Real parts only: the real `@upstash/redis` client, a private
 * bridge for faults, a real redis-server.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { EdgeLock, Lease, LockOptions, TryLockOptions } from "../../src/index.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../support/env.js";
import { aborted, isReplayRecord, recordingEdgeLock } from "../support/locks.js";

/** What the contract needs of a lock kind. */
export interface LockUnderContract {
  tryLock(options?: TryLockOptions): Promise<Lease | null>;
  lock(options?: LockOptions): Promise<Lease>;
  isLocked(): Promise<boolean>;
  getHoldCount(owner: string): Promise<number>;
}

/**
 * Runs the lock contract for one kind; `make` gets a lock of that kind on `name`.
 * `persistentKeys` names the keys the kind keeps on purpose after release (a fenced lock's token).
 */
export function describeLockContract(
  kind: string,
  make: (edgelock: EdgeLock, name: string) => LockUnderContract,
  persistentKeys: (name: string) => string[] = () => [],
): void {
  describe(`lock contract: ${kind}`, () => {
    const prefix = keyPrefix();
    const raw = useRawRedis();
    const bridge = usePrivateBridge();
    afterEach(() => {
      bridge.bridge.clearFaults();
    });
    /** Keys of `name` other than its replay records (which expire on their own). */
    const keysOf = async (name: string) =>
      (await raw.keys(`*${name}*`))
        .map(String)
        .filter((k) => !isReplayRecord(name, k) && !persistentKeys(name).includes(k));
    /** Owners in the lock HASH (without our epoch field, a read-write lock's mode and suffix). */
    const owners = async (name: string) =>
      Object.keys(await raw.hGetAll(name))
        .filter((f) => !f.startsWith("edgelock:") && f !== "mode")
        .map((f) => f.replace(/:write$/, ""));
    const loseNext = (mode: "close" | "hang" = "close") =>
      bridge.bridge.setFaults({ rules: [{ action: "lose", mode, match: "evalsha", times: 1 }] });
    const faultBridgeLock = async (name: string) => {
      const rec = recordingEdgeLock({}, bridge.redis());
      // Load the scripts first, so that the fault hits the script call under test.
      await (await make(rec.edgelock, `${prefix}warm`).tryLock({ leaseTime: 1_000 }))?.release();
      return { rec, lock: make(rec.edgelock, name) };
    };

    it("an acquire, a re-entry and a release applied but unanswered, then resent, count once", async () => {
      const name = `${prefix}replay`;
      const { lock } = await faultBridgeLock(name);
      loseNext();
      const first = await lock.tryLock({ leaseTime: 10_000 });
      if (!first) throw new Error("not acquired");
      expect(await lock.getHoldCount(first.owner)).toBe(1);
      loseNext();
      const second = await lock.tryLock({ leaseTime: 10_000, owner: first.owner });
      if (!second) throw new Error("re-entry refused");
      expect(await lock.getHoldCount(first.owner)).toBe(2);
      loseNext();
      expect(await second.release()).toBe("still-held");
      expect(await lock.getHoldCount(first.owner)).toBe(1);
      expect(await first.release()).toBe("released");
      expect(await keysOf(name)).toEqual([]);
    });

    it("leaves no key but replay records after release, and none at all after expiry", async () => {
      const { edgelock } = recordingEdgeLock({ replayWindow: 1_000 });
      const released = `${prefix}released`;
      const lease = await make(edgelock, released).lock({ leaseTime: 5_000 });
      expect(await lease.release()).toBe("released");
      expect(await keysOf(released)).toEqual([]);
      const expired = `${prefix}expired`;
      const lapsed = await make(edgelock, expired).lock({ leaseTime: 200 });
      await aborted(lapsed.signal);
      await expect
        .poll(async () => await keysOf(expired), { timeout: 5_000, interval: 50 })
        .toEqual([]);
      await expect
        .poll(async () => (await raw.keys(`*${expired}*`)).map(String).sort(), {
          timeout: 5_000,
          interval: 50,
        })
        .toEqual(persistentKeys(expired).sort());
    });

    it("validates arguments before any request", async () => {
      const rec = recordingEdgeLock();
      const lock = make(rec.edgelock, `${prefix}validation`);
      const bad: [TryLockOptions, ErrorConstructor][] = [
        [{ waitTime: -1 }, RangeError],
        [{ leaseTime: 0 }, RangeError],
        [{ leaseTime: 1.5 }, RangeError],
        [{ owner: "" }, RangeError],
        [{ owner: 7 as never }, TypeError],
        [{ signal: "stop" as never }, TypeError],
        [{ keepAlive: "forever" as never }, TypeError],
        [{ leaseMs: 5 } as never, TypeError],
      ];
      for (const [options, type] of bad) {
        await expect(lock.tryLock(options), JSON.stringify(options)).rejects.toThrow(type);
      }
      await expect(lock.lock({ waitTime: 1 } as never)).rejects.toThrow(TypeError);
      await expect(lock.getHoldCount("")).rejects.toThrow(RangeError);
      expect(rec.requests()).toBe(0);
      expect(rec.events).toEqual([]);
    });

    it("an abort while waiting, or while an attempt is in flight, rejects with the reason and leaves no hold", async () => {
      const name = `${prefix}abort`;
      const { rec, lock } = await faultBridgeLock(name);
      const holder = await make(recordingEdgeLock().edgelock, name).lock({ leaseTime: 10_000 });
      const waiting = new AbortController();
      const reason = new Error("caller gave up");
      const pending = lock.tryLock({ waitTime: 10_000, signal: waiting.signal });
      await rec.until((e) => e.type === "waiting");
      waiting.abort(reason);
      await expect(pending).rejects.toBe(reason);
      // The aborted wait's clean-up runs in the background: let it finish before the next fault.
      await Promise.all(rec.background);
      expect(await owners(name)).toEqual([holder.owner]);
      expect(await holder.release()).toBe("released");
      // In flight: the acquire is applied, its answer held back; the abort cancels it.
      loseNext("hang");
      const inFlight = new AbortController();
      const attempt = lock.tryLock({ leaseTime: 10_000, signal: inFlight.signal });
      await expect.poll(() => raw.exists(name), { timeout: 2_000, interval: 5 }).toBe(1);
      inFlight.abort(reason);
      await expect(attempt).rejects.toBe(reason);
      await Promise.all(rec.background);
      expect(await lock.isLocked()).toBe(false);
      expect(await keysOf(name)).toEqual([]);
    });

    it("a lease restored from JSON renews and releases; releasing the original again replays", async () => {
      const name = `${prefix}restore`;
      const a = recordingEdgeLock();
      const b = recordingEdgeLock();
      const lease = await make(a.edgelock, name).lock({ leaseTime: 2_000 });
      const json = JSON.stringify(lease);
      expect(JSON.parse(json)).toMatchObject({ v: 1, kind, name, owner: lease.owner });
      const restored = b.edgelock.restoreLease(json);
      expect(restored.toJSON()).toEqual(lease.toJSON());
      await restored.renew(20_000);
      expect(await raw.pTTL(name)).toBeGreaterThan(15_000);
      expect(await restored.release()).toBe("released");
      expect(await lease.release()).toBe("released"); // same lease id: the first answer
      expect(await make(a.edgelock, name).isLocked()).toBe(false);
    });
  });
}
