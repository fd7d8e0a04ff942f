/**
 * The REST API's pub/sub stream (`POST <url>/subscribe/<channel>`, Server-Sent Events), read
 * here over the URL, token and headers of the `@upstash/redis` client. Its own `subscribe()`
 * (1.39, pkg/http.ts) does not tell its caller when a stream ends: an end is silent, a failure
 * only logged with `console.error`, and it never reconnects, while hosts do end long responses
 * (Upstash Realtime renews its own streams every 300 s). A wait must know at once that nothing
 * will wake it any more, so it reads the stream itself, with `eventsource-parser`, in every
 * runtime that has `fetch` and streaming bodies (Workers, Vercel, Node).
 * @module
 */
import { createParser } from "eventsource-parser";
import type { RedisLike } from "./redis.js";

/** Where an `@upstash/redis` client sends its requests, and with which headers. */
export interface StreamEndpoint {
  /** The REST URL, without a trailing `/`. */
  readonly baseUrl: string;
  /** The client's headers now (its token; read-your-writes updates them per response). */
  headers(): Record<string, string>;
  /** What else the client hands `fetch` on every request (`cache`, Fastly's `backend`). */
  readonly init: Readonly<Record<string, unknown>>;
}

/** The parts of an `@upstash/redis` 1.x `Redis` instance read here. */
interface UpstashShape {
  client?: {
    baseUrl?: unknown;
    headers?: unknown;
    options?: { cache?: unknown; backend?: unknown };
  };
}

/**
 * The endpoint of an `@upstash/redis` client whose `subscribe()` is the library's own, or
 * `undefined` for any other object (a wrapper keeps seeing its subscriptions through its own
 * `subscribe()`).
 */
export function streamEndpointOf(redis: RedisLike): StreamEndpoint | undefined {
  try {
    const own: unknown = Object.getOwnPropertyDescriptor(redis, "subscribe")?.value;
    if (typeof own !== "function" || own !== redis.subscribe) return undefined;
    const client = (redis as unknown as UpstashShape).client;
    const baseUrl = client?.baseUrl;
    if (typeof baseUrl !== "string" || !/^https?:\/\//.test(baseUrl)) return undefined;
    if (typeof client?.headers !== "object" || client.headers === null) return undefined;
    const headers = client.headers as Record<string, unknown>;
    const init: Record<string, unknown> = {};
    if (client.options?.cache !== undefined) init.cache = client.options.cache;
    if (client.options?.backend !== undefined) init.backend = client.options.backend;
    return {
      baseUrl: baseUrl.replace(/\/$/, ""),
      headers: () => {
        const out: Record<string, string> = {};
        for (const [key, value] of Object.entries(headers)) {
          if (typeof value === "string") out[key] = value;
        }
        return out;
      },
      init,
    };
  } catch {
    return undefined;
  }
}

/** A stream the server answered with an HTTP error. */
export class StreamRefusedError extends Error {
  /** @param status the HTTP status; `detail` the service's `error` text, if any. */
  constructor(
    readonly status: number,
    detail: string,
  ) {
    // The service's own text first, so that an auth failure is told apart (./scrub.ts).
    super(detail || `HTTP ${status}`);
    this.name = "UpstashError";
  }
}

/** What an open stream reports. */
export interface StreamHandlers {
  /** The `data` of each event, in order (`subscribe,<channel>,<n>`, `message,<channel>,<m>`). */
  onData(data: string): void;
  /**
   * The stream is over: `error` is why when it failed (refused, cut, unreadable), `undefined`
   * when the server ended it. Called once, never after `close()`.
   */
  onEnd(error: unknown): void;
}

/**
 * Opens `POST <baseUrl>/subscribe/<channel>` as `@upstash/redis` does (the channel as it is in
 * the path, the client's headers, body `[]`) and reads its events until it ends or `close()`.
 * @returns close: ends the request; nothing is reported after it.
 */
export function openStream(
  endpoint: StreamEndpoint,
  channel: string,
  handlers: StreamHandlers,
): () => void {
  const controller = new AbortController();
  let closed = false;
  const read = async () => {
    const response = await fetch(`${endpoint.baseUrl}/subscribe/${channel}`, {
      ...endpoint.init,
      method: "POST",
      headers: {
        ...endpoint.headers(),
        Accept: "text/event-stream",
        "Cache-Control": "no-cache",
      },
      body: "[]",
      signal: controller.signal,
    });
    if (!response.ok || !response.body) {
      throw new StreamRefusedError(response.status, await errorText(response));
    }
    const parser = createParser({
      onEvent: (event) => {
        if (!closed) handlers.onData(event.data);
      },
    });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        parser.feed(decoder.decode(value, { stream: true }));
      }
    } finally {
      reader.releaseLock();
    }
  };
  read().then(
    () => {
      if (!closed) handlers.onEnd(undefined);
      closed = true;
    },
    (error: unknown) => {
      if (!closed) handlers.onEnd(error);
      closed = true;
    },
  );
  return () => {
    if (closed) return;
    closed = true;
    controller.abort();
  };
}

/** The service's `{"error": ...}` text of a refused request ('' when there is none). */
async function errorText(response: Response): Promise<string> {
  try {
    const body: unknown = JSON.parse(await response.text());
    const error = (body as { error?: unknown } | null)?.error;
    return typeof error === "string" ? error : "";
  } catch {
    return "";
  }
}

/** What `ScriptRunner#subscribe` needs to read streams itself (see the module documentation). */
export interface DirectStreams {
  endpointOf(redis: RedisLike): StreamEndpoint | undefined;
  open(endpoint: StreamEndpoint, channel: string, handlers: StreamHandlers): () => void;
}

/** Reading streams with {@link streamEndpointOf} and {@link openStream}. */
export const directStreams: DirectStreams = { endpointOf: streamEndpointOf, open: openStream };
