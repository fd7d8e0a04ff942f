/**
 * `runGuarded`, the order every guarded call keeps (withLock, lockWebhook, lockCron,
 * guardScheduled): the function settles, the hold ends, then the call answers; a deferred end
 * does not hold the answer back, and then only a loss the lease's signal saw counts.
 */
import { describe, expect, it } from "vitest";
import { LeaseLostError } from "../../src/index.js";
import { type GuardedCall, runGuarded } from "../../src/lease/guarded.js";
import { keyPrefix } from "../support/env.js";
import { aborted, recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();

/**
 * A held lock `name` on a recording EdgeLock, a client that can take it away, and `guard`: a
 * guarded call on it (`onLeaseLost: "throw"` unless given).
 */
async function held(name: string, leaseTime = 5_000) {
  const rec = recordingEdgeLock();
  const lease = await rec.edgelock.getLock(name).lock({ leaseTime });
  const forceUnlock = () => recordingEdgeLock().edgelock.getLock(name).forceUnlock();
  const guard = <T>(
    call: Omit<GuardedCall<T>, "client" | "name" | "lease" | "onLeaseLost"> &
      Partial<GuardedCall<T>>,
  ) => runGuarded<T>({ client: rec.edgelock, name, lease, onLeaseLost: "throw", ...call });
  return { rec, lease, forceUnlock, guard };
}

describe("runGuarded", () => {
  it("ends the hold with the function's outcome, and answers only once the end has landed", async () => {
    const name = `${prefix}guarded-order`;
    const { lease, guard } = await held(name);
    const order: string[] = [];
    const value = await guard({
      fn: () => {
        order.push("fn");
        return 7;
      },
      end: async (settled) => {
        order.push(`end ${settled.outcome}`);
        const released = await lease.release();
        order.push(`end landed: ${released}`);
        return released;
      },
    });
    order.push("answered");
    expect(value).toBe(7);
    expect(order).toEqual(["fn", "end returned", "end landed: released", "answered"]);
  });

  it("rethrows the function's error after the end landed, the error in the outcome", async () => {
    const name = `${prefix}guarded-throws`;
    const { lease, guard } = await held(name);
    const boom = new Error("boom");
    const order: string[] = [];
    const error = await guard({
      fn: async () => {
        throw boom;
      },
      end: async (settled) => {
        expect(settled).toEqual({ outcome: "threw", error: boom });
        const released = await lease.release();
        order.push("end landed");
        return released;
      },
    }).catch((e: unknown) => {
      order.push("answered");
      return e;
    });
    expect(error).toBe(boom);
    expect(order).toEqual(["end landed", "answered"]);
  });

  it("releases the lease when no end is given", async () => {
    const name = `${prefix}guarded-default-end`;
    const { rec, guard } = await held(name);
    await guard({ fn: () => 1 });
    expect(rec.events.filter((e) => e.type === "release")).toMatchObject([{ result: "released" }]);
    expect(await recordingEdgeLock().edgelock.getLock(name).isLocked()).toBe(false);
  });

  it("an awaited end that finds the hold gone is a loss: LeaseLostError with the value", async () => {
    const name = `${prefix}guarded-found-gone`;
    const { forceUnlock, guard } = await held(name);
    const error = await guard({
      fn: async () => {
        expect(await forceUnlock()).toBe(true);
        return "value";
      },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({ resource: name, outcome: "returned", result: "value" });
  });

  it("a deferred end does not hold the answer back, and what it finds does not count", async () => {
    const name = `${prefix}guarded-deferred`;
    const { lease, forceUnlock, guard } = await held(name);
    const order: string[] = [];
    let handed: Promise<unknown> | undefined;
    const value = await guard({
      fn: async () => {
        expect(await forceUnlock()).toBe(true);
        return "value";
      },
      end: async () => {
        const released = await lease.release();
        order.push("end landed");
        return released;
      },
      defer: (task) => {
        handed = task;
      },
    });
    order.push("answered");
    expect(value).toBe("value");
    // The task handed over is the end itself (made quiet), already under way.
    expect(await handed).toBe("expired");
    expect(order).toEqual(["answered", "end landed"]);
  });

  it("a loss the signal saw before the end counts, deferred or not", async () => {
    for (const deferred of [false, true]) {
      const name = `${prefix}guarded-signal-${deferred}`;
      const { lease, guard } = await held(name, 100);
      const tasks: Promise<unknown>[] = [];
      const error = await guard({
        fn: async () => {
          // A fixed lease not renewed: its signal aborts for a loss when the lease runs out.
          await aborted(lease.signal);
          return "late";
        },
        defer: deferred ? (task) => void tasks.push(task) : undefined,
      }).catch((e: unknown) => e);
      expect(error, `deferred: ${deferred}`).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ outcome: "returned", result: "late" });
      expect(tasks).toHaveLength(deferred ? 1 : 0);
      await Promise.all(tasks);
    }
  });

  it('with onLeaseLost: "return" answers the outcome as if the lease had held', async () => {
    const name = `${prefix}guarded-return`;
    const { forceUnlock, guard } = await held(name);
    const value = await guard({
      onLeaseLost: "return",
      fn: async () => {
        await forceUnlock();
        return "value";
      },
    });
    expect(value).toBe("value");
  });
});
