/**
 * The fair lock: FIFO hand-off inside the release script, waiters woken by a token on their own
 * wake list (BLPOP through the bridge's pool of blocking connections), dead waiters skipped, an
 * unconfirmed hand-off passed on after the claim window, polling where blocking is off, and
 * nothing left in Redis once the queue is empty and the lock free.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { FaultRule } from "../../../src/bridge/index.js";
import { HAND_OFF_CLAIM_WINDOW_MS, type Lease, TransportError } from "../../../src/index.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { isReplayRecord, recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

/** Keys of `name` other than its replay records. */
const keysOf = async (name: string) =>
  (await raw.keys(`*${name}*`)).map(String).filter((k) => !isReplayRecord(name, k));
const queueOf = async (name: string) =>
  (await raw.lRange(`redisson_lock_queue:{${name}}`, 0, -1)).map(String);

describe("fair lock", () => {
  it("grants in arrival order; each release hands the lock to the next waiter, who is woken", async () => {
    const name = `${prefix}fifo`;
    const holder = recordingEdgeLock();
    const first = await holder.edgelock.getFairLock(name).lock({ leaseTime: 10_000 });
    const order: number[] = [];
    const clients = [0, 1, 2, 3, 4].map(() => recordingEdgeLock());
    const waiting: Promise<void>[] = [];
    for (const [i, c] of clients.entries()) {
      // Each waiter joins the queue before the next one starts.
      waiting.push(
        c.edgelock
          .getFairLock(name)
          .lock({ leaseTime: 10_000 })
          .then(async (lease: Lease) => {
            order.push(i);
            expect(await lease.release()).toBe("released");
          }),
      );
      await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(i + 1);
    }
    const started = Date.now();
    expect(await first.release()).toBe("released");
    await Promise.all(waiting);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    // Woken by hand-offs, not by timeouts: the five waits took far less than a BLPOP bound.
    expect(Date.now() - started).toBeLessThan(3_000);
    // One attempt to queue and one wait, whose wake token is the hand-off: no polling, and no
    // confirming request for holds shorter than the claim window.
    for (const c of clients) {
      expect(c.requests("acquire")).toBeLessThanOrEqual(3);
    }
    expect(await keysOf(name)).toEqual([]);
  });

  describe("order under faults (docs/guarantees.md)", () => {
    const faulty = usePrivateBridge();
    afterEach(() => faulty.bridge.clearFaults());

    /**
     * A holder and three waiters joining one after another; the middle one talks through the
     * faulty bridge, whose `rules` apply from its first request. Resolves with the grant order
     * and how the middle waiter's call ended.
     */
    async function queueThree(label: string, rules: FaultRule[]) {
      const name = `${prefix}${label}`;
      const first = await recordingEdgeLock()
        .edgelock.getFairLock(name)
        .lock({ leaseTime: 10_000 });
      const order: number[] = [];
      const clients = [
        recordingEdgeLock(),
        recordingEdgeLock({}, faulty.redis()),
        recordingEdgeLock(),
      ];
      const calls: Promise<unknown>[] = [];
      for (const [i, c] of clients.entries()) {
        if (i === 1) faulty.bridge.setFaults({ rules });
        const call = c.edgelock
          .getFairLock(name)
          .tryLock({ waitTime: 10_000, leaseTime: 10_000 })
          .then(async (lease) => {
            if (!lease) throw new Error("timed out");
            order.push(i);
            expect(await lease.release()).toBe("released");
          });
        calls.push(call);
        // The next waiter starts once this one has joined the queue, or its call has ended.
        let ended = false;
        call.then(
          () => {
            ended = true;
          },
          () => {
            ended = true;
          },
        );
        const id = c.edgelock.clientId;
        await expect
          .poll(async () => ended || (await queueOf(name)).some((q) => q.startsWith(id)), {
            timeout: 5_000,
            interval: 10,
          })
          .toBe(true);
      }
      const queued = await queueOf(name);
      expect(await first.release()).toBe("released");
      const outcomes = await Promise.allSettled(calls);
      const middle = outcomes[1];
      if (!middle) throw new Error("no middle waiter");
      return { name, order, queued, middle };
    }

    it("a waiter whose request was applied but answered by a lost connection keeps its place (the resend is a replay)", async () => {
      const { name, order, queued, middle } = await queueThree("fault-resent", [
        { action: "lose", mode: "close", match: "evalsha", times: 1 },
      ]);
      expect(faulty.bridge.stats().faultsInjected).toBe(1);
      expect(queued).toHaveLength(3); // queued once, not twice
      expect(middle.status).toBe("fulfilled");
      expect(order).toEqual([0, 1, 2]);
      expect(await keysOf(name)).toEqual([]);
    });

    it("a waiter whose request is lost for good fails, leaves the queue, and the others keep their order", async () => {
      // Applied, then every answer lost: the call ends with a TransportError.
      const { name, order, middle } = await queueThree("fault-lost", [
        { action: "lose", mode: "503", match: "evalsha" },
      ]);
      expect(middle.status).toBe("rejected");
      expect((middle as PromiseRejectedResult).reason).toBeInstanceOf(TransportError);
      faulty.bridge.clearFaults();
      expect(order).toEqual([0, 2]);
      await expect.poll(() => keysOf(name), { timeout: 5_000, interval: 20 }).toEqual([]);
    });
  });

  it("a waiter woken by its hand-off holds at once, and confirms its lease before the claim window ends", async () => {
    const name = `${prefix}confirm`;
    const held = await recordingEdgeLock().edgelock.getFairLock(name).lock({ leaseTime: 10_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getFairLock(name).lock({ leaseTime: 10_000 });
    // Queued, subscribed, and waiting for its message.
    await waiter.waited(2);
    await held.release();
    const lease = await pending;
    expect(waiter.requests("acquire")).toBe(3);
    // Taken from the wake message: the TTL is still the claim window, and the lease knows it.
    expect(lease.expiresAt - Date.now()).toBeLessThanOrEqual(HAND_OFF_CLAIM_WINDOW_MS);
    expect(Number(await raw.pTTL(name))).toBeLessThanOrEqual(HAND_OFF_CLAIM_WINDOW_MS);
    // Halfway through the claim window the lease renews to its full lease time, once.
    await waiter.until((e) => e.type === "renew" && e.renewed);
    expect(Number(await raw.pTTL(name))).toBeGreaterThan(HAND_OFF_CLAIM_WINDOW_MS);
    expect(await raw.hExists(name, "edgelock:grant")).toBe(0);
    expect(lease.expiresAt - Date.now()).toBeGreaterThan(8_000);
    expect(lease.signal.aborted).toBe(false);
    expect(await lease.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
  });

  it("a waiter that gives up leaves the queue, and the next one is served", async () => {
    const name = `${prefix}give-up`;
    const a = recordingEdgeLock();
    const held = await a.edgelock.getFairLock(name).lock({ leaseTime: 10_000 });
    const quitter = recordingEdgeLock();
    const patient = recordingEdgeLock();
    const quits = quitter.edgelock.getFairLock(name).tryLock({ waitTime: 300, leaseTime: 5_000 });
    await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(1);
    const waits = patient.edgelock.getFairLock(name).lock({ leaseTime: 5_000 });
    await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(2);
    expect(await quits).toBeNull();
    expect(await queueOf(name)).toHaveLength(1);
    await held.release();
    const lease = await waits;
    expect(await lease.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
  });

  it("a dead waiter (its slot lapsed) is skipped", async () => {
    const name = `${prefix}dead`;
    const { edgelock } = recordingEdgeLock();
    const held = await edgelock.getFairLock(name).lock({ leaseTime: 10_000 });
    // A waiter that queued and vanished: its slot lapsed a while ago.
    await raw.rPush(`redisson_lock_queue:{${name}}`, "ghost:1");
    await raw.zAdd(`redisson_lock_timeout:{${name}}`, { score: 1, value: "ghost:1" });
    await raw.hSet(`edgelock_waiters:{${name}}`, "ghost:1", "1");
    const live = recordingEdgeLock().edgelock.getFairLock(name).lock({ leaseTime: 5_000 });
    await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(2);
    await held.release();
    const lease = await live;
    expect(await lease.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
  });

  it("a hand-off its waiter never confirms costs the next waiter at most about two claim windows", async () => {
    const name = `${prefix}unconfirmed`;
    const { edgelock } = recordingEdgeLock();
    const held = await edgelock.getFairLock(name).lock({ leaseTime: 10_000 });
    // A waiter of ours that queued, then died before confirming: its slot is still live.
    const slotEnd = Date.now() + 60_000;
    await raw.rPush(`redisson_lock_queue:{${name}}`, "gone:1");
    await raw.zAdd(`redisson_lock_timeout:{${name}}`, { score: slotEnd, value: "gone:1" });
    await raw.hSet(`edgelock_waiters:{${name}}`, "gone:1", "feed");
    const next = recordingEdgeLock().edgelock.getFairLock(name).lock({ leaseTime: 5_000 });
    await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(2);
    const released = Date.now();
    await held.release(); // hands off to gone:1, who never comes
    // Handed to gone:1 (marked with its waiter id) for a claim window.
    expect(String(await raw.hGet(name, "edgelock:grant"))).toBe("feed");
    expect(String(await raw.hGet(name, "gone:1"))).toBe("1");
    const lease = await next;
    const waited = Date.now() - released;
    expect(waited).toBeGreaterThanOrEqual(HAND_OFF_CLAIM_WINDOW_MS - 100);
    expect(waited).toBeLessThan(2 * HAND_OFF_CLAIM_WINDOW_MS + 1_500);
    expect(await lease.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
  });

  it('with wait: "poll" the same scripts serve waiters in order without blocking', async () => {
    const name = `${prefix}poll`;
    const holder = recordingEdgeLock({ wait: "poll" });
    const held = await holder.edgelock.getFairLock(name).lock({ leaseTime: 10_000 });
    const a = recordingEdgeLock({ wait: "poll" });
    const b = recordingEdgeLock({ wait: "poll" });
    const order: string[] = [];
    const pa = a.edgelock
      .getFairLock(name)
      .lock({ leaseTime: 5_000 })
      .then(async (l) => {
        order.push("a");
        await l.release();
      });
    await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(1);
    const pb = b.edgelock
      .getFairLock(name)
      .lock({ leaseTime: 5_000 })
      .then(async (l) => {
        order.push("b");
        await l.release();
      });
    await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(2);
    await held.release();
    await Promise.all([pa, pb]);
    expect(order).toEqual(["a", "b"]);
    expect(await keysOf(name)).toEqual([]);
  });

  it("excludes a Redisson reentrant-lock client and is reentrant for its owner", async () => {
    const name = `${prefix}reenter`;
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getFairLock(name);
    const outer = await lock.lock({ leaseTime: 10_000 });
    const inner = await lock.lock({ leaseTime: 10_000, owner: outer.owner });
    expect(await lock.getHoldCount(outer.owner)).toBe(2);
    expect(await edgelock.getLock(name).tryLock({ leaseTime: 1_000 })).toBeNull();
    const inspected = await lock.inspect();
    expect(inspected).toMatchObject({ kind: "fair-lock", locked: true });
    expect(inspected.holders).toEqual([{ owner: outer.owner, holdCount: 2 }]);
    expect(await inner.release()).toBe("still-held");
    expect(await outer.release()).toBe("released");
    expect(await lock.isLocked()).toBe(false);
  });
});
