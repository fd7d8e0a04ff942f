/**
 * The client side of `keepAlive: { keeper }` (src/lease/lease.ts) against a scripted keeper binding:
 * the error paths a real Durable Object cannot be made to take on demand (a status RPC that
 * throws, an unregister that fails), plus status-driven loss. The real LeaseKeeper is tested in
 * workerd (test/worker/lease-keeper.test.ts). Locks live in the real Redis behind the bridge.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  type KeeperRegistration,
  type KeeperReply,
  type KeeperStatus,
  type LeaseKeeperBinding,
  type LeaseKeeperStub,
  LeaseLostError,
  TransportError,
} from "../src/index.js";
import { keyPrefix } from "./support/env.js";
import { aborted, recordingEdgeLock } from "./support/locks.js";

const prefix = keyPrefix();
let n = 0;
const lockName = () => `${prefix}lock-${++n}`;

/** A keeper binding whose answers the test scripts; records every call. */
function scriptedKeeper() {
  const calls: string[] = [];
  const state = {
    register: (_r: KeeperRegistration): KeeperReply => ({ ok: true }),
    unregister: (_id: string): KeeperReply => ({ ok: true }),
    // As the real keeper once it has renewed: the lock now runs at least a lease from here.
    status: (_id: string): KeeperStatus => ({ state: "renewing", expiresAt: Date.now() + 300 }),
  };
  let stubs = 0;
  const binding: LeaseKeeperBinding = {
    getByName(name: string): LeaseKeeperStub {
      stubs += 1;
      calls.push(`getByName:${name}`);
      return {
        register: async (r) => {
          calls.push("register");
          return state.register(r);
        },
        unregister: async (id) => {
          calls.push("unregister");
          return state.unregister(id);
        },
        status: async (id) => {
          calls.push("status");
          return state.status(id);
        },
      };
    },
  };
  return { binding, calls, state, stubs: () => stubs };
}

const running: { release(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((l) => l.release().catch(() => {})));
});

describe("keepAlive: { keeper }", () => {
  it("registers the lease with the named instance and unregisters before releasing", async () => {
    const keeper = scriptedKeeper();
    let registered: KeeperRegistration | undefined;
    keeper.state.register = (r) => {
      registered = r;
      return { ok: true };
    };
    const { edgelock } = recordingEdgeLock({ keeper: keeper.binding, watchdogTimeout: 300 });
    const lease = await edgelock
      .getLock(lockName())
      .lock({ keepAlive: { maxHoldTime: 5_000, instance: "jobs" } });
    expect(registered).toEqual({
      name: lease.name,
      owner: lease.owner,
      id: lease.id,
      leaseTime: 300,
      maxHoldTime: 5_000,
    });
    expect(await lease.release()).toBe("released");
    expect(keeper.calls[0]).toBe("getByName:jobs");
    expect(keeper.calls.at(-1)).toBe("unregister");
  });

  it("aborts lease.signal when the keeper reports the lease lost, and stops polling", async () => {
    const keeper = scriptedKeeper();
    const rec = recordingEdgeLock({ keeper: keeper.binding, watchdogTimeout: 300 });
    const lease = await rec.edgelock
      .getLock(lockName())
      .lock({ keepAlive: { maxHoldTime: 5_000 } });
    running.push(lease);
    await expect.poll(() => keeper.calls.includes("status"), { timeout: 5_000 }).toBe(true);
    keeper.state.status = () => ({ state: "lost" });
    const reason = await aborted(lease.signal);
    expect(reason).toBeInstanceOf(LeaseLostError);
    await rec.until((e) => e.type === "lost");
    const statusCalls = keeper.calls.filter((c) => c === "status").length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(keeper.calls.filter((c) => c === "status").length).toBe(statusCalls);
    expect(keeper.calls).toContain("unregister");
  });

  it.each([["max-hold"], ["unknown"]] as const)(
    "treats status %s as the end of the keep-alive: the signal aborts",
    async (state) => {
      const keeper = scriptedKeeper();
      keeper.state.status = () => ({ state });
      const { edgelock } = recordingEdgeLock({ keeper: keeper.binding, watchdogTimeout: 300 });
      const lease = await edgelock.getLock(lockName()).lock({ keepAlive: { maxHoldTime: 5_000 } });
      running.push(lease);
      expect(await aborted(lease.signal)).toBeInstanceOf(LeaseLostError);
    },
  );

  it("takes the keeper's later expiry estimate into lease.expiresAt", async () => {
    const keeper = scriptedKeeper();
    const later = Date.now() + 60_000;
    keeper.state.status = () => ({ state: "renewing", expiresAt: later, failures: 0 });
    const { edgelock } = recordingEdgeLock({ keeper: keeper.binding, watchdogTimeout: 300 });
    const lease = await edgelock.getLock(lockName()).lock({ keepAlive: { maxHoldTime: 5_000 } });
    running.push(lease);
    await expect.poll(() => lease.expiresAt, { timeout: 5_000 }).toBe(later);
  });

  it("a status call that throws is reported, retried on a fresh stub, and does not end the lease", async () => {
    const keeper = scriptedKeeper();
    let failures = 0;
    keeper.state.status = () => {
      if (failures < 2) {
        failures += 1;
        throw new Error("Durable Object reset because its code was updated");
      }
      return { state: "renewing", expiresAt: Date.now() + 300 };
    };
    const rec = recordingEdgeLock({ keeper: keeper.binding, watchdogTimeout: 300 });
    const lease = await rec.edgelock
      .getLock(lockName())
      .lock({ keepAlive: { maxHoldTime: 5_000 } });
    running.push(lease);
    const error = await rec.until((e) => e.type === "error");
    expect(error).toMatchObject({ type: "error", operation: "keeper" });
    if (error.type !== "error") throw new Error("unreachable");
    expect(error.error).toBeInstanceOf(TransportError);
    expect(error.error.message).toBe("LeaseKeeper status call failed");
    await expect.poll(() => keeper.stubs(), { timeout: 5_000 }).toBeGreaterThanOrEqual(3);
    await expect
      .poll(() => keeper.calls.filter((c) => c === "status").length, { timeout: 5_000 })
      .toBeGreaterThanOrEqual(4);
    expect(lease.signal.aborted).toBe(false);
  });

  it("release goes ahead when unregister fails (reported as an error event)", async () => {
    const keeper = scriptedKeeper();
    keeper.state.unregister = () => {
      throw new Error("network connection lost");
    };
    const rec = recordingEdgeLock({ keeper: keeper.binding, watchdogTimeout: 300 });
    const lock = rec.edgelock.getLock(lockName());
    const lease = await lock.lock({ keepAlive: { maxHoldTime: 5_000 } });
    expect(await lease.release()).toBe("released");
    expect(await lock.isLocked()).toBe(false);
    const error = rec.events.find((e) => e.type === "error");
    expect(error).toMatchObject({ operation: "keeper" });
    if (error?.type !== "error") throw new Error("unreachable");
    expect(error.error.message).toBe("LeaseKeeper unregister failed: unregister call failed");
  });

  it("an unregister that answers { ok: false } is reported; the release still happens", async () => {
    const keeper = scriptedKeeper();
    keeper.state.unregister = () => ({ ok: false, error: "LeaseKeeper storage failure" });
    const rec = recordingEdgeLock({ keeper: keeper.binding, watchdogTimeout: 300 });
    const lease = await rec.edgelock
      .getLock(lockName())
      .lock({ keepAlive: { maxHoldTime: 5_000 } });
    expect(await lease.release()).toBe("released");
    const error = rec.events.find((e) => e.type === "error");
    if (error?.type !== "error") throw new Error("expected an error event");
    expect(error.error.message).toBe("LeaseKeeper unregister failed: LeaseKeeper storage failure");
  });

  it("a refused registration fails the acquire and gives the lock back", async () => {
    const keeper = scriptedKeeper();
    keeper.state.register = () => ({ ok: false, error: "`leaseTime` must be at least 30 ms" });
    const { edgelock } = recordingEdgeLock({ keeper: keeper.binding });
    const lock = edgelock.getLock(lockName());
    const error = await lock
      .tryLock({ leaseTime: 20, keepAlive: { maxHoldTime: 1_000 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransportError);
    expect((error as Error).message).toBe(
      "LeaseKeeper refused the lease: `leaseTime` must be at least 30 ms",
    );
    expect(await lock.isLocked()).toBe(false);
  });
});
