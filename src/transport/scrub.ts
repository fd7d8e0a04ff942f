/**
 * Classifying and scrubbing client errors: what went wrong, whether the command may have been
 * applied, and a message that keeps the cause (error code, HTTP meaning) but never the command
 * text, an owner id, a request id, a URL or a credential.
 * @module
 */
import { ConfigurationError, TransportError } from "../errors.js";
import { causeCode } from "./retries.js";

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
 * True for an HTTP-level failure that the client did not retry: an `UpstashError` that is not a
 * Redis error reply nor an auth failure (a 5xx body such as `{"error":"service unavailable"}`).
 * Network errors are excluded: `@upstash/redis` has already retried those.
 */
export function isHttpFailure(error: unknown): boolean {
  return (
    error instanceof Error &&
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

/** A call that got no answer within its time limit: it may still be applied. */
export function timedOut(name: string, ms: number): TransportError {
  return new TransportError(
    name,
    `Redis request for "${name}" got no answer within ${ms} ms (requestTimeout); it may still be applied`,
    true,
  );
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
 * definite and say which variables to check. `notSent`: no attempt of the command reached the
 * network (every one failed to connect), so the error is definite.
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
  const auth = kind === "UpstashError" && AUTH_FAILURE.test(message);
  const badUrl = BAD_URL.test(message);
  const refused = kind === "UpstashError" && REDIS_ERROR_REPLY.test(message);
  const notSent = options.notSent === true;
  const ambiguous = !(auth || badUrl || refused || notSent);
  const scrubbed: Error & { code?: string } = new Error(message);
  scrubbed.name = kind;
  const code = causeCode(error);
  if (code !== undefined) scrubbed.code = code;
  let text = `Redis request for "${name}" failed: ${message || kind}`;
  if (auth) text += ` (HTTP 401/403: check the REST token, UPSTASH_REDIS_REST_TOKEN)`;
  if (badUrl) text += ` (no usable REST URL: ${ENV_HINT})`;
  if (notSent) text += "; nothing was sent";
  return new TransportError(name, text, ambiguous, { cause: scrubbed });
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
