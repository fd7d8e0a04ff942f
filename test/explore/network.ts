/**
 * The controlled network of the explorer: one loopback HTTP proxy per client between that
 * client's real `@upstash/redis` client and the real bridge. Every request a client sends is
 * held in one pending list until the explorer decides what happens to it; only the
 * subscription streams (`/subscribe/...`) flow through at once, since a wait cannot be
 * confirmed without them, and the explorer can end them.
 */
import { createHash } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import * as latchScripts from "../../src/lua/count-down-latch.gen.js";
import * as fairScripts from "../../src/lua/fair-lock.gen.js";
import * as fencedScripts from "../../src/lua/fenced-lock.gen.js";
import * as lockScripts from "../../src/lua/lock.gen.js";
import * as permitScripts from "../../src/lua/permit-expirable-semaphore.gen.js";
import * as rwScripts from "../../src/lua/read-write-lock.gen.js";
import type { LuaScript } from "../../src/lua/script.js";
import * as semaphoreScripts from "../../src/lua/semaphore.gen.js";

/** How long the proxy waits for the bridge on one forwarded request. */
const FORWARD_TIMEOUT_MS = 5_000;
/** The most requests held at once; past it the oldest unanswerable copy is dropped. */
const MAX_PENDING = 400;
const HOP_BY_HOP = new Set(["host", "connection", "content-length", "keep-alive"]);

/** Script digest → script name (`lock/acquire`), so that a trace says what a request was. */
const SCRIPT_NAMES = new Map<string, string>();

/** Names the scripts of `modules` (src/lua/*.gen.ts, or a mutated copy's) in traces. */
export function registerScripts(modules: readonly object[]): void {
  for (const module of modules) {
    for (const value of Object.values(module) as unknown[]) {
      const script = value as Partial<LuaScript>;
      if (typeof script?.source === "string" && typeof script.name === "string") {
        SCRIPT_NAMES.set(createHash("sha1").update(script.source).digest("hex"), script.name);
        SCRIPT_NAMES.set(script.source, script.name);
      }
    }
  }
}

registerScripts([
  lockScripts,
  fairScripts,
  fencedScripts,
  rwScripts,
  semaphoreScripts,
  permitScripts,
  latchScripts,
]);

/** What a request asked for, in a few words: `lock/acquire`, `pipeline[2]`, `get`. */
function describe(path: string, body: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return path;
  }
  const one = (command: unknown): string => {
    if (!Array.isArray(command) || typeof command[0] !== "string") return "?";
    const verb = command[0].toLowerCase();
    if ((verb === "evalsha" || verb === "eval") && typeof command[1] === "string") {
      return SCRIPT_NAMES.get(command[1]) ?? verb;
    }
    return verb;
  };
  if (Array.isArray(parsed) && Array.isArray(parsed[0])) return parsed.map(one).join("+");
  return one(parsed);
}

/** A request held by the network. */
export interface PendingRequest {
  /** Order of arrival over the whole network. */
  readonly seq: number;
  /** Index of the client that sent it. */
  readonly client: number;
  readonly path: string;
  /** What it asked for (see {@link describe}). */
  readonly label: string;
  readonly body: Buffer;
  readonly headers: Record<string, string>;
  /** The client's side; `undefined` for a copy the network keeps to deliver again later. */
  response: ServerResponse | undefined;
}

/** One thing the network did, for the trace of a run. */
export type NetworkEvent =
  | { type: "deliver" | "duplicate" | "lose-answer" | "lose-request"; request: PendingRequest }
  | { type: "dropped"; request: PendingRequest; why: "crashed" | "overflow" }
  | { type: "end-stream"; client: number; streams: number };

interface ClientPort {
  server: Server;
  url: string;
  crashed: boolean;
  paused: boolean;
  streams: Set<{ response: ServerResponse; upstream: AbortController }>;
}

/**
 * A network of one proxy per client in front of `bridgeUrl`. Requests wait in
 * {@link ControlledNetwork.pending} until one of the decision methods takes them, unless the
 * network runs free ({@link ControlledNetwork.setFree}).
 */
export class ControlledNetwork {
  readonly #bridgeUrl: string;
  readonly #ports: ClientPort[] = [];
  readonly #closing = new AbortController();
  #pending: PendingRequest[] = [];
  #seq = 0;
  #free = false;
  #lastActivity = performance.now();
  #inFlight = 0;
  #changed = new Set<() => void>();
  /** Every decision taken, in order. */
  readonly events: NetworkEvent[] = [];
  /** Copies delivered to Redis that no client waited for (their answers reach nobody). */
  readonly deliveredCopies: PendingRequest[] = [];
  /** Requests received in all. */
  received = 0;
  /** Requests received from each client (streams included). */
  readonly receivedFrom: number[] = [];

  private constructor(bridgeUrl: string) {
    this.#bridgeUrl = bridgeUrl;
  }

  /** Starts `clients` proxies to `bridgeUrl` on free loopback ports. */
  static async start(bridgeUrl: string, clients: number): Promise<ControlledNetwork> {
    const network = new ControlledNetwork(bridgeUrl);
    for (let i = 0; i < clients; i++) await network.#listen(i);
    return network;
  }

  /** The URL client `i` gives its `@upstash/redis` client. */
  urlOf(client: number): string {
    return this.#port(client).url;
  }

  /** Requests that wait for a decision, oldest first, except those of paused clients. */
  get pending(): readonly PendingRequest[] {
    return this.#pending.filter((r) => !this.#ports[r.client]?.paused);
  }

  /** Every held request, paused clients' included. */
  get held(): readonly PendingRequest[] {
    return this.#pending;
  }

  /** Requests being forwarded to the bridge now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** The open subscription streams of `client`. */
  streamsOf(client: number): number {
    return this.#port(client).streams.size;
  }

  /**
   * Free: every held request (paused clients' excepted) is delivered now, in arrival order,
   * and every new one as it arrives. Held: requests wait for decisions again.
   */
  setFree(free: boolean): void {
    this.#free = free;
    if (free) {
      for (const request of this.pending) void this.#take(request, "deliver");
    }
  }

  /** Delivers `request` now and writes Redis's answer back to its client. */
  deliver(request: PendingRequest): Promise<void> {
    return this.#take(request, "deliver");
  }

  /**
   * Delivers `request` now, and keeps a copy that a later decision delivers again, as a
   * client's retry or a resend of a request whose first copy was only slow would.
   */
  duplicate(request: PendingRequest): Promise<void> {
    return this.#take(request, "duplicate");
  }

  /** Delivers `request` to Redis, then closes the client's connection before the answer. */
  loseAnswer(request: PendingRequest): Promise<void> {
    return this.#take(request, "lose-answer");
  }

  /** Closes the client's connection without delivering `request`. */
  loseRequest(request: PendingRequest): Promise<void> {
    return this.#take(request, "lose-request");
  }

  /** Ends every subscription stream of `client`, as a host ends long responses. */
  endStreams(client: number): number {
    const port = this.#port(client);
    const streams = [...port.streams];
    for (const stream of streams) {
      stream.upstream.abort();
      stream.response.end();
    }
    port.streams.clear();
    this.events.push({ type: "end-stream", client, streams: streams.length });
    this.#touch();
    return streams.length;
  }

  /**
   * The client crashed: it never sends again. What it sent before is still on its way (those
   * requests stay held and may still reach Redis), but no answer reaches it, its streams are
   * cut and each new request is dropped on arrival.
   */
  crash(client: number): void {
    const port = this.#port(client);
    port.crashed = true;
    for (const stream of port.streams) {
      stream.upstream.abort();
      stream.response.destroy();
    }
    port.streams.clear();
    for (const request of this.#pending) {
      if (request.client !== client) continue;
      request.response?.destroy();
      request.response = undefined;
    }
    this.#touch();
  }

  /** The client is paused (its requests wait out of the decisions' reach) or runs again. */
  setPaused(client: number, paused: boolean): void {
    this.#port(client).paused = paused;
    if (!paused && this.#free) {
      for (const request of this.pending) void this.#take(request, "deliver");
    }
    this.#touch();
  }

  /**
   * Resolves once nothing happened on the network (no request arrived, no answer was
   * written, none is being forwarded) for `quietMs`, or after `limitMs` in any case: a client
   * that is going to send its next request after an answer does so within a few ms, while
   * its timers (resends, renewals) run on hundreds.
   * @returns whether the network was quiet.
   */
  async quiet(quietMs: number, limitMs: number): Promise<boolean> {
    const until = performance.now() + limitMs;
    for (;;) {
      const now = performance.now();
      const idleFor = now - this.#lastActivity;
      if (this.#inFlight === 0 && idleFor >= quietMs) return true;
      if (now >= until) return false;
      const wait = Math.max(2, Math.min(until - now, quietMs - idleFor));
      await this.#changedOrAfter(wait);
    }
  }

  /**
   * Resolves once `client` has sent more than `count` requests, or `done` settled, or after
   * `limitMs`: a call's first request may leave after some work of its own (a script's digest
   * computed on the first use), later than the network looks quiet.
   */
  async arrival(client: number, count: number, done: Promise<unknown>, limitMs: number) {
    let over = false;
    void done.finally(() => {
      over = true;
      this.#touch();
    });
    const until = performance.now() + limitMs;
    while (!over && (this.receivedFrom[client] ?? 0) <= count && performance.now() < until) {
      await this.#changedOrAfter(Math.max(1, until - performance.now()));
    }
  }

  /** Stops every proxy; held requests are dropped, streams cut. */
  async close(): Promise<void> {
    this.#closing.abort();
    for (const request of this.#pending) request.response?.destroy();
    this.#pending = [];
    await Promise.all(
      this.#ports.map(async (port) => {
        for (const stream of port.streams) stream.response.destroy();
        port.server.closeAllConnections();
        await new Promise<void>((resolve) => port.server.close(() => resolve()));
      }),
    );
  }

  #port(client: number): ClientPort {
    const port = this.#ports[client];
    if (port === undefined) throw new RangeError(`no client ${client}`);
    return port;
  }

  #touch(): void {
    this.#lastActivity = performance.now();
    for (const notify of [...this.#changed]) notify();
  }

  #changedOrAfter(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#changed.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#changed.add(done);
    });
  }

  async #listen(client: number): Promise<void> {
    const port: ClientPort = {
      server: createServer((req, res) => {
        this.#receive(client, req, res).catch(() => res.destroy());
      }),
      url: "",
      crashed: false,
      paused: false,
      streams: new Set(),
    };
    port.server.listen(0, "127.0.0.1");
    await once(port.server, "listening");
    port.url = `http://127.0.0.1:${(port.server.address() as AddressInfo).port}`;
    this.#ports[client] = port;
  }

  async #receive(client: number, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const port = this.#port(client);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(req.headers)) {
      if (typeof value === "string" && !HOP_BY_HOP.has(key)) headers[key] = value;
    }
    const path = req.url ?? "/";
    this.receivedFrom[client] = (this.receivedFrom[client] ?? 0) + 1;
    this.#touch();
    if (port.crashed) {
      res.destroy();
      return;
    }
    if (path.startsWith("/subscribe/") || path.startsWith("/psubscribe/")) {
      await this.#stream(port, path, headers, Buffer.concat(chunks), res);
      return;
    }
    this.received++;
    const body = Buffer.concat(chunks);
    const request: PendingRequest = {
      seq: this.#seq++,
      client,
      path,
      label: describe(path, body.toString("utf8")),
      body,
      headers,
      response: res,
    };
    this.#pending.push(request);
    if (this.#pending.length > MAX_PENDING) {
      // A client resending for a long time: the oldest copy nobody waits for goes first.
      const victim = this.#pending.find((r) => r.response === undefined) ?? this.#pending[0];
      if (victim) {
        this.#pending.splice(this.#pending.indexOf(victim), 1);
        victim.response?.destroy();
        this.events.push({ type: "dropped", request: victim, why: "overflow" });
      }
    }
    if (this.#free && !port.paused) await this.#take(request, "deliver");
  }

  /** Streams a subscription through, until either side or the explorer ends it. */
  async #stream(
    port: ClientPort,
    path: string,
    headers: Record<string, string>,
    body: Buffer,
    res: ServerResponse,
  ): Promise<void> {
    const upstream = new AbortController();
    const entry = { response: res, upstream };
    port.streams.add(entry);
    res.on("close", () => {
      upstream.abort();
      port.streams.delete(entry);
    });
    try {
      const answer = await fetch(`${this.#bridgeUrl}${path}`, {
        method: "POST",
        headers,
        body: body.length ? new Uint8Array(body) : undefined,
        signal: AbortSignal.any([upstream.signal, this.#closing.signal]),
      });
      res.writeHead(answer.status, {
        "content-type": answer.headers.get("content-type") ?? "text/event-stream",
        "cache-control": "no-cache",
      });
      res.flushHeaders();
      const reader = answer.body?.getReader();
      // Read until the bridge, the client or the explorer ends the stream.
      while (reader) {
        const { done, value } = await reader.read();
        if (done || res.destroyed || res.writableEnded) break;
        res.write(value);
        this.#touch();
      }
    } catch {
      // Ended by the explorer, by the client or by the bridge: the client sees it end.
    }
    port.streams.delete(entry);
    if (!res.writableEnded && !res.destroyed) res.end();
  }

  async #take(
    request: PendingRequest,
    how: "deliver" | "duplicate" | "lose-answer" | "lose-request",
  ): Promise<void> {
    const at = this.#pending.indexOf(request);
    if (at < 0) return;
    this.#pending.splice(at, 1);
    this.events.push({ type: how, request });
    if (request.response === undefined && how !== "lose-request")
      this.deliveredCopies.push(request);
    this.#touch();
    if (how === "lose-request") {
      request.response?.destroy();
      return;
    }
    if (how === "duplicate") {
      // The copy is what the network still carries; its answer reaches nobody.
      this.#pending.push({ ...request, seq: this.#seq++, response: undefined });
    }
    this.#inFlight++;
    try {
      const answer = await fetch(`${this.#bridgeUrl}${request.path}`, {
        method: "POST",
        headers: request.headers,
        body: new Uint8Array(request.body),
        signal: AbortSignal.any([AbortSignal.timeout(FORWARD_TIMEOUT_MS), this.#closing.signal]),
      });
      const text = Buffer.from(await answer.arrayBuffer());
      const res = request.response;
      if (res === undefined || res.destroyed) return;
      if (how === "lose-answer") {
        res.destroy();
        return;
      }
      res.writeHead(answer.status, {
        "content-type": answer.headers.get("content-type") ?? "application/json",
      });
      res.end(text);
    } catch {
      request.response?.destroy();
    } finally {
      this.#inFlight--;
      this.#touch();
    }
  }
}
