/**
 * Taking over `@upstash/redis`'s own retries. The client resends a request after any network
 * error, up to 5 times over about 4.3 s by default, and reports only the last error, after its
 * last attempt: longer than the default 3 s time limit of a call, and without saying whether any
 * attempt reached Redis. For a script call, edgelock uses a view of the same client whose
 * attempts are single, and makes the client's retries itself (same count, same backoff), inside
 * the call's time limit, seeing every attempt's error. A call whose every attempt failed before
 * connecting (ECONNREFUSED and the like) is then known not to have been sent.
 * @module
 */
import type { RedisLike } from "./redis.js";

/** The retry schedule of an `@upstash/redis` client (its `retry` option, resolved). */
export interface RetryPolicy {
  /** Resends after the first attempt. */
  attempts: number;
  /** Pause before resend `i` (0-based), in ms. */
  backoff: (retry: number) => number;
}

/** A client whose requests are each one attempt, and the retry schedule of the original. */
export interface DetachedClient {
  redis: RedisLike;
  retry: RetryPolicy;
}

/** The parts of an `@upstash/redis` 1.x `Redis` instance read here. */
interface UpstashShape {
  client?: { request?: unknown; retry?: { attempts?: unknown; backoff?: unknown } };
  opts?: unknown;
}

/**
 * A view of an `@upstash/redis` client that makes one attempt per request (same URL, token,
 * headers, encoding and options, sharing its state through the prototype), with the client's
 * retry schedule; `undefined` for any other object (its retries, if any, stay its own). A client
 * whose `eval`/`evalsha` are not the library's own (a Proxy or wrapper that counts, logs or
 * alters calls) is left alone too, so that the wrapper keeps seeing every call.
 *
 * The view sends each command as a request of its own even when the client auto-pipelines (its
 * default): a script call's time limit and hedge then time its own round trip, not a batch's
 * that other commands of the same tick joined, and it skips the batching's work (a pipeline
 * made and run per command: about 0.1 ms of a lock cycle on loopback). Upstash bills commands,
 * not requests, so the bill is the same.
 */
export function detachRetries(redis: RedisLike): DetachedClient | undefined {
  try {
    if (!isOwnMethod(redis, "eval") || !isOwnMethod(redis, "evalsha")) return undefined;
    const shape = redis as unknown as UpstashShape;
    const client = shape.client;
    const retry = client?.retry;
    if (
      typeof client?.request !== "function" ||
      typeof retry?.attempts !== "number" ||
      typeof retry.backoff !== "function" ||
      retry.attempts < 0
    ) {
      return undefined;
    }
    // The root class of the client (the runtime-neutral `Redis`) takes a requester directly.
    let proto: object | null = Object.getPrototypeOf(redis);
    while (proto && Object.getPrototypeOf(proto) !== Object.prototype) {
      proto = Object.getPrototypeOf(proto);
    }
    const Root = (proto as { constructor?: unknown } | null)?.constructor;
    if (typeof Root !== "function") return undefined;
    const single = Object.create(client) as { retry: RetryPolicy; request: unknown };
    single.retry = { attempts: 0, backoff: () => 0 };
    single.request = withStatus(client.request as (req: unknown) => Promise<unknown>);
    const view = new (Root as new (client: unknown, opts: unknown) => UpstashShape & RedisLike)(
      single,
      shape.opts,
    );
    if (typeof view.eval !== "function" || typeof view.evalsha !== "function") return undefined;
    const backoff = retry.backoff as (retry: number) => number;
    return { redis: view, retry: { attempts: retry.attempts, backoff: (i) => backoff(i) } };
  } catch {
    return undefined;
  }
}

/**
 * True when `redis[key]` is the client's own method: the instance's own function (a `Redis`
 * without auto-pipelining), or the function the library's auto-pipelining proxy hands out
 * (recognised by the property it calls, which minifiers keep).
 */
function isOwnMethod(redis: RedisLike, key: "eval" | "evalsha"): boolean {
  const seen: unknown = redis[key];
  if (typeof seen !== "function") return false;
  if (Object.getOwnPropertyDescriptor(redis, key)?.value === seen) return true;
  return Function.prototype.toString.call(seen).includes("withAutoPipeline");
}

/**
 * The client's `request` with the HTTP status of the answer kept on the error it throws (`status`,
 * read by {@link statusOf}): the client's `UpstashError` holds only the body's `error` text, so a
 * 404 from a wrong URL and a 500 read alike. The client calls the global
 * `fetch` before its first `await`, so `fetch` is wrapped for that synchronous stretch only and
 * put back before any other code can run. Where the global cannot be replaced, or a client
 * awaits before it fetches, the error goes without a status, as before.
 */
function withStatus(request: (req: unknown) => Promise<unknown>) {
  return function (this: unknown, req: unknown): Promise<unknown> {
    const scope = globalThis as { fetch: typeof fetch };
    const original = scope.fetch;
    let status: number | undefined;
    let wrapped = false;
    try {
      scope.fetch = (input, init) => {
        const answer = Reflect.apply(original, globalThis, [input, init]) as Promise<Response>;
        // Registered before the client's own await: it runs first.
        answer.then(
          (response) => {
            status = response.status;
          },
          () => {},
        );
        return answer;
      };
      wrapped = true;
    } catch {
      // A read-only global: no status.
    }
    let sent: Promise<unknown>;
    try {
      sent = request.call(this, req);
    } finally {
      if (wrapped) scope.fetch = original;
    }
    return sent.catch((error: unknown) => {
      if (status !== undefined && error instanceof Error) {
        (error as Error & { status?: number }).status = status;
      }
      throw error;
    });
  };
}

/**
 * The HTTP status a client error carries (see {@link withStatus}; a subscription stream's
 * refusal carries its own), if any.
 */
export function statusOf(error: unknown): number | undefined {
  const status = error instanceof Error ? (error as { status?: unknown }).status : undefined;
  return typeof status === "number" ? status : undefined;
}

/** Error codes of a request that failed before its connection was made: nothing was sent. */
const NOT_SENT = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** The code of the first coded error in a cause chain (`ECONNREFUSED`, …), or `undefined`. */
export function causeCode(error: unknown): string | undefined {
  let cause: unknown = error instanceof Error ? error.cause : undefined;
  for (let depth = 0; depth < 4 && cause instanceof Error; depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && /^[A-Z][A-Z0-9_]{1,40}$/.test(code)) return code;
    cause = (cause as { errors?: unknown[] }).errors?.[0] ?? cause.cause;
  }
  return undefined;
}

/** True for a network error (what `@upstash/redis` retries): `fetch` threw. */
export function isNetworkError(error: unknown): boolean {
  return error instanceof Error && !error.name.startsWith("Upstash") && error.name !== "AbortError";
}

/** True when a network error happened before any byte of the request was sent. */
export function wasNotSent(error: unknown): boolean {
  const code = causeCode(error);
  return code !== undefined && NOT_SENT.has(code);
}

/** A network error after which no attempt of the call had been sent. */
export class NotSentError extends Error {
  constructor(readonly error: unknown) {
    super("not sent");
  }
}
