/**
 * Acquires end definite: an attempt whose answer is lost or hangs sends its own request again
 * (same request id, replay-safe) until Redis answers or its wait budget ends, so at 20 % lost
 * answers no acquire of any kind throws an ambiguous TransportError, and each takes what it
 * takes once. A healthy acquire still sends exactly one request. A copy still on its way after
 * a busy answer is cancelled, so it cannot take the lock later for a caller that moved on.
 *
 * Cycle counts: `DEFINITE_CYCLES` per kind and drop mode (default 15 in `npm test`).
 */
import type { Redis } from "@upstash/redis";
import { afterEach, describe, expect, it } from "vitest";
import type { FaultRule } from "../../../src/bridge/index.js";
import { type EdgeLock, type RedisLike, TransportError } from "../../../src/index.js";
import { splitBilled } from "../../../src/transport/billed.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const bridge = usePrivateBridge();
const raw = useRawRedis();
afterEach(() => {
  bridge.bridge.clearFaults();
});

const CYCLES = Number(process.env.DEFINITE_CYCLES ?? 15);
const MODES = ["close", "503", "hang"] as const;
type Mode = (typeof MODES)[number];
const REQUEST_TIMEOUT = 300;
/** Each acquire's wait budget: the time its attempts may resend in. */
const WAIT = 3_000;

/** 20 % of requests applied by Redis, then their answer lost in `mode`. */
function lose(mode: Mode, seed: number): { rules: FaultRule[]; seed: number } {
  return { seed, rules: [{ action: "lose", mode, rate: 0.2, hangMs: 2 * REQUEST_TIMEOUT }] };
}

/**
 * One acquire of each kind on a fresh name, all waiting up to {@link WAIT}; each returns what
 * it took, and how to give it back and check that it was taken once.
 */
const KINDS: Record<
  string,
  (e: EdgeLock, name: string) => Promise<{ once(): Promise<boolean>; free(): Promise<unknown> }>
> = {
  reentrant: async (e, n) => {
    const lease = await e.getLock(n).tryLock({ waitTime: WAIT, leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    return {
      once: async () => (await e.getLock(n).getHoldCount(lease.owner)) === 1,
      free: () => lease.release(),
    };
  },
  fair: async (e, n) => {
    const lease = await e.getFairLock(n).tryLock({ waitTime: WAIT, leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    return {
      once: async () => (await e.getFairLock(n).getHoldCount(lease.owner)) === 1,
      free: () => lease.release(),
    };
  },
  fenced: async (e, n) => {
    const lease = await e.getFencedLock(n).tryLock({ waitTime: WAIT, leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    return {
      once: async () => (await e.getFencedLock(n).getHoldCount(lease.owner)) === 1,
      free: () => lease.release(),
    };
  },
  write: async (e, n) => {
    const lock = e.getReadWriteLock(n).writeLock();
    const lease = await lock.tryLock({ waitTime: WAIT, leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    return {
      once: async () => (await lock.getHoldCount(lease.owner)) === 1,
      free: () => lease.release(),
    };
  },
  semaphore: async (e, n) => {
    const s = e.getSemaphore(n);
    const handle = await s.tryAcquire({ waitTime: WAIT });
    if (!handle) throw new Error("no permit");
    return { once: async () => (await s.availablePermits()) === 1, free: () => handle.release() };
  },
  permit: async (e, n) => {
    const s = e.getPermitExpirableSemaphore(n);
    const lease = await s.tryAcquire({ waitTime: WAIT, leaseTime: 10_000 });
    if (!lease) throw new Error("no permit");
    return { once: async () => (await s.availablePermits()) === 1, free: () => lease.release() };
  },
};

/** What a kind needs set before it can be acquired (fault-free). */
async function prepare(e: EdgeLock, kind: string, name: string): Promise<void> {
  if (kind === "semaphore") await e.getSemaphore(name).trySetPermits(2);
  if (kind === "permit") await e.getPermitExpirableSemaphore(name).trySetPermits(2);
}

describe.each(MODES)("20 %% of answers lost in mode %s", (mode) => {
  for (const [kind, take] of Object.entries(KINDS)) {
    it(`${kind}: no acquire ends ambiguous; each takes once`, async () => {
      const clean = recordingEdgeLock({}, bridge.redis()).edgelock;
      const { edgelock, background } = recordingEdgeLock(
        { requestTimeout: REQUEST_TIMEOUT },
        bridge.redis(),
      );
      const before = bridge.bridge.stats().faultsInjected;
      const ambiguous: string[] = [];
      for (let i = 0; i < CYCLES; i++) {
        const name = `${prefix}${mode}:${kind}:${i}`;
        await prepare(clean, kind, name);
        bridge.bridge.setFaults(lose(mode, i + 1));
        let taken: Awaited<ReturnType<typeof take>> | undefined;
        try {
          taken = await take(edgelock, name);
        } catch (error) {
          if (!(error instanceof TransportError)) throw error;
          ambiguous.push(`cycle ${i}: ${error.message}`);
        } finally {
          bridge.bridge.clearFaults();
        }
        if (taken) {
          expect(await taken.once()).toBe(true);
          await taken.free();
        }
      }
      await Promise.all(background);
      expect(ambiguous).toEqual([]);
      expect(bridge.bridge.stats().faultsInjected - before).toBeGreaterThan(0);
    });
  }

  it("latch: no await ends ambiguous", async () => {
    const clean = recordingEdgeLock({}, bridge.redis()).edgelock;
    const { edgelock } = recordingEdgeLock({ requestTimeout: REQUEST_TIMEOUT }, bridge.redis());
    const failures: string[] = [];
    for (let i = 0; i < CYCLES; i++) {
      const latch = clean.getCountDownLatch(`${prefix}${mode}:latch:${i}`);
      if (i % 2 === 1) await latch.trySetCount(1); // the others are open (no key)
      bridge.bridge.setFaults(lose(mode, i + 1));
      try {
        const opened = await edgelock.getCountDownLatch(latch.name).await({ waitTime: 0 });
        expect(opened).toBe(i % 2 === 0);
      } catch (error) {
        if (!(error instanceof TransportError)) throw error;
        failures.push(`cycle ${i}: ${error.message}`);
      } finally {
        bridge.bridge.clearFaults();
      }
      await latch.delete();
    }
    expect(failures).toEqual([]);
  });
});

/**
 * A client on the fault bridge whose next EVALSHA, once armed with `delayNext(ms)`, leaves
 * `ms` late (a request held up on its way to Redis); `delayNext` resolves when Redis has
 * answered that request.
 */
function delaying(): { redis: RedisLike; delayNext(ms: number): Promise<unknown> } {
  const real = bridge.redis();
  let armed: { ms: number; answered: (reply: unknown) => void } | undefined;
  return {
    redis: {
      eval: (script, keys, args) => real.eval(script, keys, args),
      evalsha: (sha, keys, args) => {
        const delay = armed;
        armed = undefined;
        if (!delay) return real.evalsha(sha, keys, args);
        return new Promise((resolve, reject) => {
          setTimeout(() => {
            const sent = real.evalsha(sha, keys, args);
            sent.then(delay.answered, delay.answered);
            sent.then(resolve, reject);
          }, delay.ms);
        });
      },
    },
    delayNext: (ms) =>
      new Promise((answered) => {
        armed = { ms, answered };
      }),
  };
}

describe("a healthy acquire sends one request", () => {
  it("every kind, warm client: one request at the bridge per acquire", async () => {
    const rec = recordingEdgeLock({}, bridge.redis());
    const e = rec.edgelock;
    const kinds = Object.entries(KINDS);
    // Warm: every script cached, and the client's round-trip estimate made.
    for (const [kind, take] of kinds) {
      const name = `${prefix}warm:${kind}`;
      await prepare(e, kind, name);
      await (await take(e, name)).free();
    }
    for (const [kind, take] of kinds) {
      const name = `${prefix}healthy:${kind}`;
      await prepare(e, kind, name);
      const before = bridge.bridge.stats().byCommand.evalsha ?? 0;
      const taken = await take(e, name);
      expect((bridge.bridge.stats().byCommand.evalsha ?? 0) - before, kind).toBe(1);
      expect(rec.events.filter((ev) => ev.type === "acquire").at(-1)?.requests, kind).toBe(1);
      await taken.free();
    }
  });
});

describe("a copy still on its way after a busy answer", () => {
  it("is cancelled: when it reaches Redis after the lock was freed, it takes nothing", async () => {
    const name = `${prefix}late-copy`;
    const holder = recordingEdgeLock({}, bridge.redis()).edgelock;
    const held = await holder.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!held) throw new Error("not acquired");
    const client = delaying();
    const rec = recordingEdgeLock({ requestTimeout: REQUEST_TIMEOUT }, client.redis as Redis);
    await (
      await rec.edgelock.getLock(`${prefix}late-warm`).tryLock({ leaseTime: 1_000 })
    )?.release();
    // The attempt's first request reaches Redis 600 ms late; its copy (after hedgeAfter: 100 ms)
    // answers busy at once.
    const late = client.delayNext(600);
    expect(await rec.edgelock.getLock(name).tryLock({ leaseTime: 10_000 })).toBeNull();
    expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBe(2);
    // The holder lets go before the late request arrives; the cancel's tombstone ("C") was
    // written first, so the late request takes nothing.
    expect(await held.release()).toBe("released");
    await Promise.all(rec.background);
    expect(Object.values(await lateRecords(name))).toContain("C");
    // What the late copy answered (the script's reply inside the billing wrapper's).
    expect(splitBilled(await late)?.reply).toEqual([-1, 0, 0]);
    expect(await raw.exists(name)).toBe(0);
  });
});

/** The replay records of `name` (lua/lib/replay.lua), by key. */
async function lateRecords(name: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const key of await raw.keys(`edgelock_replay:{${name}}:*`)) {
    out[String(key)] = String(await raw.get(key));
  }
  return out;
}

describe("when a copy goes", () => {
  it("not while this client was stalled: an answer that waited for the event loop is read first", async () => {
    const rec = recordingEdgeLock({}, bridge.redis());
    const lock = rec.edgelock.getLock(`${prefix}stall`);
    // Warm: the script cached, the round-trip estimate made from 4 answers (hedgeAfter: its
    // floor, 100 ms).
    for (let i = 0; i < 2; i++) await (await lock.tryLock({ leaseTime: 1_000 }))?.release();
    const before = bridge.bridge.stats().byCommand.evalsha ?? 0;
    const pending = lock.tryLock({ leaseTime: 1_000 });
    // The event loop blocked for 300 ms, past hedgeAfter: the copy's timer fires late, which
    // is a stall of this client, not a late answer.
    const until = Date.now() + 300;
    while (Date.now() < until) {
      // busy: nothing else runs
    }
    const lease = await pending;
    if (!lease) throw new Error("not acquired");
    expect((bridge.bridge.stats().byCommand.evalsha ?? 0) - before).toBe(1);
    expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBe(1);
    await lease.release();
  });

  it("at the round trip measured on its REST URL from a new client's first request (a client per invocation)", async () => {
    // Earlier clients on this URL (the bridge's) have answered: here, four answers.
    const warm = recordingEdgeLock({}, bridge.redis()).edgelock.getLock(`${prefix}url-warm`);
    for (let i = 0; i < 2; i++) await (await warm.tryLock({ leaseTime: 1_000 }))?.release();
    // A new client whose first request is applied and its answer hangs: its copy goes after the
    // URL's hedgeAfter (100 ms on this bridge), not after a third of requestTimeout (1 s).
    const rec = recordingEdgeLock({ requestTimeout: 3_000 }, bridge.redis());
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1, hangMs: 5_000 }],
    });
    const started = Date.now();
    const lease = await rec.edgelock.getLock(`${prefix}url-new`).tryLock({ leaseTime: 5_000 });
    const took = Date.now() - started;
    if (!lease) throw new Error("not acquired");
    expect(took).toBeLessThan(700);
    expect(bridge.bridge.stats().faultsInjected).toBeGreaterThan(0);
    expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBe(2);
    expect(await rec.edgelock.getLock(lease.name).getHoldCount(lease.owner)).toBe(1);
    await lease.release();
  });

  it("after a third of requestTimeout on a client that has seen too few answers to measure", async () => {
    const client = delaying();
    const rec = recordingEdgeLock({ requestTimeout: 3_000 }, client.redis as Redis);
    // The first request of a fresh client leaves 1.5 s late: its copy goes after 1 s (a third of
    // requestTimeout, until 3 answers came).
    const late = client.delayNext(1_500);
    const started = Date.now();
    const lease = await rec.edgelock.getLock(`${prefix}fresh`).tryLock({ leaseTime: 5_000 });
    const took = Date.now() - started;
    if (!lease) throw new Error("not acquired");
    expect(took).toBeGreaterThanOrEqual(1_000);
    expect(took).toBeLessThan(1_500);
    expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBeGreaterThanOrEqual(
      2,
    );
    await late;
    expect(await rec.edgelock.getLock(lease.name).getHoldCount(lease.owner)).toBe(1);
    await lease.release();
  });
});

/**
 * A waiter's client on the fault bridge whose first hand-off-asking attempt (a subscribed
 * waiter's, ARGV[6] not 0) leaves `attemptMs` late, and every cancel of that attempt's request
 * id `cancelMs` late: the order in which a release's hand-off and that cancel reach Redis is
 * then fixed, hand-off first. Only EVALSHAs are held up: the EVAL that follows a NOSCRIPT (the
 * cancel script is not cached yet) goes at once, within the request's time limit.
 */
function lateCancel(attemptMs: number, cancelMs: number): RedisLike {
  const real = bridge.redis();
  let id: string | undefined;
  const delayFor = (args: (string | number)[]): number => {
    const [, second, third, waiter, , handOff] = args.map(String);
    if (id === undefined && third && waiter && handOff && handOff !== "0") {
      id = third;
      return attemptMs;
    }
    return id !== undefined && second === id ? cancelMs : 0;
  };
  return {
    eval: (script, keys, args) => real.eval(script, keys, args),
    evalsha: async (sha, keys, args) => {
      const ms = delayFor(args);
      if (ms > 0) await new Promise((r) => setTimeout(r, ms));
      return real.evalsha(sha, keys, args);
    },
    subscribe: (channels) => real.subscribe(channels),
  };
}

describe("a hand-off to a busy attempt that was cancelled after its copies went out", () => {
  // The attempt that registers the waiter for a hand-off leaves 600 ms late, so its copy
  // (hedged after a third of the 1 s requestTimeout) answers busy and the attempt is cancelled in the background; the
  // cancel reaches Redis only after the release has handed the waiter the permit under that
  // attempt's id. Held on the message, the permit would be counted twice (the waiter's, and
  // the pool's once the cancel gave it back): the waiter takes it over with an attempt instead.
  const KINDS_HANDED = {
    semaphore: async (e: EdgeLock, name: string) => {
      await e.getSemaphore(name).trySetPermits(1);
      const held = await e.getSemaphore(name).tryAcquire();
      return { release: () => held?.release() };
    },
    permit: async (e: EdgeLock, name: string) => {
      await e.getPermitExpirableSemaphore(name).trySetPermits(1);
      const held = await e.getPermitExpirableSemaphore(name).tryAcquire({ leaseTime: 10_000 });
      return { release: () => held?.release() };
    },
  };
  for (const [kind, hold] of Object.entries(KINDS_HANDED)) {
    it(`${kind}: the waiter takes the permit over with an attempt; no permit is counted twice`, async () => {
      const name = `${prefix}cancelled-hand-off:${kind}`;
      const owner = recordingEdgeLock({}, bridge.redis()).edgelock;
      const held = await hold(owner, name);
      const rec = recordingEdgeLock({ requestTimeout: 1_000 }, lateCancel(600, 800) as Redis);
      const pending =
        kind === "semaphore"
          ? rec.edgelock.getSemaphore(name).tryAcquire({ waitTime: 10_000 })
          : rec.edgelock
              .getPermitExpirableSemaphore(name)
              .tryAcquire({ waitTime: 10_000, leaseTime: 10_000 });
      // Busy, subscribed, busy again (its copy's answer): registered and listening.
      await rec.until((_e, all) => all.filter((e) => e.type === "waiting").length === 2);
      await held.release();
      const got = await pending;
      expect(got).not.toBeNull();
      // The cancel has reached Redis, after the hand-off: it found the permit taken over.
      await Promise.all(rec.background);
      const available =
        kind === "semaphore"
          ? () => owner.getSemaphore(name).availablePermits()
          : () => owner.getPermitExpirableSemaphore(name).availablePermits();
      expect(await available()).toBe(0);
      // Attempt, subscription, the late attempt and its copy, the take-over attempt.
      expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBe(5);
      await got?.release();
      expect(await available()).toBe(1);
    });
  }
});
