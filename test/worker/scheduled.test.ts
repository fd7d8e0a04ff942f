/**
 * guardScheduled in real workerd: overlapping and duplicate cron runs skip, the run's lease is
 * kept alive and released when the handler settles, failures propagate; plus the reference
 * Worker's own scheduled handler.
 */
import { createExecutionContext, createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { EdgeLock, LeaseLostError, type LockEvent } from "../../src/index.js";
import type { Lease } from "../../src/lease/lease.js";
import worker from "../../worker/index.js";
import { guardScheduled, type ScheduledGuard } from "../../worker/scheduled.js";
import {
  eventually,
  keeperStatus,
  keyPrefix,
  recordingEdgeLock,
  redisOn,
  workerBridge,
  workerBridgeControl,
} from "./support.js";

const prefix = keyPrefix();
const uniqueCron = () => `*/5 * * * * ${crypto.randomUUID().slice(0, 8)}`;

/** A controllable handler: each run waits until `finish()` is called. */
function gate() {
  let open: () => void = () => {};
  let started: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  return { opened, running, open: () => open(), started: () => started() };
}

/** One guarded run through `guard.run`, resolving to its outcome. */
function trigger(guarded: ScheduledGuard<typeof env>, cron: string, scheduledTime = Date.now()) {
  return guarded.run(
    createScheduledController({ cron, scheduledTime }),
    env,
    createExecutionContext(),
  );
}

describe("reference Worker", () => {
  it("two overlapping cron invocations: exactly one runs, the other skips", async () => {
    const cron = uniqueCron();
    const now = Date.now();
    await Promise.all(
      [now, now + 300_000].map((scheduledTime) =>
        worker.scheduled(
          createScheduledController({ cron, scheduledTime }),
          env,
          createExecutionContext(),
        ),
      ),
    );
    const redis = redisOn();
    const key = `${env.DEMO_KEY_PREFIX}cron:${cron}`;
    expect(await redis.get<number>(`${key}:runs`)).toBe(1);
    expect(await redis.get<number>(`${key}:skips`)).toBe(1);
    expect(await redis.get<number>(`${key}:overlaps`)).toBeNull();
    // Released when the run settled.
    expect(await recordingEdgeLock().edgelock.getLock(`cron:${cron}`).isLocked()).toBe(false);
  });
});

describe("guardScheduled", () => {
  it("skips a run while another holds the lock, reporting a skip event with the holder's PTTL", async () => {
    const { edgelock, events } = recordingEdgeLock();
    const g = gate();
    const guarded = guardScheduled({ edgelock: () => edgelock, leaseTime: 5_000 }, async () => {
      g.started();
      await g.opened;
    });
    const cron = uniqueCron();
    const first = trigger(guarded, cron);
    await g.running;
    const second = await trigger(guarded, cron, Date.now() + 60_000);
    expect(second).toMatchObject({ ran: false, reason: "overlap" });
    if (second.ran) throw new Error("unreachable");
    expect(second.holderTtl).toBeGreaterThan(4_000);
    const skip = events.find((e) => e.type === "skip");
    expect(skip).toMatchObject({
      type: "skip",
      name: `cron:${cron}`,
      reason: "overlap",
      requests: 0,
    });
    expect((skip as { holderTtl: number }).holderTtl).toBe(second.holderTtl);
    g.open();
    expect(await first).toEqual({ ran: true });
    expect(await edgelock.getLock(`cron:${cron}`).isLocked()).toBe(false);
  });

  it("skips a second delivery of the same scheduled time, even after the first run finished", async () => {
    const { edgelock, events } = recordingEdgeLock();
    let runs = 0;
    const guarded = guardScheduled({ edgelock: () => edgelock }, () => {
      runs += 1;
    });
    const cron = uniqueCron();
    const at = Date.now();
    expect(await trigger(guarded, cron, at)).toEqual({ ran: true });
    const again = await trigger(guarded, cron, at);
    expect(again).toMatchObject({ ran: false, reason: "duplicate" });
    // The event names the cron's lock, not the internal mark of the scheduled time, and says
    // why: no holder's lease is involved, so no holderTtl.
    const skipEvents = events.filter((e) => e.type === "skip");
    expect(skipEvents).toHaveLength(1);
    expect(skipEvents[0]).toMatchObject({ name: `cron:${cron}`, reason: "duplicate", requests: 0 });
    expect(skipEvents[0]).not.toHaveProperty("holderTtl");
    expect(await trigger(guarded, cron, at + 300_000)).toEqual({ ran: true });
    expect(runs).toBe(2);
  });

  it("is usable directly as a Worker's scheduled handler (resolves to nothing)", async () => {
    const { edgelock, events } = recordingEdgeLock();
    let runs = 0;
    const handler = {
      scheduled: guardScheduled<typeof env>({ edgelock: () => edgelock }, () => {
        runs += 1;
      }),
    } satisfies ExportedHandler<typeof env>;
    const controller = createScheduledController({ cron: uniqueCron(), scheduledTime: Date.now() });
    expect(await handler.scheduled(controller, env, createExecutionContext())).toBeUndefined();
    expect(await handler.scheduled(controller, env, createExecutionContext())).toBeUndefined();
    expect(runs).toBe(1);
    expect(events.filter((e) => e.type === "skip")).toMatchObject([{ reason: "duplicate" }]);
  });

  it("with dedupeWindow 0 a redelivery runs again", async () => {
    const { edgelock } = recordingEdgeLock();
    let runs = 0;
    const guarded = guardScheduled({ edgelock: () => edgelock, dedupeWindow: 0 }, () => {
      runs += 1;
    });
    const cron = uniqueCron();
    const at = Date.now();
    expect(await trigger(guarded, cron, at)).toEqual({ ran: true });
    expect(await trigger(guarded, cron, at)).toEqual({ ran: true });
    expect(runs).toBe(2);
  });

  it("a handler that throws: the error propagates, the lock is released, a retry may run", async () => {
    const { edgelock } = recordingEdgeLock();
    let attempt = 0;
    const boom = new Error("boom");
    const guarded = guardScheduled({ edgelock: () => edgelock }, () => {
      attempt += 1;
      if (attempt === 1) throw boom;
    });
    const cron = uniqueCron();
    const at = Date.now();
    await expect(trigger(guarded, cron, at)).rejects.toBe(boom);
    expect(await edgelock.getLock(`cron:${cron}`).isLocked()).toBe(false);
    expect(await trigger(guarded, cron, at)).toEqual({ ran: true });
    expect(attempt).toBe(2);
  });

  it("a lease lost while the handler ran: the run rejects with LeaseLostError after the release; its time stays marked", async () => {
    const { edgelock } = recordingEdgeLock();
    const other = recordingEdgeLock().edgelock;
    let runs = 0;
    const guarded = guardScheduled(
      { edgelock: () => edgelock, leaseTime: 10_000 },
      async (controller) => {
        runs += 1;
        expect(await other.getLock(`cron:${controller.cron}`).forceUnlock()).toBe(true);
      },
    );
    const cron = uniqueCron();
    const at = Date.now();
    const error = await trigger(guarded, cron, at).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({
      code: "LEASE_LOST",
      resource: `cron:${cron}`,
      outcome: "returned",
    });
    // The handler did finish: a redelivery of the same scheduled time still skips.
    expect(await trigger(guarded, cron, at)).toMatchObject({ ran: false, reason: "duplicate" });
    expect(runs).toBe(1);
  });

  it("a fixed lease that expired while the handler ran: the release is awaited before the run rejects", async () => {
    const { edgelock, events } = recordingEdgeLock();
    const guarded = guardScheduled(
      { edgelock: () => edgelock, leaseTime: 100 },
      async (_c, _e, _x, lease) => {
        if (!lease.signal.aborted) {
          await new Promise<void>((resolve) =>
            lease.signal.addEventListener("abort", () => resolve()),
          );
        }
      },
    );
    await expect(trigger(guarded, uniqueCron())).rejects.toBeInstanceOf(LeaseLostError);
    expect(events.filter((e) => e.type === "release" && !e.name.includes("#"))).toHaveLength(1);
  });

  it('a lease lost while the handler threw: its error is the cause; with onLeaseLost: "return" the run just ends', async () => {
    const { edgelock } = recordingEdgeLock();
    const other = recordingEdgeLock().edgelock;
    const boom = new Error("boom");
    const failing = guardScheduled({ edgelock: () => edgelock, leaseTime: 10_000 }, async (c) => {
      await other.getLock(`cron:${c.cron}`).forceUnlock();
      throw boom;
    });
    const error = await trigger(failing, uniqueCron()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).cause).toBe(boom);
    const tolerant = guardScheduled(
      { edgelock: () => edgelock, leaseTime: 10_000, onLeaseLost: "return" },
      async (c) => {
        await other.getLock(`cron:${c.cron}`).forceUnlock();
      },
    );
    expect(await trigger(tolerant, uniqueCron())).toEqual({ ran: true });
  });

  it("keeps the run's lease alive with the LeaseKeeper and unregisters it when the run ends", async () => {
    const { edgelock } = recordingEdgeLock({ watchdogTimeout: 300 });
    const instance = `keeper-${crypto.randomUUID()}`;
    let seen: Lease | undefined;
    let statusDuring: string | undefined;
    let pttlAfterThreeLeases = 0;
    const guarded = guardScheduled(
      {
        edgelock: () => edgelock,
        keepAlive: (e: typeof env) => ({ keeper: e.LEASE_KEEPER, maxHoldTime: 60_000, instance }),
      },
      async (_controller, _env, _ctx, lease) => {
        seen = lease;
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        statusDuring = (await keeperStatus(instance, lease.id)).state;
        pttlAfterThreeLeases = await edgelock.getLock(lease.name).remainTimeToLive();
      },
    );
    const cron = uniqueCron();
    expect(await trigger(guarded, cron)).toEqual({ ran: true });
    expect(statusDuring).toBe("renewing");
    expect(pttlAfterThreeLeases).toBeGreaterThan(0);
    expect(seen?.name).toBe(`cron:${cron}`);
    expect(seen?.signal.aborted).toBe(true); // released
    expect(await keeperStatus(instance, seen?.id ?? "")).toEqual({ state: "unknown" });
    expect(await edgelock.getLock(`cron:${cron}`).isLocked()).toBe(false);
  });

  it("uses a custom lock name (string or function of controller and env)", async () => {
    const { edgelock } = recordingEdgeLock();
    const names: string[] = [];
    const record = (_c: ScheduledController, _e: unknown, _x: ExecutionContext, lease: Lease) => {
      names.push(lease.name);
    };
    await trigger(
      guardScheduled({ edgelock: () => edgelock, name: `${prefix}fixed` }, record),
      "a",
    );
    await trigger(
      guardScheduled(
        {
          edgelock: () => edgelock,
          name: (c, e: typeof env) => `${prefix}${e.DEMO_KEY_PREFIX}${c.cron}`,
        },
        record,
      ),
      "b",
    );
    expect(names).toEqual([`${prefix}fixed`, `${prefix}${env.DEMO_KEY_PREFIX}b`]);
  });

  it("a failed release is reported as an error event and does not fail the run", async () => {
    const events: LockEvent[] = [];
    const edgelock = new EdgeLock({ redis: redisOn(workerBridge), onEvent: (e) => events.push(e) });
    const guarded = guardScheduled({ edgelock: () => edgelock, leaseTime: 2_000 }, async () => {
      await workerBridgeControl.setFaults({ rules: [{ action: "fail", match: "evalsha" }] });
    });
    const cron = uniqueCron();
    try {
      expect(await trigger(guarded, cron)).toEqual({ ran: true });
    } finally {
      await workerBridgeControl.clearFaults();
    }
    const error = events.find((e) => e.type === "error");
    expect(error).toMatchObject({ type: "error", operation: "release", name: `cron:${cron}` });
    // The release goes on resending its own request in the background (definiteWithin) and
    // lands once the faults are gone: the lock is not left to its lease.
    await eventually(async () =>
      (await edgelock.getLock(`cron:${cron}`).isLocked()) ? undefined : true,
    );
  });

  const nil = (): null => null;
  it.each([
    ["no options", undefined, TypeError, /`edgelock` is required/],
    ["options that are not an object", "cron", TypeError, /options must be an object/],
    ["no edgelock", {}, TypeError, /`edgelock` is required/],
    ["edgelock not a function", { edgelock: 1 }, TypeError, /`edgelock` must be a function/],
    ["an unknown option", { edgelock: nil, wait: 1 }, TypeError, /unknown option `wait`/],
    ["a bad name", { edgelock: nil, name: "a{b" }, RangeError, /`name`/],
    ["leaseTime 0", { edgelock: nil, leaseTime: 0 }, RangeError, /`leaseTime`/],
    ["a bad keepAlive", { edgelock: nil, keepAlive: "always" }, TypeError, /`keepAlive`/],
    ["dedupeWindow -1", { edgelock: nil, dedupeWindow: -1 }, RangeError, /`dedupeWindow`/],
    ["a bad onLeaseLost", { edgelock: nil, onLeaseLost: "ignore" }, TypeError, /`onLeaseLost`/],
  ])("rejects %s when called", (_, options, type, message) => {
    const call = () => guardScheduled(options as never, () => {});
    expect(call).toThrow(type);
    expect(call).toThrow(message);
  });

  it("rejects a handler that is not a function", () => {
    expect(() =>
      guardScheduled({ edgelock: () => recordingEdgeLock().edgelock }, "run" as never),
    ).toThrow(/`handler` must be a function/);
  });
});
