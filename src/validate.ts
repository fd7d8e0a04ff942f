/**
 * Argument checks. Every public method validates its input here before any request is sent,
 * throwing `TypeError` (wrong type) or `RangeError` (wrong value) that names the option as the
 * caller wrote it.
 */
import { MAX_NAME_LENGTH, MAX_OWNER_LENGTH, MAX_TIME_MS } from "./limits.js";

/** Rejects anything but a plain options object (or undefined), and unknown keys in it. */
export function checkOptions<T extends object>(
  value: T | undefined,
  where: string,
  allowed: readonly string[],
): Partial<T> {
  if (value === undefined) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${where}: options must be an object`);
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new TypeError(`${where}: unknown option \`${key}\` (known: ${allowed.join(", ")})`);
    }
  }
  return value;
}

/** A string of 1 to `max` characters (names, owners, client ids). */
export function checkText(value: unknown, label: string, max: number): string {
  if (typeof value !== "string") throw new TypeError(`\`${label}\` must be a string`);
  if (value.length === 0 || value.length > max) {
    throw new RangeError(`\`${label}\` must be 1 to ${max} characters long`);
  }
  return value;
}

/** Lock names: 1–512 characters, no `{` or `}` (a hash tag would move the keys' slot). */
export function checkName(value: unknown, label = "name"): string {
  const name = checkText(value, label, MAX_NAME_LENGTH);
  if (name.includes("{") || name.includes("}")) {
    throw new RangeError(`\`${label}\` must not contain "{" or "}" (Redis hash-tag characters)`);
  }
  return name;
}

/** An integer number of milliseconds in [min, max]. */
export function checkMs(value: unknown, label: string, min: number, max = MAX_TIME_MS): number {
  if (typeof value !== "number")
    throw new TypeError(`\`${label}\` must be a number of milliseconds`);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(
      `\`${label}\` must be an integer number of milliseconds in [${min}, ${max}]`,
    );
  }
  return value;
}

/** Optional `leaseTime`: omitted means watchdog mode; 0 is refused (Redisson treats it as -1). */
export function checkLeaseTime(value: unknown, label = "leaseTime"): number | undefined {
  return value === undefined ? undefined : checkMs(value, label, 1);
}

/** Optional `waitTime`: 0 or omitted means one attempt. */
export function checkWaitTime(value: unknown, label = "waitTime"): number | undefined {
  return value === undefined ? undefined : checkMs(value, label, 0);
}

/**
 * The lock HASH fields edgelock keeps beside the owners (lua/lib/hold.lua: epoch, hand-off,
 * creating request, partial-release flag, fencing token, waiters flag): never an owner.
 */
const RESERVED_FIELDS: ReadonlySet<string> = new Set(
  ["epoch", "grant", "by", "partial", "token", "waiters"].map((f) => `edgelock:${f}`),
);

/** A caller-supplied owner: a non-empty string of at most 200 characters, not a field of ours. */
export function checkOwner(value: unknown, label = "owner"): string {
  const owner = checkText(value, label, MAX_OWNER_LENGTH);
  if (RESERVED_FIELDS.has(owner)) {
    throw new RangeError(
      `\`${label}\` must not be "${owner}" (a field edgelock keeps in the lock)`,
    );
  }
  return owner;
}

/** Optional AbortSignal. */
export function checkSignal(value: unknown, label = "signal"): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (
    typeof value !== "object" ||
    value === null ||
    typeof (value as AbortSignal).addEventListener !== "function" ||
    typeof (value as AbortSignal).aborted !== "boolean"
  ) {
    throw new TypeError(`\`${label}\` must be an AbortSignal`);
  }
  return value as AbortSignal;
}

/** Optional callback. */
export function checkFunction<F>(value: unknown, label: string): F | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "function") throw new TypeError(`\`${label}\` must be a function`);
  return value as F;
}

/**
 * `tryX(options)` of an acquiring call's `tryX`/`X` pair (tryLock/lock, tryAcquire/acquire):
 * checks `options` against `allowed` (which lists `waitTime`), then acquires waiting up to
 * `waitTime` ms (omitted: 0, one attempt).
 */
export function tryWithin<O extends { waitTime?: number }, R>(
  options: O | undefined,
  where: string,
  allowed: readonly string[],
  acquire: (o: Partial<O>, waitTime: number) => Promise<R>,
): Promise<R> {
  const o = checkOptions(options, where, allowed);
  return acquire(o, checkWaitTime(o.waitTime) ?? 0);
}

/**
 * `X(options)` of the pair: the same options but `waitTime`, acquiring without a deadline (until
 * the call's signal aborts), so it never comes back empty-handed.
 */
export async function untilAcquired<O extends object, R>(
  options: O | undefined,
  where: string,
  allowed: readonly string[],
  acquire: (o: Partial<O>, waitTime: undefined) => Promise<R | null>,
): Promise<R> {
  const o = checkOptions(
    options,
    where,
    allowed.filter((k) => k !== "waitTime"),
  );
  const acquired = await acquire(o, undefined);
  if (acquired === null) throw new Error(`unreachable: ${where}() without a deadline got nothing`);
  return acquired;
}
