/**
 * Classifying and scrubbing client errors: what went wrong, whether the command may have been
 * applied, and a message that keeps the cause (error code, HTTP meaning) but never the command
 * text, an owner id, a request id, a URL or a credential.
 * @module
 */
import {
  ConfigurationError,
  type ServiceLimit,
  ServiceLimitError,
  TransportError,
} from "../errors.js";
import { causeCode, statusOf } from "./retries.js";

const MAX_MESSAGE = 200;
// A Redis error reply starts with an upper-case code ("ERR", "NOSCRIPT", "WRONGTYPE", "BUSY"...):
// Redis refused the command, so nothing was applied. Anything else (network, 5xx, bad body) may
// have been applied.
const REDIS_ERROR_REPLY = /^(?:Command failed: )?[A-Z][A-Z_]{1,31}(?:\s|$)/;
// `@upstash/redis` keeps only the body of a non-2xx answer, so HTTP 401/403 are recognised by
// what Upstash (and compatible proxies) put there. Nothing was applied.
const AUTH_FAILURE =
  /^(?:unauthori[sz]ed|forbidden|invalid token|missing\/invalid authorization|WRONGPASS|NOAUTH|NOPERM)/i;
// What `fetch` says when the URL cannot even be parsed (e.g. an empty UPSTASH_REDIS_REST_URL).
const BAD_URL = /failed to parse url|invalid url/i;
const ENV_HINT =
  "set UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN, or pass { url, token } to new Redis()";

/** True when the client error is Redis's NOSCRIPT reply, in either @upstash/redis format. */
export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.toLowerCase().includes("noscript");
}

/**
 * The service's limits, by the start of its error text (Upstash docs, redis/troubleshooting),
 * one group each in the order of {@link LIMIT_NAMES}; the text goes on (`. Limit: 500000,
 * Usage: 500000. See <url> for details`). `Command failed: ` starts a pipeline entry's error.
 */
const LIMIT_TEXT =
  /^(?:Command failed: )?ERR (?:(max (?:daily )?requests? limit)|(max concurrent connections)|(max request size)|(max single record size)|(max key size)|(DB capacity quota)) exceeded/i;
const LIMIT_NAMES: readonly ServiceLimit[] = [
  "requests",
  "connections",
  "request-size",
  "record-size",
  "key-size",
  "storage",
];

/** The limit a client error's text names, if any. */
function serviceLimitOf(message: string): ServiceLimit | undefined {
  const groups = LIMIT_TEXT.exec(message);
  return groups ? LIMIT_NAMES[groups.slice(1).findIndex(Boolean)] : undefined;
}

/**
 * 4xx statuses that mean "not now" rather than "not this request" (RFC 9110 408, RFC 8470 425,
 * RFC 6585 429): nothing was applied, and the request may be sent again.
 */
const RETRYABLE_4XX = new Set([408, 425, 429]);

/**
 * True for an HTTP-level failure that the client did not retry and that may pass when sent
 * again: an answer with a 5xx status, or 408, 425 or 429; for a client that does not report
 * statuses, an `UpstashError` that is not a Redis error reply nor an auth failure (a 5xx body
 * such as `{"error":"service unavailable"}`). Never a limit of the service: resending into it
 * only adds load. Network errors are excluded: `@upstash/redis` has already retried those.
 */
export function isHttpFailure(error: unknown): boolean {
  if (!(error instanceof Error) || serviceLimitOf(error.message) !== undefined) return false;
  const status = statusOf(error);
  if (status !== undefined) return status >= 500 || RETRYABLE_4XX.has(status);
  return (
    error.name === "UpstashError" &&
    !REDIS_ERROR_REPLY.test(error.message) &&
    !AUTH_FAILURE.test(error.message) &&
    !isNoScriptError(error)
  );
}

/**
 * The error for a client built without a REST URL or without a token (`Redis.fromEnv()` with a
 * variable unset only warns, and a missing token is sent as "Bearer undefined"), detected from
 * the client's own fields before any request; `undefined` when both are set or the client does
 * not say.
 */
export function missingCredentials(redis: unknown, name: string): ConfigurationError | undefined {
  const client = (
    redis as {
      client?: {
        hasCredentials?: unknown;
        baseUrl?: unknown;
        headers?: { authorization?: unknown };
      };
    } | null
  )?.client;
  if (!client) return undefined;
  const auth = client.headers?.authorization;
  const token = typeof auth === "string" ? auth.replace(/^Bearer\s*/, "") : undefined;
  const noToken =
    token === "" ||
    token === "undefined" ||
    (token === undefined && client.hasCredentials === false);
  // A client that says it lacks credentials while it has a token lacks the URL.
  if (client.baseUrl === "" || (!noToken && client.hasCredentials === false)) {
    return new ConfigurationError(
      "the Redis client has no REST URL: set UPSTASH_REDIS_REST_URL, or pass { url, token } to new Redis()",
      name,
    );
  }
  if (!noToken) return undefined;
  return new ConfigurationError(
    "the Redis client has no REST token: set UPSTASH_REDIS_REST_TOKEN, or pass { url, token } to new Redis()",
    name,
  );
}

/** The errors of calls that got no answer at all (see {@link timedOut}). */
const unanswered = new WeakSet<TransportError>();

/** True for the error of a call that got no answer within its time limit. */
export function isUnanswered(error: unknown): boolean {
  return error instanceof TransportError && unanswered.has(error);
}

/**
 * A call that got no answer within its time limit, `ms`: it may still be applied. `requestTimeout`
 * is the runner's: a shorter `ms` is this send's own (what was left of its call's time, or a
 * keep-alive renewal's limit).
 */
export function timedOut(name: string, ms: number, requestTimeout = ms): TransportError {
  const within =
    ms < requestTimeout
      ? `within ${ms} ms (the time this send had; requestTimeout ${requestTimeout} ms)`
      : `within ${ms} ms (requestTimeout)`;
  const error = new TransportError(
    name,
    `Redis request for "${name}" got no answer ${within}; it may still be applied`,
    true,
  );
  unanswered.add(error);
  return error;
}

/**
 * The error a call that sent its request `sends` times (`requests` HTTP requests in all) over `ms`
 * ms ends with when the last send failed with `error`: the server's own failure with those
 * counts, or, when no send got an answer, one message with the counts and the configured
 * `requestTimeout` (a send's time-out alone would show only what was left of the call's time).
 * `then` says what happens next (e.g. `cancelled in the background`). Keeps `ambiguous`, the
 * status and the cause.
 */
export function afterSends(
  error: TransportError,
  counts: { sends: number; requests: number; ms: number; requestTimeout: number },
  then: string,
): TransportError {
  const { sends, requests, ms, requestTimeout } = counts;
  const all = requests > sends ? `, ${requests} HTTP requests in all` : "";
  const sent = `sent ${sends} time${sends === 1 ? "" : "s"} in ${ms} ms${all}`;
  const message = unanswered.has(error)
    ? `Redis request for "${error.resource}" got no answer: ${sent}, each waiting at most requestTimeout (${requestTimeout} ms); it may still be applied; ${then}`
    : `${error.message} (${sent}; ${then})`;
  return new TransportError(error.resource, message, error.ambiguous, {
    cause: error.cause,
    status: error.status,
  });
}

/** What common network error codes mean, for messages that keep the code but not the address. */
const CODE_MEANING: Record<string, string> = {
  ECONNREFUSED: "connection refused: is the REST endpoint running at that URL and port?",
  ENOTFOUND: "host not found: check the REST URL",
  EAI_AGAIN: "DNS lookup failed",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  UND_ERR_CONNECT_TIMEOUT: "connection timed out",
  UND_ERR_SOCKET: "socket closed by the other side",
};

/**
 * The code of the first coded error in a cause chain, with what it means, e.g.
 * `ECONNREFUSED: connection refused: …`; `""` when no cause has a code. The cause's own message
 * is left out: it names the address.
 */
function describeCause(error: Error): string {
  const code = causeCode(error);
  if (code === undefined) return "";
  return CODE_MEANING[code] ? `${code}: ${CODE_MEANING[code]}` : code;
}

/**
 * Turns any client error into a {@link TransportError} whose message and cause hold no command
 * text, owner id, request id, URL or credential. `secrets` are the arguments of the failed
 * command; they are cut out wherever they appear. Network failures keep their cause's code
 * (`ECONNREFUSED`, `ENOTFOUND`, …), also as `code` on the scrubbed cause; auth failures are
 * definite and say which variables to check. An answer other than 2xx keeps its status
 * (`status`, when the client reported it) and the server's error text; a 4xx is definite
 * (nothing was applied; the runner resends a 408, 425 or 429 once before it gets here). A limit of the service is a definite
 * {@link ServiceLimitError}. `notSent`: no attempt of the command reached the network (every one
 * failed to connect), so the error is definite.
 */
export function toTransportError(
  error: unknown,
  name: string,
  secrets: readonly string[],
  options: { notSent?: boolean } = {},
): TransportError {
  const raw = error instanceof Error ? error.message : String(error);
  const kind = error instanceof Error ? error.name : "Error";
  let message = raw.split("\n")[0] ?? "";
  const commandAt = message.indexOf(", command was:");
  if (commandAt >= 0) message = message.slice(0, commandAt);
  const cause = error instanceof Error ? describeCause(error) : "";
  if (cause && !message.includes(cause)) message = `${message} (${cause})`;
  message = scrubText(message, secrets);
  const status = statusOf(error);
  const scrubbed: Error & { code?: string } = new Error(message);
  scrubbed.name = kind;
  const code = causeCode(error);
  if (code !== undefined) scrubbed.code = code;
  const limit = serviceLimitOf(message);
  if (limit !== undefined) {
    return new ServiceLimitError(name, limit, message.replace(/^Command failed: /, ""), {
      cause: scrubbed,
      status,
    });
  }
  const auth =
    status === 401 || status === 403 || (kind === "UpstashError" && AUTH_FAILURE.test(message));
  const badUrl = BAD_URL.test(message);
  // Every 4xx was answered without running the request (408, 425 and 429 included: those are
  // resent once by the runner, and are definite when they come again).
  const refused =
    (kind === "UpstashError" && REDIS_ERROR_REPLY.test(message)) ||
    (status !== undefined && status >= 400 && status < 500);
  const notSent = options.notSent === true;
  const ambiguous = !(auth || badUrl || refused || notSent);
  let out = `Redis request for "${name}" failed: `;
  // An auth failure's hint names its statuses already.
  if (status !== undefined && !auth) out += `HTTP ${status}: ${message}`;
  else out += message || kind;
  if (auth) out += " (HTTP 401/403: check the REST token, UPSTASH_REDIS_REST_TOKEN)";
  else if (status === 404 || status === 405) {
    out += " (check the REST URL and its path, UPSTASH_REDIS_REST_URL)";
  } else if (badUrl) out += ` (no usable REST URL: ${ENV_HINT})`;
  if (notSent) out += "; nothing was sent";
  return new TransportError(name, out, ambiguous, { cause: scrubbed, status });
}

/** Cuts URLs (they may carry `?_token=`) and the command's arguments out of a message. */
function scrubText(message: string, secrets: readonly string[]): string {
  let out = message.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, "<url>");
  for (const secret of secrets) {
    if (secret.length >= 4) out = out.split(secret).join("<redacted>");
  }
  return out.length > MAX_MESSAGE ? `${out.slice(0, MAX_MESSAGE)}…` : out;
}

/** A reply that is not the shape the script returns: the request's outcome is unknown. */
export function malformedReply(name: string, script: string): TransportError {
  return new TransportError(
    name,
    `unexpected reply from script ${script} for "${name}" (is the client configured with a static AbortSignal?)`,
    true,
  );
}
