/**
 * An HTTP proxy in front of a bridge that delays a share of the requests: each request is
 * delayed with probability `rate`, by a random time in `delayMs`, either before it is forwarded
 * (it reaches Redis late, possibly after the client gave up) or after Redis answered (the
 * answer arrives late), half and half. The bridge's own `delayMs` delays every request; this
 * delays some.
 */
import { once } from "node:events";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

/** A running latency proxy. */
export interface LatencyProxy {
  url: string;
  /** Requests received, and those delayed. */
  readonly requests: number;
  readonly delayed: number;
  /** Delays nothing from now on. */
  heal(): void;
  /** Stops: pending delays are abandoned (their sockets destroyed, nothing forwarded). */
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(["host", "connection", "content-length", "keep-alive"]);

/** Starts a proxy to `target` (e.g. a bridge's URL) on a free loopback port. */
export async function startLatencyProxy(
  target: string,
  rate: number,
  delayMs: [number, number],
): Promise<LatencyProxy> {
  let requests = 0;
  let delayed = 0;
  let share = rate;
  const closing = new AbortController();
  const server = createServer((req, res) => {
    requests += 1;
    const delay =
      Math.random() < share ? delayMs[0] + Math.random() * (delayMs[1] - delayMs[0]) : 0;
    const late = Math.random() < 0.5 ? "request" : "response";
    if (delay) delayed += 1;
    forward(req, delay, late)
      .then(({ status, type, body }) => {
        res.writeHead(status, { "content-type": type });
        res.end(body);
      })
      .catch(() => res.destroy());
  });
  const forward = async (req: IncomingMessage, delay: number, late: "request" | "response") => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (delay && late === "request") await sleep(delay, undefined, { signal: closing.signal });
    closing.signal.throwIfAborted();
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(req.headers)) {
      if (typeof value === "string" && !HOP_BY_HOP.has(key)) headers[key] = value;
    }
    const upstream = await fetch(`${target}${req.url ?? "/"}`, {
      method: req.method ?? "POST",
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
      signal: closing.signal,
    });
    const body = Buffer.from(await upstream.arrayBuffer());
    if (delay && late === "response") await sleep(delay, undefined, { signal: closing.signal });
    return {
      status: upstream.status,
      type: upstream.headers.get("content-type") ?? "application/json",
      body,
    };
  };
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    get delayed() {
      return delayed;
    },
    heal: () => {
      share = 0;
    },
    close: async () => {
      closing.abort();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
