/**
 * Waiting behind long holds (reentrant and fair lock): a hand-off is held on its message however
 * long ago the waiter's last attempt was, with a lease that never believes it holds longer than
 * Redis keeps the lock; the client's subscription stays open while it holds the lock, so its
 * next wait does not subscribe again; and only the first registered waiter comes back when a
 * holder's lease runs out unreleased.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { randomHex } from "../../../src/ids.js";
import { type EdgeLock, HAND_OFF_CLAIM_WINDOW_MS, type Lease } from "../../../src/index.js";
import { LOCK_HAND_OFF_SLOT_MS } from "../../../src/limits.js";
import { fairLockAcquire, lockAcquire } from "../../../src/lua.gen.js";
import { keyPrefix, startPrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock, replayKeys } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

const waits = (events: readonly { type: string }[]) =>
  events.filter((e) => e.type === "waiting").length;
/** The lock's expiry on the server's clock, ms (PEXPIRETIME; Redis runs on this machine). */
const expiryOf = async (name: string) => Number(await raw.sendCommand(["PEXPIRETIME", name]));

/**
 * A waiter whose client died while waiting: what its busy attempt left, made by the acquire
 * script itself (lease 9 s, registered for a hand-off waiter's slot), and nothing after it: no
 * subscription hears its channel, no attempt comes back, no give-back is sent.
 */
const goneWaiter = {
  reentrant: (name: string) =>
    raw.eval(lockAcquire.source, {
      keys: [name, ...replayKeys(name), `edgelock_waiting:{${name}}`, `edgelock_wake:{${name}}`],
      arguments: [
        "9000",
        "gone-owner",
        "30000",
        randomHex(),
        "gone:w1",
        String(LOCK_HAND_OFF_SLOT_MS),
        "1",
        "1",
      ],
    }) as Promise<number[]>,
  fair: (name: string) =>
    raw.eval(fairLockAcquire.source, {
      keys: [
        name,
        `redisson_lock_queue:{${name}}`,
        `redisson_lock_timeout:{${name}}`,
        `edgelock_waiters:{${name}}`,
        `redisson_lock__channel:{${name}}`,
        ...replayKeys(name),
      ],
      arguments: ["9000", "gone-owner", "30000", randomHex(), "60000", "2000", "gone:w1"],
    }) as Promise<number[]>,
};

const kinds = [
  {
    kind: "reentrant lock",
    get: (e: EdgeLock, name: string) => e.getLock(name),
    gone: goneWaiter.reentrant,
  },
  {
    kind: "fair lock",
    get: (e: EdgeLock, name: string) => e.getFairLock(name),
    gone: goneWaiter.fair,
  },
] as const;

describe.each(kinds)("long waits: $kind", ({ kind, get, gone }) => {
  it("a hand-off long after the waiter's last attempt is held without another request, and expires no later than in Redis", async () => {
    const name = `${prefix}${get.name}-old-attempt-${Math.random()}`;
    const holder = recordingEdgeLock();
    const held = await get(holder.edgelock, name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = get(waiter.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    // Subscribed and registered: its last attempt is sent.
    await waiter.until((_e, all) => waits(all) === 2);
    // The hold outlasts three quarters of the claim window (2 s) after that attempt: the last
    // attempt's send time alone no longer proves enough of the window left.
    await sleep(1_800);
    expect(await held.release()).toBe("released");
    const lease = await pending;
    expect(lease).not.toBeNull();
    // The busy attempt, the subscription, the registering attempt: no confirming attempt.
    expect(waiter.requests("acquire")).toBe(3);
    const expiry = await expiryOf(name);
    expect(lease?.expiresAt).toBeLessThanOrEqual(expiry);
    // Dated from the hand-off, not from the attempt 1.8 s before it.
    expect(lease?.expiresAt).toBeGreaterThan(expiry - 200);
    // The lease's first renewal makes the claim window its lease.
    await waiter.until((e) => e.type === "renew" && e.renewed);
    expect(Number(await raw.pTTL(name))).toBeGreaterThan(5_000);
    expect(await lease?.release()).toBe("released");
  });

  it("the subscription stays open while the client holds the lock: its next wait registers with its first attempt", async () => {
    const name = `${prefix}${get.name}-kept-${Math.random()}`;
    const other = recordingEdgeLock();
    const first = await get(other.edgelock, name).lock({ leaseTime: 20_000 });
    const client = recordingEdgeLock();
    const pending = get(client.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await client.until((_e, all) => waits(all) === 2);
    await first.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    const again = get(other.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await other.until((_e, all) => waits(all) === 2);
    // Held for longer than an idle subscription stays open (1 s).
    await sleep(1_500);
    const next = get(client.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await client.until((_e, all) => waits(all) === 3);
    expect(await lease?.release()).toBe("released");
    const otherLease = await again;
    expect(otherLease).not.toBeNull();
    expect(await otherLease?.release()).toBe("released");
    expect(await next).not.toBeNull();
    const acquires = client.events.filter((e) => e.type === "acquire");
    // One attempt, which registered at once: no subscription, no attempt after one.
    expect(acquires.at(-1)?.requests).toBe(1);
    expect(client.events.filter((e) => e.type === "wait-strategy")).toHaveLength(1);
  });

  it("a subscription kept open for a hold gives its place to a wait on another name when the client is at maxSubscriptions", async () => {
    const held = `${prefix}${get.name}-held-${Math.random()}`;
    const next = `${prefix}${get.name}-next-${Math.random()}`;
    const other = recordingEdgeLock();
    const first = await get(other.edgelock, held).lock({ leaseTime: 20_000 });
    const client = recordingEdgeLock({ maxSubscriptions: 1 });
    const pending = get(client.edgelock, held).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await client.until((_e, all) => waits(all) === 2);
    await first.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    const blocker = await get(other.edgelock, next).lock({ leaseTime: 20_000 });
    const waiting = get(client.edgelock, next).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    // Busy, then subscribed (in place of the held name's subscription) and registered.
    await client.until((_e, all) => waits(all) === 4);
    const strategies = client.events.flatMap((e) =>
      e.type === "wait-strategy" ? [e.strategy] : [],
    );
    expect(strategies).toEqual(["subscribe", "subscribe"]);
    expect(await blocker.release()).toBe("released");
    const second = await waiting;
    expect(second).not.toBeNull();
    expect(await second?.release()).toBe("released");
    expect(await lease?.release()).toBe("released");
  });

  it("only the first registered waiter comes back when the holder's lease runs out unreleased; the next gets the lock from its release", async () => {
    const name = `${prefix}${get.name}-order-${Math.random()}`;
    // A holder that never releases: its lease runs out.
    await get(recordingEdgeLock().edgelock, name).lock({ leaseTime: 1_500 });
    const a = recordingEdgeLock();
    const first = get(a.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await a.until((_e, all) => waits(all) === 2);
    const b = recordingEdgeLock();
    const second = get(b.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await b.until((_e, all) => waits(all) === 2);
    const lease = await first;
    expect(lease).not.toBeNull();
    // The first came back at the expiry and took the lock: one attempt more than its three.
    expect(a.requests("acquire")).toBe(4);
    // Held for a while: the second waiter, behind it, is not back meanwhile.
    await sleep(500);
    expect(b.events.filter((e) => e.type === "acquire")).toHaveLength(0);
    expect(waits(b.events)).toBe(2);
    expect(await lease?.release()).toBe("released");
    const next = await second;
    expect(next).not.toBeNull();
    // Busy attempt, subscription, registering attempt; the release handed it the lock.
    expect(b.requests("acquire")).toBe(3);
    expect(await next?.release()).toBe("released");
  });

  it("behind a handed-over hold that outlasts the claim window, the waiter then first sends nothing until it is handed the lock", async () => {
    const name = `${prefix}${get.name}-confirmed-${Math.random()}`;
    const holder = await get(recordingEdgeLock().edgelock, name).lock({ leaseTime: 20_000 });
    const a = recordingEdgeLock();
    const first = get(a.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await a.until((_e, all) => waits(all) === 2);
    const b = recordingEdgeLock();
    const second = get(b.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await b.until((_e, all) => waits(all) === 2);
    expect(await holder.release()).toBe("released");
    const lease = await first;
    expect(lease).not.toBeNull();
    // B was told the claim window's end; A's renewal that confirms its lease tells B again.
    await a.until((e) => e.type === "renew" && e.renewed);
    await sleep(HAND_OFF_CLAIM_WINDOW_MS);
    expect(await lease?.release()).toBe("released");
    const next = await second;
    expect(next).not.toBeNull();
    // Busy attempt, subscription, registering attempt: back for nothing at the window's end
    // would have been a fourth.
    expect(b.requests("acquire")).toBe(3);
    expect(await next?.release()).toBe("released");
  });

  it("a waiter behind another whose stream ends subscribes again and waits on without an attempt; it is still handed the lock in turn", async () => {
    const name = `${prefix}${get.name}-stream-behind-${Math.random()}`;
    const holder = await get(recordingEdgeLock().edgelock, name).lock({ leaseTime: 20_000 });
    const a = recordingEdgeLock();
    const first = get(a.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
    await a.until((_e, all) => waits(all) === 2);
    // B's requests go through a bridge of its own, whose streams the test ends.
    const own = await startPrivateBridge();
    try {
      const b = recordingEdgeLock({}, own.redis());
      const second = get(b.edgelock, name).tryLock({ waitTime: 20_000, leaseTime: 10_000 });
      await b.until((_e, all) => waits(all) === 2);
      // Past the second after its confirmation within which an ended stream turns a wait to
      // polling.
      await sleep(1_200);
      own.bridge.dropSubscriptions();
      await b.until((_e, all) => all.filter((e) => e.type === "wait-strategy").length === 2);
      expect(await holder.release()).toBe("released");
      const lease = await first;
      expect(lease).not.toBeNull();
      expect(await lease?.release()).toBe("released");
      const next = await second;
      expect(next).not.toBeNull();
      // Busy attempt, subscription, registering attempt, the second subscription: no attempt
      // after it (it was behind A), and the hand-off needed none.
      expect(b.requests("acquire")).toBe(4);
      expect(await next?.release()).toBe("released");
    } finally {
      await own.close();
    }
  });

  it("a chain of holders that never release: every waiter acquires, each soon after the lease before it runs out (Redisson's testLeaseTimeout)", async () => {
    const name = `${prefix}${get.name}-chain-${Math.random()}`;
    // Five clients arriving 100 ms apart, none releasing: each lease (600 ms) runs out, and the
    // waiter then first must take the lock. Before the first waiter was told of each change of
    // hands, the third and later waiters were not bounded by any lease: some never acquired.
    const acquired: { client: number; at: number; lease: Lease }[] = [];
    const calls: Promise<void>[] = [];
    for (let client = 0; client < 5; client++) {
      if (client > 0) await sleep(100);
      const call = get(recordingEdgeLock().edgelock, name).tryLock({
        waitTime: 8_000,
        leaseTime: 600,
      });
      calls.push(
        call.then((lease) => {
          if (lease) acquired.push({ client, at: Date.now(), lease });
        }),
      );
    }
    await Promise.all(calls);
    expect(acquired).toHaveLength(5);
    if (kind === "fair lock") expect(acquired.map((a) => a.client)).toEqual([0, 1, 2, 3, 4]);
    for (let i = 1; i < acquired.length; i++) {
      // `expiresAt` is never after Redis's expiry, so this overstates the gap, never hides one.
      const gap = (acquired[i]?.at ?? 0) - (acquired[i - 1]?.lease.expiresAt ?? 0);
      expect(gap).toBeLessThan(700);
    }
  });

  it("a holder that dies right after a hand-off: the waiter then first is back when its claim window ends", async () => {
    const name = `${prefix}${get.name}-dies-handed-${Math.random()}`;
    const holder = await get(recordingEdgeLock().edgelock, name).lock({ leaseTime: 20_000 });
    // A reaches Redis through a bridge of its own, closed once A holds the lock: it can neither
    // renew nor release, as if its isolate were gone.
    const gone = await startPrivateBridge();
    const a = recordingEdgeLock({}, gone.redis());
    const first = get(a.edgelock, name).tryLock({ waitTime: 10_000, leaseTime: 1_500 });
    await a.until((_e, all) => waits(all) === 2);
    const b = recordingEdgeLock();
    // B's busy attempt saw the holder's 20 s lease: without being told of A, it would be back
    // at its block cap (20 s), past its budget.
    const second = get(b.edgelock, name).tryLock({ waitTime: 6_000, leaseTime: 5_000 });
    await b.until((_e, all) => waits(all) === 2);
    expect(await holder.release()).toBe("released");
    const handed = await first;
    expect(handed).not.toBeNull();
    await gone.close();
    const expiry = await expiryOf(name);
    const lease = await second;
    expect(lease).not.toBeNull();
    expect(Date.now() - expiry).toBeLessThan(700);
    expect(await lease?.release()).toBe("released");
  });

  it("behind a first waiter whose client died, the next takes the lock a claim window after the holder's lease runs out unreleased, not at its own bound", async () => {
    const name = `${prefix}${get.name}-gone-first-${Math.random()}`;
    // A holder that never releases, and a first waiter that is gone.
    await get(recordingEdgeLock().edgelock, name).lock({ leaseTime: 1_500 });
    const expiry = await expiryOf(name);
    expect((await gone(name))[0]).toBe(0);
    const b = recordingEdgeLock();
    const second = get(b.edgelock, name).tryLock({ waitTime: 40_000, leaseTime: 10_000 });
    await b.until((_e, all) => waits(all) === 2);
    const lease = await second;
    expect(lease).not.toBeNull();
    // Back a claim window after the expiry (the first would have taken the lock by then), and
    // takes it: the fair lock's attempt no longer hands it to the gone waiter for another claim
    // window that nobody hears (4 s then). Without that bound: at its block cap, 20 s.
    const late = Date.now() - expiry;
    expect(late).toBeGreaterThanOrEqual(HAND_OFF_CLAIM_WINDOW_MS - 200);
    expect(late).toBeLessThan(HAND_OFF_CLAIM_WINDOW_MS + 1_500);
    expect(await lease?.release()).toBe("released");
  });
});
