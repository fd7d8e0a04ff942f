/**
 * OpenTelemetry for edgelock: an `onEvent` listener that turns the library's events into spans
 * and metrics, through `@opentelemetry/api` (an optional peer dependency: only this entry
 * imports it). No Node-only import: it runs in Workers as in Node, with whatever SDK the
 * application registered.
 *
 * Spans: `edgelock.acquire` (one per acquire call, from its start to its answer) and
 * `edgelock.hold` (from an acquire that got the lock to the release that gave it back, or the
 * loss of the lease). Metrics: `edgelock.acquire.wait` (histogram, ms), `edgelock.acquire.contended`,
 * `edgelock.lease.lost`, `edgelock.renew.failures`, `edgelock.requests` and `edgelock.billed`
 * (counters).
 * @module
 */

import {
  type Attributes,
  type Counter,
  type Histogram,
  type Meter,
  metrics,
  type Span,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { LockEvent, LockEventListener } from "./events.js";

/** Options of {@link otelEvents}. */
export interface OtelOptions {
  /** Tracer of the spans. @default `trace.getTracer("edgelock")` (the registered provider) */
  tracer?: Tracer;
  /** Meter of the metrics. @default `metrics.getMeter("edgelock")` (the registered provider) */
  meter?: Meter;
  /**
   * How a primitive's name appears on spans (`edgelock.name`): `"hash"`, 8 hex characters of a
   * 32-bit FNV-1a hash (names often hold ids: an order, a customer); `"as-is"`; or a function.
   * Metrics never carry the name (one series per name would not scale). @default "hash"
   */
  names?: "hash" | "as-is" | ((name: string) => string);
  /** Also receives every event, after the spans and metrics are recorded. */
  next?: LockEventListener;
  /**
   * Most holds tracked at once (acquired, not yet released); past it the oldest hold span ends
   * with `edgelock.outcome: "untracked"`. Bounds memory when releases are never reported (a
   * process that exits holding locks). @default 10000
   */
  maxOpenHolds?: number;
}

/** Attribute keys set on spans and metric points. */
export const OTEL_ATTRIBUTES = {
  name: "edgelock.name",
  kind: "edgelock.kind",
  outcome: "edgelock.outcome",
  waitMs: "edgelock.wait_ms",
  attempts: "edgelock.attempts",
  requests: "edgelock.requests",
  billed: "edgelock.billed",
  operation: "edgelock.operation",
} as const;

interface Instruments {
  wait: Histogram;
  contended: Counter;
  lost: Counter;
  renewFailures: Counter;
  requests: Counter;
  billed: Counter;
}

/**
 * An `onEvent` listener that records spans and metrics for every EdgeLock event:
 *
 * ```ts
 * const edgelock = new EdgeLock({ redis, onEvent: otelEvents() });
 * ```
 *
 * - `edgelock.acquire` span, per acquire call: `edgelock.name`, `edgelock.wait_ms` (the call's
 *   duration), `edgelock.attempts`, `edgelock.requests` (HTTP requests), `edgelock.billed`
 *   (commands billed, as the scripts count them: see `LockEvent.billed`),
 *   `edgelock.outcome` (`"acquired"` or `"busy"`), and `edgelock.kind` when the event names one.
 * - `edgelock.hold` span, from an acquire that got the lock to its release (`edgelock.outcome`:
 *   the release result) or to the lease's loss (`"lost"`, status error). Holds are matched to
 *   releases by name, oldest first, within this listener (one EdgeLock, or several sharing it).
 * - `edgelock.acquire.wait` histogram (ms) by `edgelock.outcome`; `edgelock.acquire.contended`
 *   counter (acquires that had to wait or gave up); `edgelock.lease.lost`;
 *   `edgelock.renew.failures` (a renewal that found the lease gone, or a background renewal that
 *   failed); `edgelock.requests` (HTTP requests, by `edgelock.operation`: acquire, wait, renew,
 *   release, skip, or the failed background operation); `edgelock.billed` (commands Upstash bills,
 *   every call inside a script included, by `edgelock.operation`: sum it for the bill).
 *
 * The listener never throws (an instrument's failure is swallowed, as `onEvent` requires).
 * @throws TypeError / RangeError for bad options, when called.
 */
export function otelEvents(options: OtelOptions = {}): LockEventListener {
  if (typeof options !== "object" || options === null) {
    throw new TypeError("otelEvents: options must be an object");
  }
  const { names = "hash", next, maxOpenHolds = 10_000 } = options;
  if (names !== "hash" && names !== "as-is" && typeof names !== "function") {
    throw new TypeError('otelEvents: `names` must be "hash", "as-is" or a function');
  }
  if (next !== undefined && typeof next !== "function") {
    throw new TypeError("otelEvents: `next` must be a function");
  }
  if (!Number.isSafeInteger(maxOpenHolds) || maxOpenHolds < 1) {
    throw new RangeError("otelEvents: `maxOpenHolds` must be a positive integer");
  }
  const tracer = options.tracer ?? trace.getTracer("edgelock");
  const meter = options.meter ?? metrics.getMeter("edgelock");
  const shown =
    names === "hash"
      ? fnv1a
      : names === "as-is"
        ? (name: string) => name
        : (names as (n: string) => string);
  const instruments: Instruments = {
    wait: meter.createHistogram("edgelock.acquire.wait", {
      unit: "ms",
      description: "Duration of acquire calls, waiting included",
    }),
    contended: meter.createCounter("edgelock.acquire.contended", {
      description: "Acquire calls that found the primitive taken (waited, or gave up)",
    }),
    lost: meter.createCounter("edgelock.lease.lost", { description: "Leases found lost" }),
    renewFailures: meter.createCounter("edgelock.renew.failures", {
      description: "Renewals that found the lease gone or failed",
    }),
    requests: meter.createCounter("edgelock.requests", {
      description: "HTTP requests to Redis, by operation",
    }),
    billed: meter.createCounter("edgelock.billed", {
      description:
        "Commands billed (each script's EVAL/EVALSHA plus every call inside), by operation",
    }),
  };
  const holds = new OpenHolds(maxOpenHolds);

  return (event: LockEvent) => {
    try {
      record(event, tracer, instruments, holds, shown);
    } catch {
      // A telemetry failure must never reach a lock operation.
    }
    next?.(event);
  };
}

function record(
  event: LockEvent,
  tracer: Tracer,
  m: Instruments,
  holds: OpenHolds,
  shown: (name: string) => string,
): void {
  const now = Date.now();
  const base: Attributes = { [OTEL_ATTRIBUTES.name]: shown(event.name) };
  const kind = (event as { kind?: unknown }).kind;
  if (typeof kind === "string") base[OTEL_ATTRIBUTES.kind] = kind;
  const operation = event.type === "error" ? event.operation : event.type;
  if (event.requests > 0) {
    m.requests.add(event.requests, { [OTEL_ATTRIBUTES.operation]: operation });
  }
  if (event.billed > 0) {
    m.billed.add(event.billed, { [OTEL_ATTRIBUTES.operation]: operation });
  }
  switch (event.type) {
    case "acquire": {
      const outcome = event.acquired ? "acquired" : "busy";
      const span = tracer.startSpan("edgelock.acquire", {
        startTime: now - event.durationMs,
        attributes: {
          ...base,
          [OTEL_ATTRIBUTES.outcome]: outcome,
          [OTEL_ATTRIBUTES.waitMs]: event.durationMs,
          [OTEL_ATTRIBUTES.attempts]: event.attempts,
          [OTEL_ATTRIBUTES.requests]: event.requests,
          [OTEL_ATTRIBUTES.billed]: event.billed,
        },
      });
      span.end(now);
      m.wait.record(event.durationMs, { [OTEL_ATTRIBUTES.outcome]: outcome });
      if (!event.acquired || event.attempts > 1) m.contended.add(1);
      if (event.acquired) {
        holds.open(
          event.name,
          tracer.startSpan("edgelock.hold", { startTime: now, attributes: base }),
        );
      }
      return;
    }
    case "release":
      holds.close(event.name, event.result, now, false);
      return;
    case "lost":
      m.lost.add(1);
      holds.close(event.name, "lost", now, true);
      return;
    case "renew":
      if (!event.renewed) m.renewFailures.add(1);
      return;
    case "error":
      if (event.operation === "renew" || event.operation === "keeper") m.renewFailures.add(1);
      return;
    default:
      return;
  }
}

/** Hold spans not yet ended, per name in acquisition order, bounded in number. */
class OpenHolds {
  readonly #byName = new Map<string, Span[]>();
  readonly #max: number;
  #count = 0;

  constructor(max: number) {
    this.#max = max;
  }

  open(name: string, span: Span): void {
    if (this.#count >= this.#max) this.#evictOldest();
    const list = this.#byName.get(name);
    if (list) list.push(span);
    else this.#byName.set(name, [span]);
    this.#count += 1;
  }

  close(name: string, outcome: string, at: number, failed: boolean): void {
    const list = this.#byName.get(name);
    const span = list?.shift();
    if (!span) return;
    if (list?.length === 0) this.#byName.delete(name);
    this.#count -= 1;
    span.setAttribute(OTEL_ATTRIBUTES.outcome, outcome);
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR, message: "lease lost" });
    span.end(at);
  }

  #evictOldest(): void {
    // Map iteration order is insertion order: the first name is the oldest still open.
    const [name] = this.#byName.keys();
    if (name !== undefined) this.close(name, "untracked", Date.now(), false);
  }
}

/** 32-bit FNV-1a of the UTF-16 code units, as 8 hex characters (stable, not a secret). */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}
