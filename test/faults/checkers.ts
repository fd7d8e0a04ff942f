/**
 * Checkers over a run's history (history.ts): each takes what was recorded and counts
 * violations, nothing else. They are deliberately independent of the library: a negative
 * control (a broken lock) must make every one of them fire.
 *
 * (a) {@link checkOverlaps}: definite hold windows of different owners on one lock that overlap
 *     (more than `capacity` at once for a semaphore).
 * (b) {@link FencedWitness} + {@link checkFencing}: a resource that keeps the highest fencing
 *     token and refuses lower or equal ones (worker/fenced-store.ts's rule); stale writes it
 *     accepted, and token regressions.
 * (c) {@link checkCounter}: lost updates of an unguarded read-modify-write counter.
 * (d) {@link classifyKeys}: keys left after quiescence.
 */
import { LOCK_WAITER_SLOT_MS } from "../../src/index.js";
import { LOCK_HAND_OFF_SLOT_MS } from "../../src/limits.js";
import { type Hold, holdWindow } from "./history.js";

/** What the overlap checker found. */
export interface OverlapReport {
  /** Holds whose window began while `capacity` windows of other owners were open. */
  violations: number;
  /** Most windows of distinct owners open at once. */
  maxConcurrent: number;
  /** Up to 3 human-readable examples. */
  examples: string[];
}

/**
 * (a) Overlapping windows. A hold's window is [acquire completion, min(release invocation,
 * expiry, loss)] ({@link holdWindow}); windows that merely touch do not overlap. `info` acquires
 * make no window: the process never acted on them (their possible hold only constrains others,
 * so it can explain nothing away); `info` and `fail` releases still end the window at their
 * invocation, because the holder stopped acting there.
 */
export function checkOverlaps(holds: readonly Hold[], capacity = 1): OverlapReport {
  const windows = holds
    .map((hold) => ({ hold, ...holdWindow(hold) }))
    .filter((w) => w.end > w.start)
    .sort((a, b) => a.start - b.start);
  let active: typeof windows = [];
  let violations = 0;
  let maxConcurrent = 0;
  const examples: string[] = [];
  for (const w of windows) {
    active = active.filter((a) => a.end > w.start);
    const others = active.filter((a) => a.hold.owner !== w.hold.owner);
    if (others.length >= capacity) {
      violations += 1;
      const other = others[0];
      if (examples.length < 3 && other) {
        examples.push(
          `hold ${w.hold.id} (p${w.hold.process}) [${ms(w.start)}, ${ms(w.end)}] began inside ` +
            `hold ${other.hold.id} (p${other.hold.process}) [${ms(other.start)}, ${ms(other.end)}]`,
        );
      }
    }
    active.push(w);
    maxConcurrent = Math.max(maxConcurrent, new Set(active.map((a) => a.hold.owner)).size);
  }
  return { violations, maxConcurrent, examples };
}

/** One write the witness saw. */
export interface FencedWrite {
  hold: Hold;
  token: number;
  at: number;
  accepted: boolean;
  /** Written after the writer's window had ended (a stalled holder). */
  late: boolean;
}

/**
 * (b) A fenced resource inside the test: keeps the highest token accepted and accepts a write
 * only with a strictly greater one (worker/fenced-store.ts's rule), synchronously, so nothing
 * comes between the comparison and the write.
 */
export class FencedWitness {
  readonly writes: FencedWrite[] = [];
  #highest = Number.NEGATIVE_INFINITY;
  readonly #waiters = new Set<(write: FencedWrite) => void>();

  /** Highest token accepted so far. */
  get highest(): number {
    return this.#highest;
  }

  /** Offers a write with `hold`'s token at time `at`; true when accepted. */
  write(hold: Hold, token: number, at: number, late = false): boolean {
    const accepted = token > this.#highest;
    if (accepted) this.#highest = token;
    const write: FencedWrite = { hold, token, at, accepted, late };
    this.writes.push(write);
    for (const waiter of [...this.#waiters]) waiter(write);
    return accepted;
  }

  /**
   * Resolves true as soon as the witness has accepted a write from a grant requested after
   * `hold` was granted (a newer holder wrote), false after `timeoutMs` without one.
   */
  newerWrite(hold: Hold, timeoutMs: number): Promise<boolean> {
    const newer = (w: FencedWrite) => w.accepted && w.hold.invoke > hold.complete;
    if (this.writes.some(newer)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (result: boolean) => {
        clearTimeout(timer);
        this.#waiters.delete(waiter);
        resolve(result);
      };
      const waiter = (w: FencedWrite) => {
        if (newer(w)) done(true);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      this.#waiters.add(waiter);
    });
  }
}

/** What the fencing checker found. */
export interface FencingReport {
  writes: number;
  accepted: number;
  refused: number;
  /** Writes made after the writer's window ended, and how many of them were refused. */
  late: number;
  lateRefused: number;
  /**
   * Writes of a grant G accepted after the witness had received a write (accepted or refused)
   * from a grant requested after G was granted (real-time order): the resource took an older
   * holder's write after a newer holder had written. Fencing exists to make this 0: the newer
   * grant's token is higher, so the witness's highest already exceeds G's.
   */
  stale: number;
  /**
   * Grants whose token is not above the token of a grant that completed before they were
   * requested (S-3: tokens must follow real-time grant order, across restarts too).
   */
  regressions: number;
}

/** (b) Stale writes the witness accepted, and token regressions among `holds`. */
export function checkFencing(
  writes: readonly FencedWrite[],
  holds: readonly Hold[],
): FencingReport {
  let stale = 0;
  let newestRequest = Number.NEGATIVE_INFINITY;
  for (const w of writes) {
    if (w.accepted && newestRequest > w.hold.complete) stale += 1;
    newestRequest = Math.max(newestRequest, w.hold.invoke);
  }
  const late = writes.filter((w) => w.late);
  return {
    writes: writes.length,
    accepted: writes.filter((w) => w.accepted).length,
    refused: writes.filter((w) => !w.accepted).length,
    late: late.length,
    lateRefused: late.filter((w) => !w.accepted).length,
    stale,
    regressions: tokenRegressions(holds),
  };
}

/**
 * Grants G' with a grant G such that G completed before G' was requested and
 * token(G') <= token(G). Holds without a token are ignored. O(n log n).
 */
export function tokenRegressions(holds: readonly Hold[]): number {
  const fenced = holds.filter((h): h is Hold & { token: number } => h.token !== undefined);
  const byComplete = [...fenced].sort((a, b) => a.complete - b.complete);
  const byInvoke = [...fenced].sort((a, b) => a.invoke - b.invoke);
  let highest = Number.NEGATIVE_INFINITY;
  let next = 0;
  let regressions = 0;
  for (const g of byInvoke) {
    for (let c = byComplete[next]; c && c.complete < g.invoke; c = byComplete[++next]) {
      highest = Math.max(highest, c.token);
    }
    if (g.token <= highest) regressions += 1;
  }
  return regressions;
}

/** What the counter checker found. */
export interface CounterReport {
  /** Read-modify-writes that completed (`ok` increments). */
  increments: number;
  /** The counter's final value. */
  final: number;
  /** `increments - final`: updates overwritten by a concurrent read-modify-write. */
  lost: number;
  /** Increments that completed after their holder's window ended (outside the lock). */
  outsideWindow: number;
}

/** (c) Lost updates: every `ok` increment must be in the final value. */
export function checkCounter(
  increments: number,
  final: number,
  outsideWindow: number,
): CounterReport {
  return { increments, final, lost: increments - final, outsideWindow };
}

/** A key found by SCAN, with its PTTL (-1: no TTL). */
export interface KeyEntry {
  key: string;
  pttl: number;
}

/** What may remain after quiescence. */
export interface KeyRules {
  /** The clients' replay window: replay records live at most 2 windows from their last write. */
  replayWindow: number;
  /** Keys documented to stay without a TTL (semaphore permit counters and their records). */
  persistent?: readonly string[];
}

/** What the key checker found. */
export interface KeysReport {
  /** Keys that should not be there: the checker's violations. */
  leaked: KeyEntry[];
  /** Replay records within their window (`edgelock_replay:{…}:<request id>`). */
  replay: number;
  /** Fenced-lock token counters (`redisson_lock_token:{…}`, persistent by design). */
  tokens: number;
  /**
   * Waiter registrations and wake lists whose TTL is within one and a quarter waiter slots (60 s
   * for a reentrant-lock waiter asking for hand-offs, 30 s for the others; the reentrant lock's
   * registry may live a quarter slot past its last registration).
   */
  waiting: number;
  waitingKeys: KeyEntry[];
  /** Documented persistent keys (`rules.persistent`). */
  persistent: number;
}

/**
 * The longest waiter bookkeeping lives: a registration's length (src/limits.ts), and for the
 * reentrant lock's registry a quarter of one more (lib/reentrant.lua, hold_register, sets its TTL
 * that far ahead so that the next registrations need no call).
 */
const WAITER_SLOT_MS = Math.max(LOCK_WAITER_SLOT_MS, LOCK_HAND_OFF_SLOT_MS) * 1.25;
const REPLAY = /^edgelock_replay:\{[^}]*\}:.+$/;
const TOKEN = /^redisson_lock_token:\{[^}]*\}$/;
// The waiters' ZSET, the grants beside it (lua/lib/wake.lua), the registry's mark (`:any`: the
// reentrant lock's lib/wake.lua, the permit-expirable semaphore's lib/permits.lua), and wake lists.
const WAITING = /^edgelock_(waiting:\{[^}]*\}(:grant|:any)?|wake:\{[^}]*\}:.+)$/;

/**
 * (d) Sorts the keys left after quiescence into documented ones (replay records within their
 * window, token counters, waiter bookkeeping that lapses within a slot, `rules.persistent`) and
 * leaks (everything else, e.g. a lock HASH nobody holds, or a replay record without a TTL).
 */
export function classifyKeys(entries: readonly KeyEntry[], rules: KeyRules): KeysReport {
  const report: KeysReport = {
    leaked: [],
    replay: 0,
    tokens: 0,
    waiting: 0,
    waitingKeys: [],
    persistent: 0,
  };
  const persistent = new Set(rules.persistent ?? []);
  for (const entry of entries) {
    const { key, pttl } = entry;
    if (REPLAY.test(key) && pttl > 0 && pttl <= rules.replayWindow) report.replay += 1;
    else if (TOKEN.test(key)) report.tokens += 1;
    else if (WAITING.test(key) && pttl > 0 && pttl <= WAITER_SLOT_MS) {
      report.waiting += 1;
      report.waitingKeys.push(entry);
    } else if (persistent.has(key)) report.persistent += 1;
    else report.leaked.push(entry);
  }
  return report;
}

function ms(t: number): string {
  return `${t.toFixed(1)} ms`;
}
