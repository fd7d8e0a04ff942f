/**
 * RedLock over 5 independent endpoints (each its own redis-server and bridge): the quorum table
 * over all 32 subsets of unavailable or pre-occupied nodes, validity, per-endpoint time limits,
 * release on every endpoint after a failed round (those that did not answer included), renewal
 * on a quorum only, retries, validation.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { driftOf, LeaseLostError, quorumOf, RedLock } from "../../../src/index.js";
import { decide } from "../../../src/locks/redlock/quorum.js";
import { useEndpoints } from "../../support/endpoints.js";
import { keyPrefix } from "../../support/env.js";

const prefix = keyPrefix();
const nodes = useEndpoints(5);
/** Background work (cancels of unanswered votes) of the test's clients: done before the next. */
const background: Promise<unknown>[] = [];
afterEach(async () => {
  for (const node of nodes) node.bridge.clearFaults();
  await Promise.allSettled(background.splice(0));
});

const redlockOn = (name: string, options?: ConstructorParameters<typeof RedLock>[1]) =>
  new RedLock(
    nodes.map((n) => n.edgelock({ waitUntil: (p) => background.push(p) }).getLock(name)),
    options,
  );
/** Owners holding `name` on each node (HASH fields other than ours). */
const holdersOn = (name: string) =>
  Promise.all(
    nodes.map(async (n) =>
      Object.keys(await n.raw.hGetAll(name)).filter((f) => !f.startsWith("edgelock:")),
    ),
  );

describe("RedLock", () => {
  it("quorum arithmetic and the distlock page's drift", () => {
    expect([1, 2, 3, 4, 5].map(quorumOf)).toEqual([1, 2, 2, 3, 3]);
    expect(driftOf(10_000)).toBe(102);
    expect(decide(3, 5, 10_000, 50)).toEqual({ held: true, validity: 10_000 - 50 - 102 });
    expect(decide(2, 5, 10_000, 50).held).toBe(false);
    expect(decide(5, 5, 1_000, 990).held).toBe(false); // no validity left
  });

  it("all 32 subsets of unavailable or pre-occupied nodes: acquires iff at least 3 are free and reachable, leaving no key behind otherwise", async () => {
    const results: string[] = [];
    for (let mask = 0; mask < 32; mask++) {
      const name = `${prefix}quorum:${mask}`;
      const foreign = nodes.map((n) => n.edgelock());
      const bad = nodes.map((_, i) => (mask >> i) & 1);
      const blocked: (() => Promise<void>)[] = [];
      for (const [i, node] of nodes.entries()) {
        if (!bad[i]) continue;
        if (i % 2 === 0) {
          node.bridge.setFaults({ rules: [{ action: "fail", mode: "503" }] });
        } else {
          const held = await foreign[i]?.getLock(name).lock({ leaseTime: 30_000 });
          blocked.push(async () => void (await held?.release()));
        }
      }
      const free = bad.filter((b) => b === 0).length;
      const lease = await redlockOn(name, { endpointTimeout: 2_000 }).tryLock({
        leaseTime: 10_000,
      });
      results.push(`${mask}:${free}:${lease ? "held" : "-"}`);
      expect(lease !== null, `mask ${mask.toString(2)}`).toBe(free >= 3);
      const ours = (await holdersOn(name)).flat().filter((o) => o.startsWith("redlock:"));
      if (lease) {
        // Decided at the quorum; the other grants join the lease once every endpoint has voted:
        // a failing endpoint's acquire is resent until its endpointTimeout (2 s) runs out.
        expect(lease.members.length).toBeGreaterThanOrEqual(3);
        await expect.poll(() => lease.members.length, { timeout: 6_000 }).toBe(free);
        expect(ours.length).toBeGreaterThanOrEqual(3);
        expect(await lease.release()).toBe("released");
      } else {
        expect(ours).toEqual([]);
      }
      for (const node of nodes) node.bridge.clearFaults();
      await Promise.all(blocked.map((b) => b()));
      expect((await holdersOn(name)).flat()).toEqual([]);
    }
    expect(results.filter((r) => r.endsWith("held"))).toHaveLength(16); // C(5,0..2) = 1+5+10
  }, 120_000);

  it("expiresAt is the computed validity: start + leaseTime − drift, within every node's TTL", async () => {
    const name = `${prefix}validity`;
    const started = Date.now();
    const lease = await redlockOn(name).tryLock({ leaseTime: 5_000 });
    if (!lease) throw new Error("not acquired");
    await expect.poll(() => lease.members.length).toBe(5); // the late grants joined
    expect(lease.expiresAt).toBeLessThanOrEqual(started + 5_000 - driftOf(5_000) + 5);
    expect(lease.expiresAt).toBeGreaterThan(Date.now() + 4_000);
    for (const node of nodes) {
      const ttl = await node.raw.pTTL(name);
      expect(Date.now() + ttl).toBeGreaterThanOrEqual(lease.expiresAt);
    }
    expect(() => JSON.stringify(lease)).toThrow(/cannot be serialized/);
    await lease.release();
  });

  it("a wall clock stepped back while a round or a renewal runs leaves expiresAt no later than Redis's expiry", async () => {
    // The one fake here: this process's wall clock, stepped back by an hour while the round
    // (then the renewal) is on its way, as an NTP step would; the monotonic clock runs on.
    const name = `${prefix}clock-step`;
    const wall = Date.now.bind(Date);
    let offset = 0;
    const clock = vi.spyOn(Date, "now").mockImplementation(() => wall() + offset);
    const stepBack = () => setTimeout(() => (offset -= 3_600_000), 40);
    try {
      for (const node of nodes) node.bridge.setFaults({ delayMs: 120 });
      stepBack();
      const lease = await redlockOn(name).tryLock({ leaseTime: 5_000 });
      if (!lease) throw new Error("not acquired");
      expect(lease.expiresAt).toBeLessThanOrEqual(Date.now() + 5_000 - driftOf(5_000));
      expect(lease.expiresAt).toBeGreaterThan(Date.now() + 4_000);
      await expect.poll(() => lease.members.length).toBe(5); // the late grants joined
      stepBack();
      await lease.renew(8_000);
      expect(lease.expiresAt).toBeLessThanOrEqual(Date.now() + 8_000 - driftOf(8_000));
      expect(lease.expiresAt).toBeGreaterThan(Date.now() + 7_000);
      for (const node of nodes) node.bridge.clearFaults();
      expect(await lease.release()).toBe("released");
    } finally {
      clock.mockRestore();
    }
  });

  it("a node that does not answer votes no after endpointTimeout; its late acquire is undone", async () => {
    const name = `${prefix}hang`;
    nodes[0]?.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1, hangMs: 5_000 }],
    });
    const locks = nodes.map((n) =>
      n.edgelock({ waitUntil: (p) => background.push(p) }).getLock(name),
    );
    // Warm every node's script cache so the hang hits the acquire itself.
    for (const lock of locks.slice(1)) await (await lock.tryLock({ leaseTime: 1_000 }))?.release();
    const started = Date.now();
    const lease = await new RedLock(locks, { endpointTimeout: 300 }).tryLock({ leaseTime: 10_000 });
    expect(Date.now() - started).toBeLessThan(2_000);
    await expect.poll(() => lease?.members.length).toBe(4);
    await Promise.all(background);
    expect(background.length).toBeGreaterThanOrEqual(1);
    // Applied at Redis but unanswered: the cancel took it back.
    await expect.poll(() => nodes[0]?.raw.exists(name), { timeout: 5_000 }).toBe(0);
    expect(await lease?.release()).toBe("released");
  });

  it("renewal holds on a quorum and is lost below it", async () => {
    const name = `${prefix}renew`;
    const lease = await redlockOn(name).tryLock({ leaseTime: 2_000 });
    if (!lease) throw new Error("not acquired");
    await expect.poll(() => lease.members.length).toBe(5); // the late grants joined
    await nodes[0]?.raw.del(name);
    await nodes[1]?.raw.del(name);
    const before = lease.expiresAt;
    await lease.renew(5_000); // 3 of 5 still hold it
    expect(lease.expiresAt).toBeGreaterThan(before);
    expect(lease.expiresAt).toBeLessThanOrEqual(Date.now() + 5_000 - driftOf(5_000));
    await nodes[2]?.raw.del(name);
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
    const outcomes = await lease.releaseAll();
    expect(outcomes.map((o) => ("result" in o ? o.result : "error")).sort()).toEqual([
      "expired",
      "expired",
      "expired",
      "released",
      "released",
    ]);
  });

  it("keepAlive 'timer' keeps it on a quorum past its lease", async () => {
    const name = `${prefix}timer`;
    const lease = await redlockOn(name).tryLock({ leaseTime: 600, keepAlive: "timer" });
    if (!lease) throw new Error("not acquired");
    await new Promise((r) => setTimeout(r, 1_500));
    expect(lease.signal.aborted).toBe(false);
    expect((await holdersOn(name)).filter((h) => h.length > 0)).toHaveLength(5);
    expect(await lease.release()).toBe("released");
  });

  it("a failed round is retried after a random delay until waitTime is spent", async () => {
    const name = `${prefix}retry`;
    const holders = await Promise.all(
      nodes.slice(0, 3).map((n) => n.edgelock().getLock(name).lock({ leaseTime: 30_000 })),
    );
    const pending = redlockOn(name, { retryDelay: 50 }).tryLock({
      waitTime: 5_000,
      leaseTime: 5_000,
    });
    await new Promise((r) => setTimeout(r, 200));
    await holders[0]?.release();
    const lease = await pending;
    expect(lease?.members.length).toBeGreaterThanOrEqual(3);
    await lease?.release();
    await Promise.all(holders.slice(1).map((h) => h.release()));
    expect(await redlockOn(`${prefix}busy`).tryLock({ waitTime: 0 })).not.toBeNull();
  });

  it("an abort releases what was granted and rejects with the reason", async () => {
    const name = `${prefix}abort`;
    const controller = new AbortController();
    const reason = new Error("stop");
    const holders = await Promise.all(
      nodes.slice(0, 3).map((n) => n.edgelock().getLock(name).lock({ leaseTime: 30_000 })),
    );
    const pending = redlockOn(name, { retryDelay: 50 }).tryLock({
      waitTime: 10_000,
      signal: controller.signal,
    });
    await new Promise((r) => setTimeout(r, 150));
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    // Granted votes are released; votes still in flight are cancelled in the background.
    const ours = async () => (await holdersOn(name)).flat().filter((o) => o.startsWith("redlock:"));
    await expect.poll(ours, { timeout: 5_000 }).toEqual([]);
    await Promise.all(holders.map((h) => h.release()));
  });

  it("rejects bad locks and options with a typed error before any request", async () => {
    expect(() => new RedLock([])).toThrow(RangeError);
    expect(() => new RedLock("x" as never)).toThrow(TypeError);
    expect(() => new RedLock([{} as never])).toThrow(/member 0 is not a lock/);
    const locks = nodes.map((n) => n.edgelock().getLock(`${prefix}bad`));
    expect(() => new RedLock(locks, { endpointTimeout: 0 })).toThrow(RangeError);
    expect(() => new RedLock(locks, { retryDelay: -1 })).toThrow(RangeError);
    expect(() => new RedLock(locks, { quorum: 2 } as never)).toThrow(/unknown option `quorum`/);
    const redlock = new RedLock(locks);
    const before = nodes.map((n) => n.bridge.stats().requests);
    await expect(redlock.tryLock({ leaseTime: 99 })).rejects.toThrow(RangeError);
    await expect(redlock.tryLock({ waitTime: -1 })).rejects.toThrow(RangeError);
    await expect(redlock.tryLock({ owner: "" })).rejects.toThrow(RangeError);
    await expect(redlock.tryLock({ keepAlive: "keeper" as never })).rejects.toThrow(TypeError);
    await expect(redlock.tryLock({ signal: "x" as never })).rejects.toThrow(TypeError);
    expect(nodes.map((n) => n.bridge.stats().requests)).toEqual(before);
  });
});

/*
 * Guards of RedLock's two counts, through its call sites: the quorum of a renewal is a majority
 * of all N endpoints (not of those that granted), and validity is what is left of the lease after
 * the time the votes took (on acquire and on renewal), so a quorum that answers too late holds
 * nothing.
 */
/** RedLock owners holding `name`, over every node. */
const ours = async (name: string) =>
  (
    await Promise.all(
      nodes.map(async (n) =>
        Object.keys(await n.raw.hGetAll(name)).filter((f) => f.startsWith("redlock:")),
      ),
    )
  ).flat();

describe("RedLock guards", () => {
  it("a renewal by 2 of the 3 granting endpoints is no quorum of 5: the lease is lost", async () => {
    const name = `${prefix}renew-quorum`;
    // Two nodes are held by someone else: only nodes 0–2 grant.
    const blockers = await Promise.all(
      nodes.slice(3).map((n) => n.edgelock().getLock(name).lock({ leaseTime: 30_000 })),
    );
    const lease = await redlockOn(name).tryLock({ leaseTime: 5_000 });
    if (!lease) throw new Error("not acquired");
    await expect.poll(() => lease.members.length).toBe(3);
    // Node 2 loses its hold, and its answer comes last, after the two renewals.
    await nodes[2]?.raw.del(name);
    nodes[2]?.bridge.setFaults({ delayMs: 200 });
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
    await lease.releaseAll();
    await Promise.all(blockers.map((b) => b.release()));
    expect(await ours(name)).toEqual([]);
  });

  it("a quorum granted after the lease ran out is no lock: the acquire returns null and gives every grant back", async () => {
    const name = `${prefix}late-quorum`;
    // Every endpoint answers 400 ms late: all grant, but a 300 ms lease has no validity left.
    for (const node of nodes) node.bridge.setFaults({ delayMs: 400 });
    const lease = await redlockOn(name, { endpointTimeout: 5_000 }).tryLock({ leaseTime: 300 });
    expect(lease).toBeNull();
    for (const node of nodes) node.bridge.clearFaults();
    await Promise.all(background);
    expect(await ours(name)).toEqual([]);
  });

  it("a renewal whose quorum answers after the renewed lease would have run out confirms nothing", async () => {
    const name = `${prefix}late-renewal`;
    const lease = await redlockOn(name).tryLock({ leaseTime: 5_000 });
    if (!lease) throw new Error("not acquired");
    await expect.poll(() => lease.members.length).toBe(5);
    for (const node of nodes) node.bridge.setFaults({ delayMs: 400 });
    await expect(lease.renew(300)).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
    for (const node of nodes) node.bridge.clearFaults();
    await lease.releaseAll();
    expect(await ours(name)).toEqual([]);
  });
});
