import { TransportError } from "../errors.js";

const MAX_MESSAGE = 200;
// A Redis error reply starts with an upper-case code ("ERR", "NOSCRIPT", "WRONGTYPE", "BUSY"...):
// Redis refused the command, so nothing was applied. Anything else (network, 5xx, bad body) may
// have been applied.
const REDIS_ERROR_REPLY = /^(?:Command failed: )?[A-Z][A-Z_]{1,31}(?:\s|$)/;

/** True when the client error is Redis's NOSCRIPT reply, in either @upstash/redis format. */
export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.toLowerCase().includes("noscript");
}

/**
 * True for an HTTP-level failure that the client did not retry: an `UpstashError` that is not a
 * Redis error reply (a 5xx body such as `{"error":"service unavailable"}`). Network errors are
 * excluded: `@upstash/redis` has already retried those.
 */
export function isHttpFailure(error: unknown): boolean {
  return (
    error instanceof Error &&
    error.name === "UpstashError" &&
    !REDIS_ERROR_REPLY.test(error.message) &&
    !isNoScriptError(error)
  );
}

/**
 * Turns any client error into a {@link TransportError} whose message and cause hold no command
 * text, owner id, request id, URL or credential. `secrets` are the arguments of the failed
 * command; they are cut out wherever they appear.
 */
export function toTransportError(
  error: unknown,
  lockName: string,
  secrets: readonly string[],
): TransportError {
  const raw = error instanceof Error ? error.message : String(error);
  const name = error instanceof Error ? error.name : "Error";
  let message = raw.split("\n")[0] ?? "";
  const commandAt = message.indexOf(", command was:");
  if (commandAt >= 0) message = message.slice(0, commandAt);
  message = message.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, "<url>");
  for (const secret of secrets) {
    if (secret.length >= 4) message = message.split(secret).join("<redacted>");
  }
  if (message.length > MAX_MESSAGE) message = `${message.slice(0, MAX_MESSAGE)}…`;
  const ambiguous = !(name === "UpstashError" && REDIS_ERROR_REPLY.test(message));
  const cause = new Error(message);
  cause.name = name;
  return new TransportError(
    lockName,
    `Redis request for lock "${lockName}" failed: ${message || name}`,
    ambiguous,
    { cause },
  );
}

/** A reply that is not the shape the script returns: the request's outcome is unknown. */
export function malformedReply(lockName: string, script: string): TransportError {
  return new TransportError(
    lockName,
    `unexpected reply from script ${script} for lock "${lockName}" (is the client configured with a static AbortSignal?)`,
    true,
  );
}
