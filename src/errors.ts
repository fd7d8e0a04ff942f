/**
 * Error classes. Every error edgelock raises for a runtime condition extends
 * {@link EdgeLockError} and carries an explicit `name` (survives minification), a literal `code`
 * (survives serialization and duplicate package copies) and an optional `cause`. Bad arguments are
 * programmer errors and throw the built-in `TypeError` / `RangeError` instead, before any request.
 * Messages never contain owner ids, request ids, tokens, URLs or script text.
 * @module
 */

/** Literal codes of {@link EdgeLockError} subclasses. */
export type EdgeLockErrorCode =
  | "LOCK_NOT_HELD"
  | "LEASE_LOST"
  | "LOCK_TIMEOUT"
  | "LOCK_UPGRADE"
  | "OVER_RELEASE"
  | "PERMIT_NOT_HELD"
  | "CONFIGURATION"
  | "TRANSPORT"
  | "SERVICE_LIMIT";

/** Base class of every edgelock runtime error. Branch on `code`, not on the class name. */
export abstract class EdgeLockError extends Error {
  /** Stable machine-readable code. */
  abstract readonly code: EdgeLockErrorCode;
  /**
   * Name of the lock (or other primitive: every kind has a name, the Redis key of its state)
   * the error is about. (`name` is the error class's name, as on every `Error`.)
   */
  readonly resource: string;

  constructor(message: string, resource: string, options?: { cause?: unknown }) {
    super(message, options);
    this.resource = resource;
  }

  /** @deprecated Use {@link EdgeLockError.resource}: not every primitive is a lock. */
  get lockName(): string {
    return this.resource;
  }
}

/**
 * `unlock(owner)` on a lock that this owner does not hold (absent, expired, or held by someone
 * else). Mirrors Redisson's `IllegalMonitorStateException` from `RLock#unlock`.
 */
export class LockNotHeldError extends EdgeLockError {
  override readonly name = "LockNotHeldError";
  readonly code = "LOCK_NOT_HELD" as const;
  /** Why: the key is gone (`"expired"`) or another owner holds it (`"not-owner"`). */
  readonly reason: "expired" | "not-owner";

  constructor(lockName: string, reason: "expired" | "not-owner") {
    super(
      reason === "expired"
        ? `lock "${lockName}" is not held: it expired or was never acquired`
        : `lock "${lockName}" is held by another owner`,
      lockName,
    );
    this.reason = reason;
  }
}

/**
 * A lease is no longer held: `lease.renew()` found the owner field gone, or a keep-alive
 * renewal did. Also the reason `lease.signal` aborts with when the lease is lost, and when nobody
 * renews it any more: the `LeaseKeeper` gave up at `maxHoldTime`, or the service refused a
 * keep-alive renewal with a {@link ServiceLimitError} (then in `cause`, and the lock runs out at
 * the lease's expiry unless released before).
 *
 * `withLock` (and the Hono, Vercel and cron wrappers) reject with it after their function
 * settled when the lease was lost meanwhile (the function may have run unprotected: Redisson's
 * `unlock()` throws `IllegalMonitorStateException` then). `outcome` then says how the function
 * ended: `"returned"` with its value in `result`, or `"threw"` with its error in `cause`.
 */
export class LeaseLostError extends EdgeLockError {
  override readonly name = "LeaseLostError";
  readonly code = "LEASE_LOST" as const;
  /** `"lost"`: found no longer held, or no longer renewed; `"released"`: released by its holder. */
  readonly reason: "lost" | "released";
  /**
   * Set when a guarded function ran while the lease was lost: `"returned"` (its value is
   * `result`) or `"threw"` (its error is `cause`). Undefined on the lease's own signal and renew.
   */
  readonly outcome: "returned" | "threw" | undefined;
  /** What the guarded function returned, when `outcome` is `"returned"`; else undefined. */
  readonly result: unknown;

  /**
   * `settled`: how a guarded function ended (see `outcome`), or `{ refused }`: the service
   * limit that stopped the lease's renewals (its `cause`).
   */
  constructor(
    lockName: string,
    reason: "lost" | "released" = "lost",
    settled?:
      | { outcome: "returned"; result: unknown }
      | { outcome: "threw"; error: unknown }
      | { refused: ServiceLimitError },
  ) {
    super(
      reason === "released"
        ? `lease on lock "${lockName}" was released`
        : settled && "refused" in settled
          ? `lease on lock "${lockName}" is no longer renewed: the service's "${settled.refused.limit}" limit refused its renewal; treat it as lost, it runs out at its expiry`
          : `lease on lock "${lockName}" was lost: it expired or another owner took the lock`,
      lockName,
      settled && "error" in settled
        ? { cause: settled.error }
        : settled && "refused" in settled
          ? { cause: settled.refused }
          : undefined,
    );
    this.reason = reason;
    this.outcome = settled && "outcome" in settled ? settled.outcome : undefined;
    this.result = settled && "result" in settled ? settled.result : undefined;
  }
}

/** `withLock` (or `lock()` with a deadline) could not acquire within `waitTime`. */
export class LockTimeoutError extends EdgeLockError {
  override readonly name = "LockTimeoutError";
  readonly code = "LOCK_TIMEOUT" as const;
  /** The wait budget in ms that ran out. */
  readonly waitTime: number;
  /** Acquire attempts made (each one HTTP request on a warm client). */
  readonly attempts: number;

  constructor(lockName: string, waitTime: number, attempts: number) {
    super(
      `could not acquire lock "${lockName}" within ${waitTime} ms (${attempts} attempts)`,
      lockName,
    );
    this.waitTime = waitTime;
    this.attempts = attempts;
  }
}

/**
 * An owner holding the read lock of a read-write lock asked for its write lock. Redisson does not
 * support this upgrade either, but its caller waits for itself forever; here the attempt fails at
 * once, having changed nothing. Release the read lease first (or take the write lock first and
 * the read lock under it: a downgrade is allowed).
 */
export class LockUpgradeError extends EdgeLockError {
  override readonly name = "LockUpgradeError";
  readonly code = "LOCK_UPGRADE" as const;

  constructor(lockName: string) {
    super(
      `the write lock of "${lockName}" cannot be taken by an owner holding its read lock (no upgrade)`,
      lockName,
    );
  }
}

/**
 * A semaphore release gives back more permits than edgelock callers have taken (and not given
 * back), and would make more permits available than were set through edgelock (`trySetPermits`
 * plus `addPermits`), or the semaphore was never set. Nothing was changed. Giving back what was
 * taken is never refused, whatever a Redisson client did to the semaphore meanwhile. Redisson's
 * release has no bound, so a buggy or retried release silently adds permits; pass
 * `{ overRelease: true }` to release beyond the bound on purpose.
 */
export class OverReleaseError extends EdgeLockError {
  override readonly name = "OverReleaseError";
  readonly code = "OVER_RELEASE" as const;
  /** Permits the release tried to give back. */
  readonly permits: number;
  /** Permits available when it was refused. */
  readonly available: number;
  /** Permits set on the semaphore; `null` when it was never set. */
  readonly limit: number | null;

  constructor(resource: string, permits: number, available: number, limit: number | null) {
    super(
      limit === null
        ? `semaphore "${resource}" was never set: there are no permits to release`
        : `releasing ${permits} permit(s) would make ${available + permits} of semaphore "${resource}" available, more than the ${limit} set`,
      resource,
    );
    this.permits = permits;
    this.available = available;
    this.limit = limit;
  }
}

/**
 * `release(id)` of a permit-expirable semaphore for a permit that is not held: already
 * released, never acquired, or expired and returned to the pool. Mirrors Redisson's
 * `IllegalArgumentException("Permit with id … has already been released or doesn't exist")`.
 */
export class PermitNotHeldError extends EdgeLockError {
  override readonly name = "PermitNotHeldError";
  readonly code = "PERMIT_NOT_HELD" as const;

  constructor(resource: string) {
    super(
      `permit of semaphore "${resource}" is not held: already released, expired or never acquired`,
      resource,
    );
  }
}

/**
 * The Redis client cannot make a request: it was built without a REST URL or without a token
 * (`Redis.fromEnv()` with `UPSTASH_REDIS_REST_URL` or `UPSTASH_REDIS_REST_TOKEN` unset only
 * warns, then sends to no URL or as `Bearer undefined`). Refused on a call's first use of the
 * client, before any request is sent; retrying cannot help: fix the configuration.
 */
export class ConfigurationError extends EdgeLockError {
  override readonly name = "ConfigurationError";
  readonly code = "CONFIGURATION" as const;
}

/**
 * The HTTP request or Redis failed. `ambiguous` is true when the command may have been applied
 * (network failure, 5xx, malformed reply, no answer in time); edgelock's scripts are idempotent,
 * so an ambiguous acquire is cancelled in the background. A release or count change resends its
 * request until Redis answers (`definiteWithin`) and is ambiguous only past that bound; it is
 * then resent in the background (a `settle` event says how it ended), and repeating the same
 * lease's or permit handle's `release()` is safe. An HTTP answer other than 2xx keeps its
 * status (`status`) and the server's error text (in the message). A 4xx is definite: nothing
 * was applied; a 408, 425 or 429 ("not now") is sent once more first, any other 4xx (a wrong URL
 * path's 404, a bad token's 401) fails at once. A limit of the service is the subclass
 * {@link ServiceLimitError}.
 * `cause` is a scrubbed copy of the client error (the original embeds the whole command).
 */
export class TransportError extends EdgeLockError {
  override readonly name: "TransportError" | "ServiceLimitError" = "TransportError";
  readonly code: "TRANSPORT" | "SERVICE_LIMIT" = "TRANSPORT";
  /** True when the command may have reached Redis and been applied. */
  readonly ambiguous: boolean;
  /**
   * HTTP status of the REST API's answer the request failed on (e.g. 400, 401, 404, 429, 500;
   * 200 for a body that could not be read); `undefined` when no answer came (network failure,
   * time limit), or when the client does not report statuses (a client that is not
   * `@upstash/redis`'s own, or one wrapped in a Proxy).
   */
  readonly status: number | undefined;

  constructor(
    lockName: string,
    message: string,
    ambiguous: boolean,
    options?: { cause?: unknown; status?: number | undefined },
  ) {
    super(message, lockName, options);
    this.ambiguous = ambiguous;
    this.status = options?.status;
  }
}

/**
 * Which limit of the service (Upstash) refused a request, from its error text:
 * - `"requests"`: the plan's request budget is used up (`ERR max requests limit exceeded`, the
 *   monthly count or a pay-as-you-go budget; `ERR max daily request limit exceeded` on older free
 *   plans);
 * - `"connections"`: too many requests or connections at once (`ERR max concurrent connections
 *   exceeded`);
 * - `"request-size"`: one request is larger than the plan allows (`ERR max request size
 *   exceeded`);
 * - `"record-size"`: one value is larger than the plan allows (`ERR max single record size
 *   exceeded`);
 * - `"key-size"`: one key is longer than the plan allows (`ERR max key size exceeded`);
 * - `"storage"`: the database holds as much data as its plan allows (`ERR DB capacity quota
 *   exceeded`): writes are refused, reads and deletes still work.
 */
export type ServiceLimit =
  | "requests"
  | "connections"
  | "request-size"
  | "record-size"
  | "key-size"
  | "storage";

/**
 * The service refused a request because one of its limits is reached (see {@link ServiceLimit}):
 * nothing was applied (`ambiguous` is always false), and edgelock does not resend it, since
 * resending into a limit only adds load. A keep-alive renewal refused this way stops renewing
 * its lease and aborts `lease.signal` with a {@link LeaseLostError} whose `cause` is this error.
 * Raise the limit (plan, budget, quota) or lower the load; see docs/operations.md.
 */
export class ServiceLimitError extends TransportError {
  override readonly name = "ServiceLimitError" as const;
  override readonly code = "SERVICE_LIMIT" as const;
  /** Which limit was reached. */
  readonly limit: ServiceLimit;
  /** The service's own error text, URLs cut out (e.g. `ERR max requests limit exceeded`). */
  readonly reply: string;

  /** `reply`: the service's error text (scrubbed); `status`: the HTTP status it came with. */
  constructor(
    resource: string,
    limit: ServiceLimit,
    reply: string,
    options?: { cause?: unknown; status?: number | undefined },
  ) {
    super(
      resource,
      `Redis request for "${resource}" refused by the service's "${limit}" limit (${reply}); nothing was applied, and it is not resent`,
      false,
      options,
    );
    this.limit = limit;
    this.reply = reply;
  }
}
