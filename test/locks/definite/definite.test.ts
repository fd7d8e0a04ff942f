/**
 * Calls a caller cannot repeat safely end definite: every release kind, a semaphore's releases
 * and permit changes, a latch's count changes resend their own request until Redis answers
 * (`definiteWithin`), under the bridge's apply-then-lose faults in every drop mode; callers that
 * retry never apply twice (permit handles, `countDown`'s `idempotencyKey`); the background
 * resend after an ambiguous failure reports a `settle` event; `definiteWithin` is validated.
 *
 * Cycle counts: `DEFINITE_CYCLES` per kind and drop mode (default 25 in `npm test`; the full
 * count of the issue, 2 000, is run by hand: `DEFINITE_CYCLES=2000 npx vitest run
 * test/locks/definite`).
 */
import { Redis } from "@upstash/redis";
import { afterEach, describe, expect, it } from "vitest";
import type { FaultRule } from "../../../src/bridge/index.js";
import {
  EdgeLock,
  type Lease,
  type LockEvent,
  OverReleaseError,
  type RedisLike,
  type SettleEvent,
  TransportError,
} from "../../../src/index.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const bridge = usePrivateBridge();
const raw = useRawRedis();
afterEach(() => {
  bridge.bridge.clearFaults();
});

const CYCLES = Number(process.env.DEFINITE_CYCLES ?? 25);
const MODES = ["close", "503", "hang"] as const;
type Mode = (typeof MODES)[number];
/** requestTimeout of the faulted clients: a hung answer costs this much, so keep it short. */
const REQUEST_TIMEOUT = 300;

/** 20 % of requests applied by Redis, then their answer lost in `mode`. */
function lose(mode: Mode, seed: number, rate = 0.2): { rules: FaultRule[]; seed: number } {
  return { seed, rules: [{ action: "lose", mode, rate, hangMs: 2 * REQUEST_TIMEOUT }] };
}

/**
 * The bound of the cycle tests: 10 requestTimeouts. The default (3) is 9 s with the default
 * requestTimeout; 3 × 300 ms would be shorter than the stalls of a test process sharing two
 * cores with other test runs, and a stall, not a lost answer, would then end a call ambiguous.
 */
const DEFINITE_WITHIN = 10 * REQUEST_TIMEOUT;

/** One EdgeLock on the fault bridge with a short requestTimeout. */
function faulted(options = {}) {
  return recordingEdgeLock(
    { requestTimeout: REQUEST_TIMEOUT, definiteWithin: DEFINITE_WITHIN, ...options },
    bridge.redis(),
  );
}

/** A client on the fault bridge counting the scripts it sends (EVALSHA and EVAL). */
function counting(): { redis: RedisLike; calls: () => number } {
  const real = bridge.redis();
  let n = 0;
  return {
    redis: {
      eval: (script, keys, args) => {
        n++;
        return real.eval(script, keys, args);
      },
      evalsha: (sha, keys, args) => {
        n++;
        return real.evalsha(sha, keys, args);
      },
    },
    calls: () => n,
  };
}

const isAmbiguous = (e: unknown) => e instanceof TransportError && e.ambiguous;

/**
 * Runs `cycles` cycles of `setup` (fault-free) then `mutate` (under 20 % lost answers in `mode`,
 * a new seed per cycle), and counts the mutations that ended in an ambiguous TransportError.
 */
async function cyclesUnderFaults<T>(
  mode: Mode,
  cycles: number,
  setup: (i: number) => Promise<T>,
  mutate: (state: T, i: number) => Promise<unknown>,
): Promise<{ ambiguous: number; faults: number }> {
  let ambiguous = 0;
  const before = bridge.bridge.stats().faultsInjected;
  for (let i = 0; i < cycles; i++) {
    const state = await setup(i);
    bridge.bridge.setFaults(lose(mode, i + 1));
    try {
      await mutate(state, i);
    } catch (error) {
      if (!isAmbiguous(error)) throw error;
      ambiguous += 1;
      if (process.env.DEFINITE_REPORT) console.log(`cycle ${i}: ${(error as Error).message}`);
    } finally {
      bridge.bridge.clearFaults();
    }
  }
  return { ambiguous, faults: bridge.bridge.stats().faultsInjected - before };
}

/** Every kind of lease, acquired without faults, released under them. */
const LEASE_KINDS: Record<string, (e: EdgeLock, name: string) => Promise<Lease | null>> = {
  reentrant: (e, n) => e.getLock(n).tryLock({ leaseTime: 10_000 }),
  fair: (e, n) => e.getFairLock(n).tryLock({ leaseTime: 10_000 }),
  fenced: (e, n) => e.getFencedLock(n).tryLock({ leaseTime: 10_000 }),
  read: (e, n) => e.getReadWriteLock(n).readLock().tryLock({ leaseTime: 10_000 }),
  write: (e, n) => e.getReadWriteLock(n).writeLock().tryLock({ leaseTime: 10_000 }),
  permit: async (e, n) => {
    const s = e.getPermitExpirableSemaphore(n);
    await s.trySetPermits(1);
    return s.tryAcquire({ leaseTime: 10_000 });
  },
};

/** Numbers of the by-hand run, printed when DEFINITE_REPORT is set. */
function report(what: string, mode: Mode, r: { ambiguous: number; faults: number }) {
  if (process.env.DEFINITE_REPORT) {
    console.log(`${what} ${mode}: ${CYCLES} cycles, ${r.faults} faults, ${r.ambiguous} ambiguous`);
  }
}

describe.each(MODES)("apply-then-lose, mode %s, 20 %% of answers lost", (mode) => {
  for (const [kind, take] of Object.entries(LEASE_KINDS)) {
    it(`${kind}: every release ends definite, released exactly once`, async () => {
      // Acquired by a client with the default requestTimeout, released by the faulted one.
      const clean = recordingEdgeLock({}, bridge.redis()).edgelock;
      const { edgelock } = faulted();
      const name = `${prefix}${mode}:${kind}`;
      const results: string[] = [];
      const r = await cyclesUnderFaults(
        mode,
        CYCLES,
        async () => {
          const lease = await take(clean, name);
          if (!lease) throw new Error("not acquired");
          return edgelock.restoreLease(lease.toJSON());
        },
        async (lease) => results.push(await lease.release()),
      );
      report(kind, mode, r);
      expect(r).toMatchObject({ ambiguous: 0 });
      expect(r.faults).toBeGreaterThan(0);
      expect(new Set(results)).toEqual(new Set(["released"]));
    });
  }

  it("semaphore: handle release, release(permits), addPermits, trySetPermits end definite and count once", async () => {
    const clean = recordingEdgeLock({}, bridge.redis()).edgelock;
    const { edgelock } = faulted();
    const s = edgelock.getSemaphore(`${prefix}${mode}:sem`);
    await clean.getSemaphore(s.name).trySetPermits(3);
    /** A permit of the faulted client: its attempts may time out (then they are cancelled). */
    const take = async () => {
      const handle = await untilDone(() => s.tryAcquire({ waitTime: 5_000 }));
      if (!handle) throw new Error("no permit");
      return handle;
    };
    const handles = await cyclesUnderFaults(mode, CYCLES, take, (handle) => handle.release());
    const plain = await cyclesUnderFaults(mode, CYCLES, take, () => s.release());
    const add = await cyclesUnderFaults(
      mode,
      CYCLES,
      async () => {},
      (_, i) => s.addPermits(i % 2 === 0 ? 1 : -1),
    );
    const fresh = (i: number) => edgelock.getSemaphore(`${prefix}${mode}:set:${i}`);
    const set = await cyclesUnderFaults(
      mode,
      CYCLES,
      async (i) => fresh(i),
      async (semaphore) => expect(await semaphore.trySetPermits(2)).toBe(true),
    );
    for (let i = 0; i < CYCLES; i++) await fresh(i).delete();
    for (const [what, r] of Object.entries({ handles, plain, add, set })) report(what, mode, r);
    for (const r of [handles, plain, add, set]) expect(r).toMatchObject({ ambiguous: 0 });
    const expected = 3 + (CYCLES % 2);
    expect(await s.inspect()).toMatchObject({ available: expected, permits: expected });
  });

  it("latch: countDown and trySetCount end definite and count once", async () => {
    const { edgelock } = faulted();
    const latch = edgelock.getCountDownLatch(`${prefix}${mode}:latch`);
    await recordingEdgeLock({}, bridge.redis())
      .edgelock.getCountDownLatch(latch.name)
      .trySetCount(CYCLES);
    const left: number[] = [];
    const down = await cyclesUnderFaults(
      mode,
      CYCLES,
      async () => {},
      async () => left.push(await latch.countDown()),
    );
    const set = await cyclesUnderFaults(
      mode,
      CYCLES,
      async (i) => edgelock.getCountDownLatch(`${prefix}${mode}:latch-set:${i}`),
      async (fresh) => {
        expect(await fresh.trySetCount(1)).toBe(true);
        expect(await fresh.countDown()).toBe(0);
      },
    );
    report("countDown", mode, down);
    report("trySetCount", mode, set);
    expect(down).toMatchObject({ ambiguous: 0 });
    expect(set).toMatchObject({ ambiguous: 0 });
    // Each count-down applied once: it answered the count it left, CYCLES − 1 down to 0.
    expect(left).toEqual(Array.from({ length: CYCLES }, (_, i) => CYCLES - 1 - i));
    expect(await latch.getCount()).toBe(0);
  });
});

/** Retries `call` on every TransportError until it succeeds. */
async function untilDone<T>(call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof TransportError)) throw error;
    }
  }
}

describe("callers that retry every failed call never apply twice", () => {
  it("a 3-permit semaphore never has more than 3 holders and ends with exactly 3 permits", async () => {
    const name = `${prefix}retry:sem`;
    const clients = Array.from({ length: 8 }, () => faulted({ definiteWithin: 0 }));
    const clean = recordingEdgeLock({}, bridge.redis()).edgelock;
    await clean.getSemaphore(name).trySetPermits(3);
    bridge.bridge.setFaults({
      seed: 7,
      rules: [
        { action: "fail", mode: "503", rate: 0.05 },
        { action: "lose", mode: "503", rate: 0.2 },
        { action: "lose", mode: "hang", rate: 0.1, hangMs: 2 * REQUEST_TIMEOUT },
      ],
    });
    let holders = 0;
    let most = 0;
    let failedReleases = 0;
    await Promise.all(
      clients.map(async ({ edgelock }) => {
        const s = edgelock.getSemaphore(name);
        for (let i = 0; i < 6; i++) {
          const handle = await untilDone(() => s.tryAcquire({ waitTime: 5_000 }));
          if (!handle) continue;
          holders += 1;
          most = Math.max(most, holders);
          await new Promise((r) => setTimeout(r, 5));
          holders -= 1;
          // definiteWithin 0: a lost answer reaches the caller, who retries the same handle.
          await untilDone(() =>
            handle.release().catch((error: unknown) => {
              failedReleases += 1;
              throw error;
            }),
          );
        }
      }),
    );
    bridge.bridge.clearFaults();
    for (const c of clients) await Promise.all(c.background);
    expect(most).toBeLessThanOrEqual(3);
    expect(most).toBeGreaterThan(0);
    expect(failedReleases).toBeGreaterThan(0); // the retries were exercised
    const inspection = await clean.getSemaphore(name).inspect();
    expect(inspection).toMatchObject({ available: 3, permits: 3 });
  });

  it("a latch counted down by retrying callers opens exactly at 0", async () => {
    const name = `${prefix}retry:latch`;
    const parts = 24;
    const clients = Array.from({ length: 6 }, () => faulted({ definiteWithin: 0 }));
    // The waiter and the checks go through the shared bridge, without faults: an attempt of its
    // wait that failed would end the wait with that error (as it should), which is not what this
    // test is about.
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    await latch.trySetCount(parts);
    const opened = latch.await({ waitTime: 60_000 });
    bridge.bridge.setFaults({
      seed: 11,
      rules: [
        { action: "lose", mode: "503", rate: 0.2 },
        { action: "lose", mode: "hang", rate: 0.1, hangMs: 2 * REQUEST_TIMEOUT },
      ],
    });
    const left = new Map<number, number>();
    let failed = 0;
    await Promise.all(
      clients.map(async ({ edgelock }, c) => {
        const mine = edgelock.getCountDownLatch(name);
        for (let part = c; part < parts; part += clients.length) {
          const count = await untilDone(() =>
            mine.countDown({ idempotencyKey: `part-${part}` }).catch((error: unknown) => {
              failed += 1;
              throw error;
            }),
          );
          left.set(part, count);
        }
      }),
    );
    bridge.bridge.clearFaults();
    expect(failed).toBeGreaterThan(0);
    // Every part counted once: the counts left are parts − 1 … 0, each once.
    expect([...left.values()].sort((a, b) => b - a)).toEqual(
      Array.from({ length: parts }, (_, i) => parts - 1 - i),
    );
    expect(await opened).toBe(true);
    expect(await latch.getCount()).toBe(0);
    // A part repeated later counts once: it answers what it did the first time, and the latch
    // stays open.
    expect(await latch.countDown({ idempotencyKey: "part-0" })).toBe(left.get(0));
    expect(await latch.getCount()).toBe(0);
  });
});

describe("the background resend", () => {
  const settled = (events: LockEvent[]) =>
    events.filter((e): e is SettleEvent => e.type === "settle");

  it("after an ambiguous release, resends until answered: settle 'answered', applied once", async () => {
    const rec = faulted({ definiteWithin: 200 });
    const lock = rec.edgelock.getLock(`${prefix}bg:answered`);
    const first = await lock.tryLock({ leaseTime: 10_000 });
    if (!first) throw new Error("not acquired");
    const second = await lock.tryLock({ leaseTime: 10_000, owner: first.owner });
    if (!second) throw new Error("not re-entered");
    // Every answer lost for as long as the call lasts.
    bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "hang", hangMs: 1_000 }] });
    const started = Date.now();
    const error = await second.release().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "TRANSPORT", ambiguous: true });
    expect((error as Error).message).toMatch(
      /definiteWithin \(200 ms\) has passed; still resending/,
    );
    // Thrown once definiteWithin (plus the last copy's own limit) had passed.
    expect(Date.now() - started).toBeLessThan(200 + REQUEST_TIMEOUT + 1_500);
    expect(settled(rec.events)).toEqual([]);
    bridge.bridge.clearFaults();
    const event = await rec.until((e) => e.type === "settle");
    expect(event).toMatchObject({ operation: "release", outcome: "answered", name: lock.name });
    expect(event.requests).toBeGreaterThan(2);
    // Applied once, whatever number of copies reached Redis: one hold of two is left.
    expect(await lock.getHoldCount(first.owner)).toBe(1);
    expect(await second.release()).toBe("still-held");
    expect(await first.release()).toBe("released");
    await Promise.all(rec.background);
  });

  it("stops at half the replay window: settle 'unknown' with the last error", async () => {
    const rec = faulted({ replayWindow: 1_000, definiteWithin: 100 });
    const s = rec.edgelock.getSemaphore(`${prefix}bg:unknown`);
    await s.trySetPermits(1);
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "503" }] });
    const started = Date.now();
    await expect(s.addPermits(1)).rejects.toMatchObject({ ambiguous: true });
    const event = (await rec.until((e) => e.type === "settle")) as SettleEvent;
    const took = Date.now() - started;
    expect(event).toMatchObject({ operation: "addPermits", outcome: "unknown" });
    expect(event.error).toBeInstanceOf(TransportError);
    // The last copy goes out just before half the window (500 ms) and fails at once.
    expect(took).toBeGreaterThanOrEqual(450);
    expect(took).toBeLessThan(500 + REQUEST_TIMEOUT + 500);
    bridge.bridge.clearFaults();
    expect(await s.availablePermits()).toBe(1); // every copy failed before Redis
    await Promise.all(rec.background);
  });

  it("a background copy that Redis refuses ends with settle 'refused'", async () => {
    const rec = faulted({ definiteWithin: 100 });
    const name = `${prefix}bg:refused`;
    const lease = await rec.edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    // Every copy fails before Redis while the call lasts.
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "503" }] });
    await expect(lease.release()).rejects.toMatchObject({ ambiguous: true });
    // Meanwhile the name became a STRING: the next copy gets WRONGTYPE, a definite refusal.
    await raw.set(name, "not a lock");
    bridge.bridge.clearFaults();
    const event = (await rec.until((e) => e.type === "settle")) as SettleEvent;
    expect(event).toMatchObject({ operation: "release", outcome: "refused" });
    expect(event.error).toMatchObject({ code: "TRANSPORT", ambiguous: false });
    expect(String(await raw.get(name))).toBe("not a lock");
    await raw.del(name);
    await Promise.all(rec.background);
  });

  it("a healthy but slow answer is waited for: one request, no extra copy", async () => {
    const rec = faulted();
    const lock = rec.edgelock.getLock(`${prefix}bg:slow`);
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    // 30 ms of latency: below the third of requestTimeout (50 ms) after which a copy is sent.
    bridge.bridge.setFaults({ delayMs: 30 });
    expect(await lease.release()).toBe("released");
    const release = rec.events.find((e) => e.type === "release");
    expect(release?.requests).toBe(1);
  });

  it("a definite failure is thrown at once, without resends or background work", async () => {
    const c = counting();
    const rec = recordingEdgeLock({}, c.redis as Redis);
    const name = `${prefix}bg:definite`;
    const latch = rec.edgelock.getCountDownLatch(name);
    await rec.edgelock.getLock(name).tryLock({ leaseTime: 5_000 }); // a HASH: not a latch
    await rec.edgelock.getCountDownLatch(`${name}:warm`).countDown(); // the script is cached
    const before = c.calls();
    const error = await latch.countDown().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "TRANSPORT", ambiguous: false });
    expect(c.calls() - before).toBe(1);
    expect(rec.background).toEqual([]);
    await rec.edgelock.getLock(name).forceUnlock();
  });
});

describe("options", () => {
  const redis = new Redis({ url: "http://127.0.0.1:1", token: "unused" }); // never called

  it("definiteWithin defaults to 3 × requestTimeout, at most half the replay window", () => {
    expect(new EdgeLock({ redis }).definiteWithin).toBe(9_000);
    expect(new EdgeLock({ redis, requestTimeout: 200 }).definiteWithin).toBe(600);
    expect(new EdgeLock({ redis, replayWindow: 4_000 }).definiteWithin).toBe(2_000);
    expect(new EdgeLock({ redis, definiteWithin: 0 }).definiteWithin).toBe(0);
    expect(new EdgeLock({ redis, definiteWithin: 15_000 }).definiteWithin).toBe(15_000);
  });

  it("definiteWithin past half the replay window, or not an integer ms ≥ 0, is refused", () => {
    expect(() => new EdgeLock({ redis, definiteWithin: 15_001 })).toThrow(
      /`definiteWithin` must be at most half of `replayWindow` \(15000 ms\)/,
    );
    expect(() => new EdgeLock({ redis, replayWindow: 2_000, definiteWithin: 1_001 })).toThrow(
      RangeError,
    );
    expect(() => new EdgeLock({ redis, definiteWithin: -1 })).toThrow(RangeError);
    expect(() => new EdgeLock({ redis, definiteWithin: 1.5 })).toThrow(RangeError);
    expect(() => new EdgeLock({ redis, definiteWithin: "9000" as never })).toThrow(TypeError);
  });

  it("countDown's idempotencyKey is a string of 1–200 characters, checked before any request", async () => {
    const c = counting();
    const latch = recordingEdgeLock({}, c.redis as Redis).edgelock.getCountDownLatch(
      `${prefix}opt:latch`,
    );
    await expect(latch.countDown({ idempotencyKey: "" })).rejects.toThrow(RangeError);
    await expect(latch.countDown({ idempotencyKey: "x".repeat(201) })).rejects.toThrow(
      /`idempotencyKey` must be 1 to 200 characters/,
    );
    await expect(latch.countDown({ idempotencyKey: 7 as never })).rejects.toThrow(TypeError);
    await expect(latch.countDown({ key: "a" } as never)).rejects.toThrow(/unknown option `key`/);
    expect(c.calls()).toBe(0);
  });

  it("a permit handle's release refused by the over-release guard can be called again", async () => {
    const { edgelock } = faulted();
    const s = edgelock.getSemaphore(`${prefix}opt:over`);
    await s.trySetPermits(2);
    const handle = await s.tryAcquire();
    if (!handle) throw new Error("no permit");
    await s.addPermits(-1); // permits set 1, none available
    await s.release(); // one available again: the handle's permit would make 2 of 1
    await expect(handle.release()).rejects.toBeInstanceOf(OverReleaseError);
    expect(handle.released).toBe(false);
    await expect(handle.release()).rejects.toBeInstanceOf(OverReleaseError);
    expect(await handle.release({ overRelease: true })).toBe(2);
    expect(handle.released).toBe(true);
  });

  it("a permit handle's release is idempotent and validates its options", async () => {
    const { edgelock } = faulted();
    const s = edgelock.getSemaphore(`${prefix}opt:handle`);
    await s.trySetPermits(2);
    const handle = await s.tryAcquire({ permits: 2 });
    if (!handle) throw new Error("no permits");
    expect(handle).toMatchObject({ name: s.name, permits: 2, released: false });
    expect(() => handle.release({ overRelease: "yes" as never })).toThrow(TypeError);
    expect(await handle.release()).toBe(2);
    expect(handle.released).toBe(true);
    expect(await handle.release()).toBe(2); // the first answer, nothing given back again
    expect(await s.availablePermits()).toBe(2);
    const again = await s.acquire();
    expect(again.permits).toBe(1);
    await again[Symbol.asyncDispose]();
    expect(again.released).toBe(true);
    expect(await s.availablePermits()).toBe(2);
  });
});
