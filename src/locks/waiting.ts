/**
 * The wait loop every primitive with waiters shares (locks, semaphores, latches): attempts until
 * one succeeds or the wait budget is spent, and between attempts blocks on the primitive's wake
 * list (BLPOP), where the busy attempt registered this call as a waiter, so the script that frees
 * what it waits for wakes it at once; with `wait: "poll"`, a client that cannot block, a primitive
 * without a wake list, or a failed block, it sleeps with the PTTL-bounded backoff of wait.ts.
 * Redisson waits on pub/sub instead (RedissonLock#tryLock, RedissonSemaphore#tryAcquire,
 * RedissonCountDownLatch#await).
 * @module
 */
import { randomHex } from "../ids.js";
import { LOCK_WAITER_SLOT_MS } from "../limits.js";
import type { RequestCounter } from "../transport/index.js";
import { type AttemptOutcome, pollUntil } from "../wait.js";
import type { LockContext } from "./context.js";

/** What {@link waitFor} waits on. */
export interface WaitSpec<T> {
  /** Name of the primitive, for errors and events. */
  name: string;
  /**
   * Prefix of the waiters' own wake lists (lua/lib/wake.lua): waiter `<id>` blocks on
   * `<wakeKey>:<id>`. Absent when waiters can only poll.
   */
  wakeKey: string | undefined;
  /** Wait budget in ms; `undefined` waits until `signal` aborts; 0 makes one attempt. */
  waitTime: number | undefined;
  signal: AbortSignal | undefined;
  /** Every request of the wait (attempts and blocks) is added to it. */
  counter: RequestCounter;
  /**
   * One attempt. `waiter` is this call's waiter id ('' when it does not block): a busy attempt
   * registers it (as a waiter of the wake list) and an attempt that succeeds unregisters it.
   * Returns `{ pttl }` when busy: how long until what it waits for frees itself at the latest
   * (-1: unknown or never), which bounds the wait.
   */
  attempt(waiter: string): Promise<AttemptOutcome<T>>;
  /** Unregisters a waiter that gives up (in the background). */
  unregister?(waiter: string): void;
}

/**
 * Runs `spec.attempt` until it succeeds or the wait budget is spent (see the module
 * documentation). A waiter that gives up or is aborted while registered is unregistered.
 * @returns the value and attempts, or `null`, the attempts and the last busy attempt's pttl.
 * @throws signal.reason when aborted (an attempt in flight is the caller's to clean up).
 * @throws {TransportError} when an attempt fails.
 */
export async function waitFor<T>(
  ctx: LockContext,
  spec: WaitSpec<T>,
): Promise<{ value: T; attempts: number } | { value: null; attempts: number; pttl: number }> {
  const { wakeKey, signal, counter } = spec;
  const blocking =
    wakeKey !== undefined && spec.waitTime !== 0 && ctx.wait === "block" && ctx.runner.canBlock;
  // This call's registration as a waiter ("" = none), made by its busy attempts; a successful
  // attempt ends it, and so does giving up or aborting (one background request).
  const waiter = blocking ? randomHex() : "";
  let registered = false;
  const block = async (ms: number): Promise<boolean> => {
    try {
      await ctx.runner.block(spec.name, `${wakeKey}:${waiter}`, ms, signal, counter);
      return true;
    } catch (error) {
      if (signal?.aborted && error === signal.reason) throw error;
      // A failed wait costs a backoff sleep; the next attempt reports a real outage.
      return false;
    }
  };
  try {
    return await pollUntil(
      async (): Promise<AttemptOutcome<T>> => {
        const outcome = await spec.attempt(waiter);
        registered = waiter !== "" && !("acquired" in outcome);
        return outcome;
      },
      {
        waitTime: spec.waitTime,
        signal,
        policy: ctx.backoff,
        block: blocking ? block : undefined,
        blockCap: LOCK_WAITER_SLOT_MS / 2,
        // Every sleep or block is reported as a `wait` event before it starts.
        onSleep: (delayMs, attempt) =>
          ctx.emit({ type: "wait", name: spec.name, requests: 0, durationMs: delayMs, attempt }),
      },
    );
  } finally {
    if (registered) spec.unregister?.(waiter);
  }
}
