/**
 * edgelock/otel: spans and metrics from a real EdgeLock's events (bridge, Redis, the real
 * `@upstash/redis` client), read back through the OpenTelemetry SDK's in-memory exporters.
 */
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { EdgeLock, LeaseLostError, type LockEvent } from "../src/index.js";
import { type OtelOptions, otelEvents } from "../src/otel.js";
import { bridgeRedis, keyPrefix } from "./support/env.js";

const prefix = keyPrefix();

class TestReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

/** An EdgeLock whose events go to a fresh tracer and meter, and to `events`. */
function instrumented(options: Partial<OtelOptions> = {}) {
  const exporter = new InMemorySpanExporter();
  const tracer = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  }).getTracer("test");
  const reader = new TestReader();
  const meter = new MeterProvider({ readers: [reader] }).getMeter("test");
  const events: LockEvent[] = [];
  const waiters: ((e: LockEvent) => void)[] = [];
  const edgelock = new EdgeLock({
    redis: bridgeRedis(),
    onEvent: otelEvents({
      tracer,
      meter,
      next: (e) => {
        events.push(e);
        for (const w of waiters) w(e);
      },
      ...options,
    }),
  });
  const spans = (name: string): ReadableSpan[] =>
    exporter.getFinishedSpans().filter((s) => s.name === name);
  /** The metric points of `name`: `{ attributes, value }`, value a number or a histogram. */
  const points = async (name: string) => {
    const { resourceMetrics } = await reader.collect();
    const metric = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === name);
    return (metric?.dataPoints ?? []) as { attributes: Record<string, unknown>; value: unknown }[];
  };
  const sum = async (name: string) =>
    (await points(name)).reduce((n, p) => n + (typeof p.value === "number" ? p.value : 0), 0);
  const until = (type: LockEvent["type"]) =>
    new Promise<LockEvent>((resolve) => {
      const seen = events.find((e) => e.type === type);
      if (seen) return resolve(seen);
      waiters.push((e) => {
        if (e.type === type) resolve(e);
      });
    });
  return { edgelock, spans, points, sum, events, until };
}

describe("edgelock/otel", () => {
  it("an acquire and its release: an acquire span, a hold span, the wait histogram and requests", async () => {
    const t = instrumented();
    const name = `${prefix}plain`;
    const lease = await t.edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    expect(t.spans("edgelock.hold")).toHaveLength(0); // still held
    await lease.release();

    const [acquire] = t.spans("edgelock.acquire");
    expect(acquire?.attributes).toMatchObject({
      "edgelock.outcome": "acquired",
      "edgelock.attempts": 1,
    });
    expect(acquire?.attributes["edgelock.requests"]).toBeGreaterThanOrEqual(1);
    expect(typeof acquire?.attributes["edgelock.wait_ms"]).toBe("number");
    // The name is hashed by default: 8 hex characters, never the name itself.
    const shown = acquire?.attributes["edgelock.name"];
    expect(shown).toMatch(/^[0-9a-f]{8}$/);
    const [hold] = t.spans("edgelock.hold");
    expect(hold?.attributes).toMatchObject({
      "edgelock.name": shown,
      "edgelock.outcome": "released",
    });

    const [wait] = await t.points("edgelock.acquire.wait");
    expect(wait?.attributes).toEqual({ "edgelock.outcome": "acquired" });
    expect((wait?.value as { count?: number } | undefined)?.count).toBe(1);
    const requests = await t.points("edgelock.requests");
    expect(requests.map((p) => p.attributes["edgelock.operation"]).sort()).toEqual([
      "acquire",
      "release",
    ]);
    // The billed counter adds what the events carry: the scripts' own count, by operation.
    const billed = await t.points("edgelock.billed");
    expect(billed.map((p) => p.attributes["edgelock.operation"]).sort()).toEqual([
      "acquire",
      "release",
    ]);
    const carried = t.events.reduce((sum, e) => sum + e.billed, 0);
    expect(carried).toBeGreaterThanOrEqual(4); // two scripts, each at least one call inside
    expect(await t.sum("edgelock.billed")).toBe(carried);
    expect(acquire?.attributes["edgelock.billed"]).toBe(
      t.events.find((e) => e.type === "acquire")?.billed,
    );
    expect(await t.sum("edgelock.acquire.contended")).toBe(0);
  });

  it("contention: a waiter that got the lock and one that gave up are counted, with outcomes", async () => {
    const t = instrumented({ names: "as-is" });
    const name = `${prefix}busy`;
    const lock = t.edgelock.getLock(name);
    const first = await lock.tryLock({ leaseTime: 10_000 });
    if (!first) throw new Error("not acquired");
    expect(await lock.tryLock({ leaseTime: 10_000 })).toBeNull(); // busy, gave up at once
    const second = lock.tryLock({ leaseTime: 10_000, waitTime: 10_000 });
    await t.until("waiting");
    await first.release();
    const lease = await second;
    await lease?.release();

    const acquires = t.spans("edgelock.acquire");
    expect(acquires.map((s) => s.attributes["edgelock.outcome"]).sort()).toEqual([
      "acquired",
      "acquired",
      "busy",
    ]);
    expect(acquires.every((s) => s.attributes["edgelock.name"] === name)).toBe(true);
    expect(
      Math.max(...acquires.map((s) => Number(s.attributes["edgelock.attempts"]))),
    ).toBeGreaterThan(1);
    expect(await t.sum("edgelock.acquire.contended")).toBe(2);
    const outcomes = (await t.points("edgelock.acquire.wait")).map(
      (p) => p.attributes["edgelock.outcome"],
    );
    expect(outcomes.sort()).toEqual(["acquired", "busy"]);
    expect(t.spans("edgelock.hold")).toHaveLength(2);
  });

  it("every primitive's acquire and release events pair up, so every hold span ends", async () => {
    const t = instrumented({ names: "as-is" });
    const e = t.edgelock;
    const n = (what: string) => `${prefix}pair:${what}`;
    const must = <T>(value: T | null): T => {
      if (value === null) throw new Error("not acquired");
      return value;
    };
    await must(await e.getLock(n("lock")).tryLock({ leaseTime: 10_000 })).release();
    await e.withLock(n("with"), async () => {});
    await must(await e.getFairLock(n("fair")).tryLock({ leaseTime: 10_000 })).release();
    await must(await e.getFencedLock(n("fenced")).tryLock({ leaseTime: 10_000 })).release();
    const rw = e.getReadWriteLock(n("rw"));
    await must(await rw.readLock().tryLock({ leaseTime: 10_000 })).release();
    await must(await rw.writeLock().tryLock({ leaseTime: 10_000 })).release();
    const semaphore = e.getSemaphore(n("semaphore"));
    await semaphore.trySetPermits(2);
    await must(await semaphore.tryAcquire()).release(); // the handle's release
    await must(await semaphore.tryAcquire());
    await semaphore.release(); // the semaphore's own
    const permits = e.getPermitExpirableSemaphore(n("permits"));
    await permits.trySetPermits(1);
    await must(await permits.tryAcquire({ leaseTime: 10_000 })).release();
    const multi = e.getMultiLock(e.getLock(n("multi:a")), e.getLock(n("multi:b")));
    await must(await multi.tryLock({ leaseTime: 10_000 })).release();
    const key = e.getIdempotencyKey(n("key"));
    const claim = await key.claim({ leaseTime: 10_000 });
    if (claim.status !== "acquired") throw new Error(`claim: ${claim.status}`);
    await key.complete(claim.lease, 60_000);

    const count = (type: "acquire" | "release") => {
      const byName = new Map<string, number>();
      for (const event of t.events) {
        if (event.type !== type || (event.type === "acquire" && !event.acquired)) continue;
        byName.set(event.name, (byName.get(event.name) ?? 0) + 1);
      }
      return Object.fromEntries([...byName].sort());
    };
    const acquired = count("acquire");
    // 13 holds on 11 names: the read-write lock and the semaphore were held twice, and a
    // MultiLock's members report their own besides the MultiLock's.
    expect(Object.values(acquired).reduce((a, b) => a + b, 0)).toBe(13);
    expect(Object.keys(acquired)).toHaveLength(11);
    expect(count("release")).toEqual(acquired);
    const holds = t.spans("edgelock.hold");
    expect(holds).toHaveLength(13);
    expect(holds.every((h) => h.attributes["edgelock.outcome"] === "released")).toBe(true);
    const released = (await t.points("edgelock.requests")).find(
      (p) => p.attributes["edgelock.operation"] === "release",
    );
    // Every release but the MultiLock's (its members' count) sent one request.
    expect(released?.value).toBe(12);
  });

  it("a lost lease: the hold span ends in error, lost leases and failed renewals are counted", async () => {
    const t = instrumented({ names: (n) => `custom:${n.length}` });
    const name = `${prefix}lost`;
    const lease = await t.edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    await t.edgelock.getLock(name).forceUnlock();
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
    await t.until("lost");

    const [hold] = t.spans("edgelock.hold");
    expect(hold?.attributes).toMatchObject({
      "edgelock.outcome": "lost",
      "edgelock.name": `custom:${name.length}`,
    });
    expect(hold?.status.code).toBe(2); // SpanStatusCode.ERROR
    expect(await t.sum("edgelock.lease.lost")).toBe(1);
    expect(await t.sum("edgelock.renew.failures")).toBe(1);
  });

  it("holds are bounded: past maxOpenHolds the oldest hold span ends as untracked", async () => {
    const t = instrumented({ maxOpenHolds: 1 });
    const a = await t.edgelock.getLock(`${prefix}bound:a`).tryLock({ leaseTime: 10_000 });
    const b = await t.edgelock.getLock(`${prefix}bound:b`).tryLock({ leaseTime: 10_000 });
    expect(t.spans("edgelock.hold").map((s) => s.attributes["edgelock.outcome"])).toEqual([
      "untracked",
    ]);
    await b?.release();
    await a?.release(); // its span is gone: nothing more ends
    expect(t.spans("edgelock.hold").map((s) => s.attributes["edgelock.outcome"])).toEqual([
      "untracked",
      "released",
    ]);
  });

  it("a failing tracer never reaches the lock operation, and next still gets the event", async () => {
    const seen: string[] = [];
    const tracer = new BasicTracerProvider().getTracer("broken");
    tracer.startSpan = () => {
      throw new Error("exporter down");
    };
    const edgelock = new EdgeLock({
      redis: bridgeRedis(),
      onEvent: otelEvents({ tracer, next: (e) => seen.push(e.type) }),
    });
    const lease = await edgelock.getLock(`${prefix}broken`).tryLock({ leaseTime: 10_000 });
    expect(lease).not.toBeNull();
    await lease?.release();
    expect(seen).toEqual(["acquire", "release"]);
  });

  it.each([
    [null, TypeError, /options must be an object/],
    [{ names: "plain" }, TypeError, /`names` must be "hash", "as-is" or a function/],
    [{ next: "log" }, TypeError, /`next` must be a function/],
    [{ maxOpenHolds: 0 }, RangeError, /`maxOpenHolds` must be a positive integer/],
    [{ maxOpenHolds: 1.5 }, RangeError, /`maxOpenHolds`/],
  ])("bad options %j are refused when the listener is made", (options, type, message) => {
    expect(() => otelEvents(options as unknown as OtelOptions)).toThrow(type);
    expect(() => otelEvents(options as unknown as OtelOptions)).toThrow(message);
  });
});
