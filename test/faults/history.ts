/**
 * The history of a fault-campaign run, Jepsen style: every operation of every process with its
 * invoke and completion times on ONE monotonic clock (`performance.now()` of this process,
 * relative to the run's start) and its outcome:
 * - `ok`: definitely happened;
 * - `fail`: definitely did not happen;
 * - `info`: unknown (timed out, connection lost after sending): may have happened, at any time
 *   after its invocation, or never.
 *
 * Each granted acquire also becomes a {@link Hold}: who held what, from when to when, with which
 * fencing token. The checkers (checkers.ts) read holds and operations, nothing else.
 */

/** Outcome of an operation. */
export type Outcome = "ok" | "fail" | "info";

/** Operations a process records. */
export type OpKind = "acquire" | "release" | "increment" | "write";

/** One completed operation. Times are ms on the run's monotonic clock. */
export interface Op {
  process: number;
  op: OpKind;
  invoke: number;
  complete: number;
  outcome: Outcome;
  /** e.g. the release result, "busy", the error code, "refused". */
  detail?: string;
}

/**
 * One granted acquire (an `ok` acquire) and how it ended.
 *
 * - `lease`: the lease validity window as the library states it: from when the acquire was sent
 *   (the invocation: a conservative lower bound) to `lease.expiresAt` converted to this clock.
 * - `start`..`end`: the window in which the holder definitely held the lock and acted on it:
 *   from the acquire's completion to whichever comes first of the release's invocation, the
 *   lease's expiry and the moment its `signal` reported the lease lost. This is what the overlap
 *   checker compares: a grant takes effect somewhere between its invocation and completion, a
 *   release somewhere between its invocation and completion, so only these intervals must never
 *   overlap (comparing [sent, release completion] would flag correct hand-offs, where the next
 *   acquire is applied before the previous release's answer arrives).
 */
export interface Hold {
  id: number;
  process: number;
  owner: string;
  /** Acquire invocation and completion. */
  invoke: number;
  complete: number;
  /** Lease expiry on this clock (updated by renewals, read when the hold ends). */
  expiresAt: number;
  /** When `lease.signal` aborted (lease lost or released), if it did. */
  lostAt?: number;
  /** Release invocation / completion and outcome (undefined until released). */
  releaseInvoke?: number;
  releaseComplete?: number;
  releaseOutcome?: Outcome;
  releaseResult?: string;
  /** Fencing token (fenced locks). */
  token?: number;
}

/** The window a hold was definitely held in (see {@link Hold}); empty when `end <= start`. */
export function holdWindow(hold: Hold): { start: number; end: number } {
  const end = Math.min(
    hold.releaseInvoke ?? Number.POSITIVE_INFINITY,
    hold.expiresAt,
    hold.lostAt ?? Number.POSITIVE_INFINITY,
  );
  return { start: hold.complete, end };
}

/** Records operations and holds on one monotonic clock. */
export class History {
  readonly ops: Op[] = [];
  readonly holds: Hold[] = [];
  readonly #origin = performance.now();

  /** Now, in ms since the history started (monotonic). */
  now(): number {
    return performance.now() - this.#origin;
  }

  /**
   * Converts an epoch-ms instant (`Date.now()` clock, e.g. `lease.expiresAt`) to this clock.
   * Rounded down by 1 ms: `Date.now()` truncates to whole ms, so the true remaining time may be
   * up to 1 ms shorter than `epochMs - Date.now()`.
   */
  fromEpoch(epochMs: number): number {
    return this.now() + (epochMs - Date.now()) - 1;
  }

  /** Starts an operation; settle it with one of the returned functions. */
  invoke(process: number, op: OpKind): PendingOp {
    const invoke = this.now();
    const settle = (outcome: Outcome, detail?: string): Op => {
      const entry: Op = { process, op, invoke, complete: this.now(), outcome };
      if (detail !== undefined) entry.detail = detail;
      this.ops.push(entry);
      return entry;
    };
    return {
      invoke,
      ok: (detail) => settle("ok", detail),
      fail: (detail) => settle("fail", detail),
      info: (detail) => settle("info", detail),
    };
  }

  /** Records a granted acquire (call right after the `ok`). */
  grant(
    op: Op,
    owner: string,
    expiresAtEpoch: number,
    token: number | undefined,
    signal: AbortSignal | undefined,
  ): Hold {
    const hold: Hold = {
      id: this.holds.length,
      process: op.process,
      owner,
      invoke: op.invoke,
      complete: op.complete,
      expiresAt: this.fromEpoch(expiresAtEpoch),
    };
    if (token !== undefined) hold.token = token;
    if (signal) {
      if (signal.aborted) hold.lostAt = op.complete;
      else signal.addEventListener("abort", () => (hold.lostAt ??= this.now()), { once: true });
    }
    this.holds.push(hold);
    return hold;
  }

  /** Counts of operations by kind and outcome, e.g. `{ acquire: { ok: 3, fail: 1, info: 0 } }`. */
  counts(): Record<OpKind, Record<Outcome, number>> {
    const zero = () => ({ ok: 0, fail: 0, info: 0 });
    const out = { acquire: zero(), release: zero(), increment: zero(), write: zero() };
    for (const op of this.ops) out[op.op][op.outcome] += 1;
    return out;
  }
}

/** An invoked operation waiting for its outcome. */
export interface PendingOp {
  invoke: number;
  ok(detail?: string): Op;
  fail(detail?: string): Op;
  info(detail?: string): Op;
}
