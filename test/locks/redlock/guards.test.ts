/**
 * Guards of RedLock's two counts, through its call sites: the quorum of a renewal is a majority
 * of all N endpoints (not of those that granted), and validity is what is left of the lease after
 * the time the votes took (on acquire and on renewal), so a quorum that answers too late holds
 * nothing.
 */
import { afterEach, describe, expect, it } from "vitest";
import { LeaseLostError, RedLock } from "../../../src/index.js";
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
