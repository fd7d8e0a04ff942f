/**
 * Script transport: the only module that talks to `@upstash/redis`. EVALSHA first, EVAL when
 * Redis answers NOSCRIPT (the Redisson `useScriptCache` behaviour), every HTTP request counted,
 * every call bounded by a local time limit, the caller's AbortSignal raced locally (never handed
 * to the client: an aborted command there resolves with a fake result), errors scrubbed, replies
 * checked against the script's shape.
 * @module
 */

import { type Alarm, Deadline } from "../abort.js";
import { TransportError } from "../errors.js";
import { HEDGE_SAMPLES, MIN_HEDGE_MS, MIN_REQUEST_TIMEOUT_MS } from "../limits.js";
import type { LuaScript } from "../lua/script.js";
import { sentSource, splitBilled } from "./billed.js";
import type { RedisLike } from "./redis.js";
import {
  type DetachedClient,
  detachRetries,
  isNetworkError,
  NotSentError,
  wasNotSent,
} from "./retries.js";
import {
  isHttpFailure,
  isNoScriptError,
  malformedReply,
  missingCredentials,
  timedOut,
  toTransportError,
} from "./scrub.js";
import { sha1Of } from "./sha1.js";
import type { DirectStreams, StreamEndpoint } from "./sse.js";

export type { RedisLike, SubscriberLike } from "./redis.js";
export { isNoScriptError } from "./scrub.js";

/** One script call: what to run and on behalf of which named object. */
export interface ScriptCall {
  script: LuaScript;
  /** Name of the lock (or other primitive) the call is for, for error messages. */
  name: string;
  keys: string[];
  args: (string | number)[];
  /** Raced locally: on abort the call rejects with `signal.reason` while the request finishes. */
  signal?: AbortSignal | undefined;
  /** Time limit of this call in ms, when shorter than the runner's `requestTimeout`. */
  timeout?: number | undefined;
}

/** Counts the HTTP requests of one operation; {@link ScriptRunner.run} adds to it. */
export interface RequestCounter {
  requests: number;
  /**
   * Commands billed for the answered requests, as the scripts report them (each: its
   * EVAL/EVALSHA plus every call inside; a confirmed subscription: its SUBSCRIBE) when the
   * runner counts them (`countBilled`; otherwise 0). A request without an answer may be billed
   * too and is not counted. Absent until a request is answered.
   */
  billed?: number;
}

/** Answered round trips to one REST URL: RFC 6298's smoothed estimate, in ms. */
class RoundTrips {
  #samples = 0;
  #srtt = 0;
  #rttvar = 0;

  add(ms: number): void {
    if (this.#samples++ === 0) {
      this.#srtt = ms;
      this.#rttvar = ms / 2;
      return;
    }
    this.#rttvar = 0.75 * this.#rttvar + 0.25 * Math.abs(this.#srtt - ms);
    this.#srtt = 0.875 * this.#srtt + 0.125 * ms;
  }

  /** Smoothed round trip + 4 × its deviation; `undefined` before {@link HEDGE_SAMPLES} answers. */
  timeout(): number | undefined {
    return this.#samples < HEDGE_SAMPLES ? undefined : Math.ceil(this.#srtt + 4 * this.#rttvar);
  }
}

/**
 * Round trips per REST URL, shared by every `@upstash/redis` client on it in this isolate: a
 * Worker or a serverless function makes a new client per invocation, which would otherwise
 * hedge as a client that has measured nothing, in every invocation. Emptied past 16 URLs.
 */
const roundTrips = new Map<string, RoundTrips>();

/** The round trips of `redis`'s REST URL (`client.baseUrl`); a client's own without one. */
function roundTripsOf(redis: RedisLike): RoundTrips {
  const url = (redis as { client?: { baseUrl?: unknown } }).client?.baseUrl;
  if (typeof url !== "string" || url === "") return new RoundTrips();
  let known = roundTrips.get(url);
  if (!known) {
    if (roundTrips.size >= 16) roundTrips.clear();
    known = new RoundTrips();
    roundTrips.set(url, known);
  }
  return known;
}

/** Runs the project's Lua scripts over one `@upstash/redis` client. */
export class ScriptRunner {
  /** Time limit of one call (all its HTTP requests together), in ms. */
  readonly requestTimeout: number;
  readonly #redis: RedisLike;
  /** For an `@upstash/redis` client: a view of it making single attempts, retried here. */
  readonly #detached: DetachedClient | undefined;
  /** Scripts known to be in Redis's cache (run successfully by this runner). */
  readonly #loaded = new Set<LuaScript>();
  /** Whether Redis has answered NOSCRIPT to this runner (its cache was empty or flushed). */
  #cacheMissSeen = false;
  /** Where subscriptions are read directly (./sse.ts); `null`: through `subscribe()`. */
  #stream: StreamEndpoint | null | undefined;
  /** The round trips behind {@link hedgeAfter}: its REST URL's, shared in this isolate. */
  readonly #rtt: RoundTrips;
  /** Whether scripts go inside the counting wrapper (billed.ts), so replies say their bill. */
  readonly #counted: boolean;
  /** Whether the client was found to have its REST URL and token (it keeps them). */
  #credentialed = false;
  /**
   * True when the client can subscribe to a channel (`redis.subscribe`, over SSE). Read once: on
   * an auto-pipelining client every property read goes through a Proxy.
   */
  readonly canSubscribe: boolean;

  /**
   * `countBilled`: send scripts inside the wrapper that counts their calls (billed.ts), so that
   * {@link RequestCounter.billed} is filled; off, each script's own source is sent (same bill,
   * less work in Redis) and nothing is added to `billed`.
   */
  constructor(redis: RedisLike, requestTimeout: number, countBilled: boolean) {
    this.#redis = redis;
    this.#detached = detachRetries(redis);
    this.requestTimeout = requestTimeout;
    this.#rtt = roundTripsOf(redis);
    this.#counted = countBilled;
    this.canSubscribe = typeof redis.subscribe === "function";
  }

  /**
   * How long a call that resends its own request (same request id: locks/definite.ts) waits for
   * an answer before it sends another copy, in ms. TCP's retransmission timeout (RFC 6298:
   * smoothed round trip + 4 × its deviation) over the answered requests to this client's REST
   * URL in this isolate (every `@upstash/redis` client on that URL adds to it, so a client made
   * per invocation starts from what earlier ones measured; any other client: its own), so a copy
   * follows only an answer that is late by the measure of those round trips, at least
   * {@link MIN_HEDGE_MS} and at most a third of `requestTimeout` (which it is until
   * {@link HEDGE_SAMPLES} answers came: one or two round trips, the first ones cold, tell little
   * about the spread).
   */
  get hedgeAfter(): number {
    const most = Math.max(MIN_REQUEST_TIMEOUT_MS, Math.floor(this.requestTimeout / 3));
    const timeout = this.#rtt.timeout();
    return timeout === undefined ? most : Math.min(most, Math.max(MIN_HEDGE_MS, timeout));
  }

  /**
   * Runs a script and decodes its reply with `decode` (which returns `undefined` for a reply of
   * the wrong shape). Makes one HTTP request when Redis has the script cached; otherwise two for
   * the first script, and one (a direct EVAL) for each other script this runner has not run yet.
   * Resends once after an HTTP 5xx, 408, 425 or 429 (never after a limit of the service). After
   * a network error, an `@upstash/redis` client's own retries (count and backoff) are made here,
   * while the time limit allows the next one (see retries.ts); each attempt is added to `counter`. The whole call settles within
   * `requestTimeout` (or `timeout`, else `call.timeout`, when shorter) whatever the network does.
   * `alarm` rings while the call is unanswered (see {@link Alarm}), on the call's own timer.
   * @throws signal.reason when `signal` aborts first (the request may still apply).
   * @throws {ServiceLimitError} when a limit of the service refused it (definite).
   * @throws {TransportError} on HTTP/Redis failure (with the answer's `status` and text), on a
   * reply of the wrong shape, or when the time limit passes first (`ambiguous`: the request may
   * still apply). A 4xx is definite (nothing was applied). A call whose every attempt
   * failed before connecting (ECONNREFUSED, ENOTFOUND, …) is definite (nothing was sent) and
   * names the code.
   */
  async run<T>(
    call: ScriptCall,
    decode: (reply: unknown) => T | undefined,
    counter: RequestCounter,
    timeout?: number,
    alarm?: Alarm,
  ): Promise<T> {
    const { script, name, signal } = call;
    signal?.throwIfAborted();
    if (!this.#credentialed) {
      const missing = missingCredentials(this.#redis, name);
      if (missing) throw missing;
      this.#credentialed = true;
    }
    const limit = Math.min(
      this.requestTimeout,
      timeout ?? call.timeout ?? Number.POSITIVE_INFINITY,
    );
    // One deadline for every request of the call (NOSCRIPT fallback, resend after a 5xx): its
    // reason is the error the call rejects with when time runs out.
    const deadline = new Deadline(
      limit,
      () => timedOut(name, limit, this.requestTimeout),
      signal,
      alarm,
    );
    try {
      let sent: unknown;
      try {
        sent = await this.#send(call, counter, deadline);
      } catch (error) {
        if (deadline.ended || !isHttpFailure(error)) throw error;
        // An HTTP 5xx (which @upstash/redis never retries) may or may not have been applied, and
        // a 408, 425 or 429 was not: every script is replay-safe, so one resend with the same
        // arguments is harmless.
        await deadline.sleep(RESEND_DELAY_MS);
        sent = await this.#send(call, counter, deadline);
      }
      let reply = sent;
      if (this.#counted) {
        const split = splitBilled(sent);
        if (split === undefined) throw malformedReply(name, script.name);
        counter.billed = (counter.billed ?? 0) + split.billed;
        reply = split.reply;
      } else counter.billed ??= 0;
      const decoded = decode(reply);
      if (decoded === undefined) throw malformedReply(name, script.name);
      return decoded;
    } catch (error) {
      if (deadline.ended && error === deadline.reason) throw error;
      throw this.#scrub(error, call);
    } finally {
      deadline.clear();
    }
  }

  async #send(call: ScriptCall, counter: RequestCounter, deadline: Deadline): Promise<unknown> {
    const { script, keys, args } = call;
    const redis = this.#detached?.redis ?? this.#redis;
    // Once Redis has shown an empty script cache, a script this client has not run yet is
    // sent with EVAL straight away instead of paying a NOSCRIPT round trip of its own.
    if (!this.#cacheMissSeen || this.#loaded.has(script)) {
      const known = sha1Of(script, this.#counted);
      const sha1 = typeof known === "string" ? known : await known;
      try {
        const reply = await this.#attempts(
          () => redis.evalsha(sha1, keys, args),
          counter,
          deadline,
        );
        // A script answered by Redis is cached there from then on.
        this.#loaded.add(script);
        return reply;
      } catch (error) {
        if (deadline.ended || !isNoScriptError(error)) throw error;
        this.#cacheMissSeen = true;
      }
    }
    const source = sentSource(script, this.#counted);
    const reply = await this.#attempts(() => redis.eval(source, keys, args), counter, deadline);
    this.#loaded.add(script);
    return reply;
  }

  /**
   * One request, and for an `@upstash/redis` client its retries after network errors, each
   * counted. Stops when the next attempt would start after the call's deadline.
   * @throws {NotSentError} when every attempt failed before connecting.
   */
  async #attempts(
    send: () => Promise<unknown>,
    counter: RequestCounter,
    deadline: Deadline,
  ): Promise<unknown> {
    const retry = this.#detached?.retry;
    let sent = false;
    for (let attempt = 0; ; attempt++) {
      counter.requests += 1;
      const sentAt = Date.now();
      try {
        const reply = await deadline.race(send());
        this.#rtt.add(Date.now() - sentAt);
        return reply;
      } catch (error) {
        if (deadline.ended || !retry || !isNetworkError(error)) throw error;
        sent ||= !wasNotSent(error);
        const pause = Math.max(0, retry.backoff(attempt));
        if (attempt >= retry.attempts || Date.now() + pause >= deadline.at) {
          throw sent ? error : new NotSentError(error);
        }
        await deadline.sleep(pause);
      }
    }
  }

  /**
   * Subscribes to `channel` (one long-lived HTTP request, counted in `counter`). `ready`
   * resolves once the REST API confirmed the subscription, so a PUBLISH from then on reaches
   * `onMessage`; it rejects with a {@link TransportError} when the subscription fails or is not
   * confirmed within `requestTimeout`. `onLost` is called once if the stream fails or ends after
   * that. With `direct` (./sse.ts, passed by the code that waits, so that nothing else bundles
   * it), an `@upstash/redis` client's stream is read here, so that its end is known at once and
   * nothing is logged; any other client's `subscribe()` is used as it is (a stream that the
   * server ends without an error is then not reported: waits on it are bounded as every wait
   * is).
   * @throws {TransportError} when the client cannot subscribe (see `canSubscribe`).
   */
  subscribe(
    name: string,
    channel: string,
    onMessage: (message: string) => void,
    onLost: (error: TransportError) => void,
    counter: RequestCounter,
    direct?: DirectStreams,
  ): { ready: Promise<void>; close(): void } {
    const subscribe = this.#redis.subscribe;
    if (typeof subscribe !== "function") {
      throw new TransportError(
        name,
        "the Redis client has no subscribe(): it cannot subscribe",
        false,
      );
    }
    counter.requests += 1;
    let confirmed = false;
    let closed = false;
    let settle: ((error?: TransportError) => void) | undefined;
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => settle?.(timedOut(name, this.requestTimeout)),
        this.requestTimeout,
      );
      settle = (error) => {
        clearTimeout(timer);
        settle = undefined;
        if (error) reject(error);
        else resolve();
      };
    });
    const confirm = () => {
      // The SUBSCRIBE is billed once, when the server has run it.
      if (!confirmed) counter.billed = (counter.billed ?? 0) + 1;
      confirmed = true;
      settle?.();
    };
    const fail = (failure: TransportError) => {
      if (closed) return;
      if (confirmed) onLost(failure);
      else settle?.(failure);
    };
    let end: () => void;
    if (direct && this.#stream === undefined) this.#stream = direct.endpointOf(this.#redis) ?? null;
    if (direct && this.#stream) {
      end = direct.open(this.#stream, channel, {
        onData: (data) => {
          if (closed) return;
          const type = data.slice(0, Math.max(0, data.indexOf(",")));
          if (type === "subscribe") confirm();
          else if (type === "message") onMessage(messageOf(data, channel));
        },
        onEnd: (error) =>
          fail(
            error === undefined
              ? new TransportError(name, "the subscription's stream ended", true)
              : toTransportError(error, name, [channel]),
          ),
      });
    } else {
      const subscriber = subscribe.call(this.#redis, [channel]);
      subscriber.on("subscribe", confirm);
      subscriber.on("message", (data) => {
        if (!closed) onMessage(String((data as { message?: unknown } | undefined)?.message));
      });
      subscriber.on("error", (error) => fail(toTransportError(error, name, [])));
      end = () => void subscriber.unsubscribe().catch(() => undefined);
    }
    const close = () => {
      if (closed) return;
      closed = true;
      settle?.(new TransportError(name, "subscription closed", false));
      end();
    };
    ready.catch(close);
    return { ready, close };
  }

  #scrub(error: unknown, call: ScriptCall) {
    if (error instanceof TransportError) return error;
    const secrets = [...call.keys, ...call.args.filter((a): a is string => typeof a === "string")];
    if (error instanceof NotSentError) {
      return toTransportError(error.error, call.name, secrets, { notSent: true });
    }
    return toTransportError(error, call.name, secrets);
  }
}

/**
 * The message of a `message,<channel>,<message>` event: what follows the channel, which may hold
 * commas itself (`@upstash/redis` splits at the second comma, so it cannot).
 */
function messageOf(data: string, channel: string): string {
  const head = `message,${channel},`;
  if (data.startsWith(head)) return data.slice(head.length);
  const second = data.indexOf(",", data.indexOf(",") + 1);
  return second < 0 ? "" : data.slice(second + 1);
}

/** Pause before resending a script after an HTTP 5xx, in ms. */
const RESEND_DELAY_MS = 50;

/** Reads a reply that must be a safe integer. */
export function asInteger(reply: unknown): number | undefined {
  const n = typeof reply === "string" && /^-?\d+$/.test(reply) ? Number(reply) : reply;
  return typeof n === "number" && Number.isSafeInteger(n) ? n : undefined;
}

/** Reads a reply that must be an array of `length` safe integers (any length when omitted). */
export function asIntegers(reply: unknown, length?: number): number[] | undefined {
  if (!Array.isArray(reply) || (length !== undefined && reply.length !== length)) return undefined;
  const out: number[] = [];
  for (const item of reply) {
    const n = asInteger(item);
    if (n === undefined) return undefined;
    out.push(n);
  }
  return out;
}
