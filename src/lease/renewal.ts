/**
 * The renewal rules every keep-alive shares (the in-invocation timer, the keeper polling, and the
 * `LeaseKeeper` Durable Object's alarm), and the one reschedule loop the in-invocation ones run.
 * @module
 */

/** Renewal period: Redisson's watchdog renews at a third of the lease. */
export const renewalPeriod = (leaseTime: number): number => Math.max(1, Math.floor(leaseTime / 3));

/** After a failed renewal, try again sooner than a period: the lease is running down. */
export const retryDelay = (leaseTime: number): number => Math.max(1, Math.floor(leaseTime / 9));

/**
 * Time limit of a keep-alive renewal: a hung one is abandoned at a sixth of the lease, so that
 * (with retries every ninth) two more fit before the lease runs out.
 */
export const renewalTimeout = (leaseTime: number): number => Math.max(1, Math.ceil(leaseTime / 6));

/**
 * Reads the `LeaseKeeper`'s `EDGELOCK_REDIS_CLUSTER` variable: `"true"` or `"1"` (any case,
 * surrounding spaces ignored) mean the Redis behind the REST API is a Redis Cluster, so batched
 * renewals go out per hash slot; anything else, or unset, means it is not.
 */
export const isClusterFlag = (value: unknown): boolean =>
  typeof value === "string" && /^(?:true|1)$/i.test(value.trim());

/** A lease id: the 128-bit request id of the acquire, in hex. */
export const isLeaseId = (value: unknown): value is string =>
  typeof value === "string" && /^[0-9a-f]{32}$/.test(value);

/**
 * Runs `tick` `first` ms from now, then again after the delay each run resolves to, until a run
 * resolves to `undefined` or the returned stop function is called. The timer never keeps a Node
 * process alive on its own. `tick` must not reject.
 */
export function reschedule(tick: () => Promise<number | undefined>, first: number): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const arm = (ms: number) => {
    timer = setTimeout(run, ms);
    (timer as { unref?: () => void }).unref?.();
  };
  const run = () => {
    if (stopped) return;
    void tick().then((next) => {
      if (!stopped && next !== undefined) arm(next);
    });
  };
  arm(first);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
