/** AbortSignal helpers shared by the wait loop, the transport and leases. */

/** Sleeps `ms` milliseconds; rejects with `signal.reason` (and clears the timer) on abort. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Something to do while a call is still unanswered `after` ms from its start: {@link Deadline}
 * runs `ring` then, on the timer it already has. `ring` returns how many ms later to ring again,
 * or `undefined` for never.
 */
export interface Alarm {
  after: number;
  ring(): number | undefined;
}

/**
 * A call's time limit joined with its caller's optional signal, without an AbortController (on
 * Node 20 each one costs more than the rest of a warm request's own bookkeeping). It ends once:
 * when `ms` have passed (with the reason `onTimeout` makes) or when `signal` aborts (with its
 * reason). An `alarm` due before then shares its one timer (a request's hedge, locks/definite.ts:
 * one timer per request instead of two). {@link clear} it when the call settles.
 */
export class Deadline {
  /** True once the time is up or the signal aborted (read-only for callers). */
  ended = false;
  /** Why it ended: the timeout's reason or the signal's (read-only for callers). */
  reason: unknown;
  /** When its time is up, in epoch ms (`Date.now()` clock). */
  readonly at: number;
  /** Rejects with the reason once the deadline ends; made when first raced against. */
  #ends: Promise<never> | undefined;
  #reject: ((reason: unknown) => void) | undefined;
  #timer: ReturnType<typeof setTimeout>;
  readonly #onTimeout: () => unknown;
  readonly #alarm: Alarm | undefined;
  readonly #unlisten: (() => void) | undefined;

  constructor(ms: number, onTimeout: () => unknown, signal?: AbortSignal, alarm?: Alarm) {
    this.at = Date.now() + ms;
    this.#onTimeout = onTimeout;
    this.#alarm = alarm;
    this.#timer = this.#arm(alarm?.after);
    if (signal) {
      const onAbort = () => this.#end(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      this.#unlisten = () => signal.removeEventListener("abort", onAbort);
      // An abort before it began fires no event: it ends at once.
      if (signal.aborted) this.#end(signal.reason);
    }
  }

  /** The one timer: the alarm's, `ms` from now, when that comes before the end; else the end's. */
  #arm(ms: number | undefined): ReturnType<typeof setTimeout> {
    const left = this.at - Date.now();
    return ms !== undefined && ms < left
      ? setTimeout(() => {
          const again = this.#alarm?.ring();
          if (!this.ended) this.#timer = this.#arm(again);
        }, ms)
      : setTimeout(() => this.#end(this.#onTimeout()), Math.max(0, left));
  }

  #end(reason: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.reason = reason;
    this.#reject?.(reason);
    this.clear();
  }

  /**
   * Settles like `promise`, or rejects with the reason as soon as the deadline ends. The promise
   * keeps running; a rejection it produces later is observed so it is never unhandled.
   */
  race<T>(promise: Promise<T>): Promise<T> {
    if (this.ended) {
      promise.catch(() => {});
      return Promise.reject(this.reason);
    }
    if (!this.#ends) {
      this.#ends = new Promise<never>((_, reject) => {
        this.#reject = reject;
      });
      this.#ends.catch(() => {});
    }
    return Promise.race([promise, this.#ends]);
  }

  /** Sleeps `ms` milliseconds, or rejects with the reason as soon as the deadline ends. */
  sleep(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    return this.race(new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))).finally(
      () => clearTimeout(timer),
    );
  }

  /** Stops the timer and lets go of the signal. */
  clear(): void {
    clearTimeout(this.#timer);
    this.#unlisten?.();
  }
}
