/**
 * Helpers shared by the integrations (Hono, Vercel): ending a lease without throwing, handing
 * work to `waitUntil`, and the HTTP shape of "locked".
 * @module
 */
import { type EdgeLockClient, reportEvent } from "./core.js";
import { TransportError } from "./errors.js";
import { cost } from "./events.js";

/**
 * Runs `end` (a release or a completion) without throwing and resolves to its answer, or to
 * undefined when it failed: a transport failure is reported as an `error` event through the
 * EdgeLock's `onEvent`, and the lock then expires after its lease.
 * An integration must not turn a finished response into an error because the release failed.
 */
export async function endQuietly<R>(
  edgelock: EdgeLockClient,
  name: string,
  end: () => Promise<R>,
): Promise<R | undefined> {
  const started = Date.now();
  try {
    return await end();
  } catch (error) {
    if (!(error instanceof TransportError)) return undefined;
    reportEvent(edgelock, {
      type: "error",
      name,
      // One request, unanswered: whether it was billed is not known (0).
      ...cost({ requests: 1 }, started),
      operation: "release",
      error,
    });
    return undefined;
  }
}

/** What an `onLocked` hook learns about the holder of a busy lock. */
export interface LockedInfo {
  /** The lock name that was busy. */
  key: string;
  /** Seconds to wait before retrying: the holder's remaining lease, rounded up, at least 1. */
  retryAfter: number;
  /** The holder's remaining lease in ms (PTTL: -1 when the key has no TTL, 0 when unknown). */
  holderTtl: number;
}

/** `Retry-After` in whole seconds (at least 1) from a holder's PTTL in ms (-1/0 = unknown). */
export function retryAfterSeconds(holderTtl: number): number {
  return Math.max(1, Math.ceil(holderTtl / 1000));
}

/** The default 409 answer to a request whose lock is taken. */
export function lockedResponse(key: string, holderTtl: number): Response {
  const retryAfter = retryAfterSeconds(holderTtl);
  return Response.json(
    { error: "locked", key, retryAfter },
    { status: 409, headers: { "retry-after": String(retryAfter) } },
  );
}

/**
 * Wraps a response body so that `finish` runs once the body has been read to the end, has
 * failed, or was cancelled by the reader; the wrapper's end waits for `finish`. Reads are pulled
 * one chunk at a time, so nothing is buffered ahead of the reader.
 */
export function onBodyEnd(
  body: ReadableStream<Uint8Array>,
  finish: () => Promise<void>,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let finished: Promise<void> | undefined;
  const once = () => {
    finished ??= finish();
    return finished;
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (error) {
          await once();
          controller.error(error);
          return;
        }
        if (chunk.done) {
          await once();
          controller.close();
        } else {
          controller.enqueue(chunk.value);
        }
      },
      async cancel(reason) {
        try {
          await reader.cancel(reason);
        } finally {
          await once();
        }
      },
    },
    { highWaterMark: 0 },
  );
}
