/**
 * Fencing tokens: strictly increasing per name across owners, re-entries, 16 contending clients
 * and a redis-server restart without persistence; a replayed grant keeps its token; a Redisson
 * JVM client's INCR of the same counter keeps the order (Redisson RedissonFencedLockTest's
 * sequence, generalized).
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import { startRedisServer } from "../../../demo/redis-server.js";
import { startBridge } from "../../../src/bridge/index.js";
import type { Lease } from "../../../src/index.js";
import { fencedLockAcquire } from "../../../src/lua.gen.js";
import { bridgeRedis, keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock, replayKeys } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
const tokenKey = (name: string) => `redisson_lock_token:{${name}}`;

afterEach(() => {
  bridge.bridge.clearFaults();
});

function tokenOf(lease: Lease | null): number {
  if (!lease || lease.fencingToken === undefined) throw new Error("no fenced lease");
  return lease.fencingToken;
}

describe("fenced lock", () => {
  it("every grant, re-entries included, gets a larger token; getToken and inspect report the last", async () => {
    const name = `${prefix}sequence`;
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getFencedLock(name);
    expect(await lock.getToken()).toBe(0);
    const a = await lock.lock({ leaseTime: 10_000 });
    const again = await lock.lock({ leaseTime: 10_000, owner: a.owner });
    // Typed: a fenced lock's leases always carry a token (checked at run time by tokenOf).
    expectTypeOf(again.fencingToken).toEqualTypeOf<number>();
    expect(tokenOf(again)).toBeGreaterThan(tokenOf(a));
    expect(Number.isSafeInteger(tokenOf(again))).toBe(true);
    expect(await lock.getToken()).toBe(tokenOf(again));
    const inspection = await lock.inspect();
    expect(inspection).toMatchObject({
      kind: "fenced-lock",
      locked: true,
      fencingToken: tokenOf(again),
      holders: [{ owner: a.owner, holdCount: 2 }],
    });
    expect(await lock.tryLock()).toBeNull(); // another owner: busy, no token taken
    expect(await lock.getToken()).toBe(tokenOf(again));
    await again.release();
    await a.release();
    const b = await lock.lock({ leaseTime: 10_000 });
    expect(tokenOf(b)).toBeGreaterThan(tokenOf(again));
    // The token travels with the lease to another invocation.
    const restored = recordingEdgeLock().edgelock.restoreLease(JSON.stringify(b));
    expect(restored.fencingToken).toBe(tokenOf(b));
    expect(await restored.release()).toBe("released");
    // The counter stays (like Redisson's): the next holder must never get a lower token.
    expect(await raw.exists(name)).toBe(0);
    expect(Number(await raw.get(tokenKey(name)))).toBe(tokenOf(b));
  });

  it("10 000 grants by 16 clients: tokens unique and strictly increasing in the order of the holds", async () => {
    const name = `${prefix}many`;
    const clients = 16;
    const holdsPerClient = 25;
    const reentries = 24; // 1 + 24 grants per hold: 16 × 25 × 25 = 10 000
    const holds: number[][] = [];
    let inside = 0;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        const lock = recordingEdgeLock().edgelock.getFencedLock(name);
        for (let i = 0; i < holdsPerClient; i++) {
          const first = await lock.lock({ leaseTime: 30_000 });
          inside += 1;
          expect(inside).toBe(1);
          // Re-entries in parallel: grants the server orders among themselves.
          const more = await Promise.all(
            Array.from({ length: reentries }, () =>
              lock.lock({ leaseTime: 30_000, owner: first.owner }),
            ),
          );
          holds.push([tokenOf(first), ...more.map(tokenOf)]);
          await Promise.all(more.map((l) => l.release()));
          inside -= 1;
          expect(await first.release()).toBe("released");
        }
      }),
    );
    const all = holds.flat();
    expect(all).toHaveLength(10_000);
    expect(new Set(all).size).toBe(10_000);
    expect(holds[0]?.[0]).toBe(Math.min(...(holds[0] ?? [])));
    for (let i = 1; i < holds.length; i++) {
      // Every token of a hold is above every token of the hold before it.
      expect(Math.min(...(holds[i] ?? []))).toBeGreaterThan(Math.max(...(holds[i - 1] ?? [])));
      // Within a hold, the first grant (the acquire) came before its re-entries.
      expect(holds[i]?.[0]).toBe(Math.min(...(holds[i] ?? [])));
    }
  }, 120_000);

  it("tokens keep rising after redis-server restarts without persistence (the counter is lost)", async () => {
    const name = `${prefix}restart`;
    const token = randomBytes(16).toString("hex");
    const grant = async (redisUrl: string): Promise<number[]> => {
      const b = await startBridge({ redisUrl, token });
      try {
        const lock = recordingEdgeLock(
          {},
          bridgeRedis({}, { url: b.url, token }),
        ).edgelock.getFencedLock(name);
        const out: number[] = [];
        for (let i = 0; i < 50; i++) {
          const lease = await lock.lock({ leaseTime: 10_000 });
          out.push(tokenOf(lease));
          await lease.release();
        }
        return out;
      } finally {
        await b.close();
      }
    };
    const first = await startRedisServer();
    const before = await grant(first.url).finally(() => first.stop());
    const second = await startRedisServer();
    try {
      const after = await grant(second.url);
      const seq = [...before, ...after];
      for (let i = 1; i < seq.length; i++) expect(seq[i]).toBeGreaterThan(seq[i - 1] ?? 0);
      // A plain INCR counter would have started again at 1.
      expect(after[0]).toBeGreaterThan(before[before.length - 1] ?? 0);
    } finally {
      await second.stop();
    }
  }, 60_000);

  it("a Redisson JVM client's INCR of the counter between edgelock grants keeps the order", async () => {
    const name = `${prefix}jvm`;
    const lock = recordingEdgeLock().edgelock.getFencedLock(name);
    const a = await lock.lock({ leaseTime: 10_000 });
    await a.release();
    // RedissonFencedLock's token acquire: INCR of the same key (then its own HINCRBY).
    const jvm = Number(await raw.incr(tokenKey(name)));
    expect(jvm).toBe(tokenOf(a) + 1);
    const b = await lock.lock({ leaseTime: 10_000 });
    expect(tokenOf(b)).toBeGreaterThan(jvm);
    await b.release();
  });

  it("rejects a bad name before any request", () => {
    const rec = recordingEdgeLock();
    expect(() => rec.edgelock.getFencedLock("a{b}")).toThrow(/hash-tag/);
    expect(() => rec.edgelock.getFencedLock(42 as unknown as string)).toThrow(TypeError);
    expect(rec.events).toEqual([]);
  });
});

/*
 * Guards of the fencing token rule (lua/fenced-lock/acquire.lua): a counter that runs ahead of
 * the server clock still gives strictly increasing tokens (the `last + 1` side of the rule), and
 * a resent grant answers the token it granted, whatever the counter says by then.
 */
describe("fencing token guards", () => {
  it("tokens strictly increase when the counter is ahead of the server clock", async () => {
    const name = `${prefix}ahead`;
    // A day of microseconds ahead of the clock (Redis runs on this machine), as after the
    // server's clock went back.
    const ahead = Date.now() * 1_000 + 86_400_000_000;
    await raw.set(tokenKey(name), String(ahead));
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getFencedLock(name);
    const tokens: number[] = [];
    const first = await lock.lock({ leaseTime: 10_000 });
    tokens.push(tokenOf(first));
    const reentry = await lock.lock({ leaseTime: 10_000, owner: first.owner });
    tokens.push(tokenOf(reentry));
    await reentry.release();
    await first.release();
    for (let i = 0; i < 3; i++) {
      const next = await lock.lock({ leaseTime: 10_000 });
      tokens.push(tokenOf(next));
      await next.release();
    }
    expect(tokens[0]).toBeGreaterThan(ahead);
    for (let i = 1; i < tokens.length; i++) {
      expect(tokens[i]).toBeGreaterThan(tokens[i - 1] ?? Number.POSITIVE_INFINITY);
    }
    expect(tokens.every(Number.isSafeInteger)).toBe(true);
    expect(await lock.getToken()).toBe(tokens[tokens.length - 1]);
  });

  it("a resent grant answers the token it granted, not the counter's current value", async () => {
    const name = `${prefix}replay-moved`;
    const { edgelock } = recordingEdgeLock({}, bridge.redis());
    const lock = edgelock.getFencedLock(name);
    await (await lock.tryLock({ leaseTime: 1_000 }))?.release(); // scripts loaded
    // The grant applies, its answer is lost after 300 ms, and the client resends it.
    const injected = bridge.bridge.stats().faultsInjected;
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", hangMs: 300, match: "evalsha", times: 1 }],
    });
    const pending = lock.tryLock({ leaseTime: 10_000 });
    await expect.poll(() => raw.exists(name), { timeout: 2_000, interval: 5 }).toBe(1);
    const granted = Number(await raw.get(tokenKey(name)));
    // Meanwhile a Redisson JVM client takes a token on the same counter (its INCR).
    expect(Number(await raw.incr(tokenKey(name)))).toBe(granted + 1);
    const lease = await pending;
    expect(bridge.bridge.stats().faultsInjected).toBe(injected + 1);
    expect(tokenOf(lease)).toBe(granted);
    expect(await lock.getHoldCount(lease?.owner ?? "")).toBe(1);
    expect(await lease?.release()).toBe("released");
  });

  // A lease shorter than the replay window leaves a record per grant; a longer one leaves the
  // creating grant's answer to the HASH (its creating request and token).
  it.each([
    [10_000, "a record"],
    [60_000, "the HASH"],
  ])(
    "scripts: a replayed grant (creating or re-entering) answers its own token, whatever the counter did since (lease %i: from %s)",
    async (lease) => {
      const name = `${prefix}replay-script-${lease}`;
      const acquire = (owner: string, id: string) =>
        raw.eval(fencedLockAcquire.source, {
          keys: [
            name,
            ...replayKeys(name),
            `edgelock_waiting:{${name}}`,
            `edgelock_wake:{${name}}`,
            tokenKey(name),
          ],
          arguments: [String(lease), owner, "30000", id, "", "30000", "0", "1"],
        }) as Promise<number[]>;
      const created = "a".repeat(32);
      const reentered = "b".repeat(32);
      const first = await acquire("o:1", created);
      expect(first[0]).toBe(1);
      const token = first[3] ?? 0;
      expect(await acquire("o:1", created)).toEqual(first);
      const again = await acquire("o:1", reentered);
      expect(again[0]).toBe(1);
      expect(again[1]).toBe(2);
      const reentryToken = again[3] ?? 0;
      expect(reentryToken).toBeGreaterThan(token);
      // A Redisson JVM client takes a token on the same counter (its INCR) before the copies land.
      expect(Number(await raw.incr(tokenKey(name)))).toBe(reentryToken + 1);
      expect((await acquire("o:1", reentered))[3]).toBe(reentryToken);
      expect((await acquire("o:1", created))[3]).toBe(token);
      // The copies took nothing: still two holds, the counter where the JVM client left it.
      expect(Number(await raw.hGet(name, "o:1"))).toBe(2);
      expect(Number(await raw.get(tokenKey(name)))).toBe(reentryToken + 1);
      await raw.del([name, `edgelock_epoch:{${name}}`]);
    },
  );
});
