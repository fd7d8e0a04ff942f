/**
 * Guards of the fencing token rule (lua/fenced-lock/acquire.lua): a counter that runs ahead of
 * the server clock still gives strictly increasing tokens (the `last + 1` side of the rule), and
 * a resent grant answers the token it granted, whatever the counter says by then.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Lease } from "../../../src/index.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});
const tokenKey = (name: string) => `redisson_lock_token:{${name}}`;

function tokenOf(lease: Lease | null): number {
  if (!lease || lease.fencingToken === undefined) throw new Error("no fenced lease");
  return lease.fencingToken;
}

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
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", hangMs: 300, match: "evalsha", times: 1 }],
    });
    const pending = lock.tryLock({ leaseTime: 10_000 });
    await expect.poll(() => raw.exists(name), { timeout: 2_000, interval: 5 }).toBe(1);
    const granted = Number(await raw.get(tokenKey(name)));
    // Meanwhile a Redisson JVM client takes a token on the same counter (its INCR).
    expect(Number(await raw.incr(tokenKey(name)))).toBe(granted + 1);
    const lease = await pending;
    expect(bridge.bridge.stats().faultsInjected).toBe(1);
    expect(tokenOf(lease)).toBe(granted);
    expect(await lock.getHoldCount(lease?.owner ?? "")).toBe(1);
    expect(await lease?.release()).toBe("released");
  });
});
