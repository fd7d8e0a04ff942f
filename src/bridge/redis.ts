/**
 * The Redis side of the bridge: two RESP2 connections through `@redis/client` plus a bounded pool
 * of connections for blocking commands, raw `sendCommand` (no reply transformers) and bulk
 * strings kept as `Buffer`. (A Redis Cluster is fronted by ./cluster.ts, behind the same
 * {@link Backend} interface.)
 *
 * @module
 */

import { createClient, ErrorReply, RESP_TYPES } from "@redis/client";
import type { Command } from "./commands.js";

/** Thrown when Redis cannot be reached or the connection drops while a request is in flight. */
export class RedisUnavailableError extends Error {
  /** @param cause the underlying connection error. */
  constructor(cause: unknown) {
    super("bridge: redis unavailable", { cause });
    this.name = "RedisUnavailableError";
  }
}

/**
 * A reply as received: `Buffer` (bulk string), `string` (simple string), `number` (integer),
 * `null`, an array of replies, or an {@link ErrorReply} (error replies are returned, not thrown).
 */
export type RawReply = unknown;

/** Outcome of a `/multi-exec` request. */
export type TransactionResult = { ok: true; replies: RawReply[] } | { ok: false; error: string };

/**
 * Thrown when the bridge refuses a request as sent (it answers 400 with the message): nothing
 * reached Redis. E.g. a pipeline holding a blocking command whose keys live on several nodes of
 * a cluster.
 */
export class CommandRefusedError extends Error {
  /** @param message the error sent to the client, e.g. `ERR bridge: ...`. */
  constructor(message: string) {
    super(message);
    this.name = "CommandRefusedError";
  }
}

/**
 * What the HTTP side needs from the Redis side: one server ({@link RedisBackend}) or a cluster
 * (./cluster.ts). Error replies are returned as {@link ErrorReply} values, never thrown.
 */
export interface Backend {
  /** The pool {@link Backend.blocking} runs on. */
  readonly blockingPool: BlockingPool;
  /** Sends one command. @throws RedisUnavailableError when it got no reply. */
  single(command: Command): Promise<RawReply>;
  /** Sends a pipeline, in order, not atomically. @throws RedisUnavailableError */
  pipeline(commands: readonly Command[]): Promise<RawReply[]>;
  /** Runs the commands in MULTI/EXEC. @throws RedisUnavailableError */
  transaction(commands: readonly Command[]): Promise<TransactionResult>;
  /**
   * Sends a request holding a blocking command on a pooled connection of its own.
   * @throws BlockingPoolBusyError, RedisUnavailableError, CommandRefusedError
   */
  blocking(commands: readonly Command[], signal?: AbortSignal): Promise<RawReply[]>;
  /**
   * The Redis URL a subscription to `channel` connects to: the server, or on a cluster the node
   * owning the channel's hash slot, so that a PUBLISH from a script on that node counts it.
   */
  subscriptionUrl(channel: string): Promise<string>;
  /** Closes every connection. */
  close(): Promise<void>;
}

/**
 * Thrown when a request with a blocking command finds every connection of the blocking pool in
 * use (the bridge answers 503). The command never reached Redis, so a retry is safe.
 */
export class BlockingPoolBusyError extends Error {
  /** @param max the pool's size. */
  constructor(max: number) {
    super(`bridge: all ${max} connections for blocking commands are busy`);
    this.name = "BlockingPoolBusyError";
  }
}

/** The subset of a `@redis/client` connection the bridge uses. */
interface Connection {
  sendCommand(args: readonly string[]): Promise<unknown>;
  close(): Promise<void>;
  destroy(): void;
  /** Connected and not closing (a pooled connection that dropped is never reused). */
  isReady(): boolean;
}

/** Gauges and counters of the blocking pool (see {@link BlockingPool}). */
export interface BlockingPoolStats {
  /** Connections running a blocking request now. */
  inUse: number;
  /** Open connections: in use plus idle. */
  open: number;
  /** The most connections the pool opens. */
  max: number;
  /** Requests answered 503 because every connection was in use (since start or reset). */
  refused: number;
}

/** Sizing of the blocking pool. */
export interface BlockingPoolOptions {
  /** The most connections open at once; `0` refuses blocking commands. */
  max: number;
  /** An idle connection is closed after this many milliseconds. */
  idleMs: number;
}

/**
 * Connections for blocking commands, one request at a time each, so that a `BLPOP` waiting for
 * seconds never delays the requests behind it on the shared connection. In front of a cluster the
 * pool opens connections to whichever node a request's keys live on; `max` counts them all.
 *
 * - Connections open on demand, up to `max`, and close after `idleMs` unused.
 * - A request that finds all `max` in use is refused at once ({@link BlockingPoolBusyError}):
 *   waiting for a connection would hold the HTTP request beyond the block time its client asked
 *   for, and a queued command is not yet in Redis's own FIFO of blocked clients anyway.
 * - When the HTTP client goes away (its `signal` aborts) while the command still blocks, the
 *   connection is destroyed: Redis drops the blocked client at once and the slot is free again,
 *   instead of staying taken for the rest of the block time. A value already popped for that
 *   client is lost with it, as with any response lost in transit.
 * - A connection that dropped or failed is never reused.
 */
export class BlockingPool {
  readonly #url: string;
  readonly #options: BlockingPoolOptions;
  /** Idle connections by the URL they are connected to. */
  readonly #idle = new Map<string, { connection: Connection; timer: NodeJS.Timeout }[]>();
  readonly #busy = new Set<Connection>();
  /** Slots taken, counting connections still opening. */
  #taken = 0;
  #refused = 0;
  #closed = false;

  /**
   * @param url Redis URL, e.g. `redis://127.0.0.1:6379`: where {@link BlockingPool.run} connects
   * unless told otherwise.
   * @param options see {@link BlockingPoolOptions}.
   */
  constructor(url: string, options: BlockingPoolOptions) {
    this.#url = url;
    this.#options = options;
  }

  /** The URL connections go to unless told otherwise. */
  get url(): string {
    return this.#url;
  }

  /** The most connections the pool opens. */
  get max(): number {
    return this.#options.max;
  }

  /** Current gauges and the refusal counter. */
  stats(): BlockingPoolStats {
    let idle = 0;
    for (const entries of this.#idle.values()) idle += entries.length;
    return {
      inUse: this.#taken,
      open: this.#taken + idle,
      max: this.#options.max,
      refused: this.#refused,
    };
  }

  /** Sets the refusal counter back to zero. */
  resetCount(): void {
    this.#refused = 0;
  }

  /**
   * Sends `commands` in order on one pooled connection to `url` (default: the pool's URL) and
   * resolves with their replies.
   *
   * @throws BlockingPoolBusyError when every connection is in use (nothing was sent).
   * @throws RedisUnavailableError when no connection could be opened or it dropped, when the
   * pool is closed, or when `signal` aborted while the commands were pending.
   */
  async run(
    commands: readonly Command[],
    signal?: AbortSignal,
    url: string = this.#url,
  ): Promise<RawReply[]> {
    if (this.#closed) throw new RedisUnavailableError(new Error("bridge closing"));
    if (signal?.aborted) throw new RedisUnavailableError(signal.reason);
    if (this.#taken >= this.#options.max) {
      this.#refused += 1;
      throw new BlockingPoolBusyError(this.#options.max);
    }
    this.#taken += 1;
    let connection: Connection;
    try {
      connection = await this.#take(url);
    } catch (error) {
      this.#taken -= 1;
      throw error;
    }
    if (this.#closed) {
      // The bridge closed while this connection was opening.
      this.#taken -= 1;
      connection.destroy();
      throw new RedisUnavailableError(new Error("bridge closing"));
    }
    this.#busy.add(connection);
    const abandon = () => connection.destroy();
    if (signal?.aborted) abandon();
    signal?.addEventListener("abort", abandon, { once: true });
    let reusable = false;
    try {
      const replies = await Promise.all(
        commands.map((command) => settle(connection.sendCommand(command))),
      );
      reusable = !signal?.aborted;
      return replies;
    } finally {
      signal?.removeEventListener("abort", abandon);
      this.#taken -= 1;
      this.#busy.delete(connection);
      if (reusable) this.#giveBack(url, connection);
      else connection.destroy();
    }
  }

  /** An idle ready connection to `url`, or a new one. */
  async #take(url: string): Promise<Connection> {
    const idle = this.#idle.get(url) ?? [];
    for (let entry = idle.pop(); entry; entry = idle.pop()) {
      clearTimeout(entry.timer);
      if (entry.connection.isReady()) return entry.connection;
      entry.connection.destroy();
    }
    try {
      // No background reconnection: a pooled connection that drops is dropped from the pool.
      return await openConnection(url, false);
    } catch (error) {
      throw new RedisUnavailableError(error);
    }
  }

  #giveBack(url: string, connection: Connection): void {
    if (this.#closed || !connection.isReady()) {
      connection.destroy();
      return;
    }
    const list = this.#idle.get(url) ?? [];
    this.#idle.set(url, list);
    const entry = {
      connection,
      timer: setTimeout(() => {
        const at = list.indexOf(entry);
        if (at >= 0) list.splice(at, 1);
        connection.destroy();
      }, this.#options.idleMs),
    };
    // Idle connections never keep the process alive.
    entry.timer.unref();
    list.push(entry);
  }

  /** Destroys every connection, busy ones included (their requests fail); later runs fail. */
  close(): void {
    this.#closed = true;
    for (const idle of this.#idle.values()) {
      for (const { connection, timer } of idle.splice(0)) {
        clearTimeout(timer);
        connection.destroy();
      }
    }
    for (const connection of this.#busy) connection.destroy();
    this.#busy.clear();
  }
}

/**
 * Two connections to one Redis: a shared one for single commands and pipelines (node-redis
 * pipelines concurrent commands on it), and a dedicated one for transactions; plus a
 * {@link BlockingPool} for requests with a blocking command.
 */
export class RedisBackend implements Backend {
  readonly #shared: Connection;
  readonly #tx: Connection;
  readonly #blocking: BlockingPool;
  #txTail: Promise<unknown> = Promise.resolve();

  private constructor(shared: Connection, tx: Connection, blocking: BlockingPool) {
    this.#shared = shared;
    this.#tx = tx;
    this.#blocking = blocking;
  }

  /**
   * Opens both connections to `url` (e.g. `redis://127.0.0.1:6379`); the blocking pool opens its
   * connections on demand.
   *
   * Fails fast: if Redis cannot be reached now, rejects with {@link RedisUnavailableError}. Once
   * connected, a dropped connection is re-established in the background (backoff 50 ms doubling
   * up to 2 s) while requests fail with 500.
   */
  static async connect(
    url: string,
    blocking: BlockingPoolOptions = { max: DEFAULT_BLOCKING_CONNECTIONS, idleMs: 30_000 },
  ): Promise<RedisBackend> {
    const opened: Connection[] = [];
    try {
      opened.push(await openConnection(url, true));
      opened.push(await openConnection(url, true));
    } catch (error) {
      for (const connection of opened) connection.destroy();
      throw new RedisUnavailableError(error);
    }
    const [shared, tx] = opened as [Connection, Connection];
    return new RedisBackend(shared, tx, new BlockingPool(url, blocking));
  }

  /** The pool that {@link RedisBackend.blocking} runs on. */
  get blockingPool(): BlockingPool {
    return this.#blocking;
  }

  /**
   * Sends a request containing a blocking command (a single command, or a whole pipeline so its
   * order holds) on a connection of the blocking pool; see {@link BlockingPool.run}.
   */
  /** The server's URL: every subscription connects there. */
  subscriptionUrl(): Promise<string> {
    return Promise.resolve(this.blockingPool.url);
  }

  blocking(commands: readonly Command[], signal?: AbortSignal): Promise<RawReply[]> {
    return this.#blocking.run(commands, signal);
  }

  /** Sends one command on the shared connection. */
  single(command: Command): Promise<RawReply> {
    return settle(this.#shared.sendCommand(command));
  }

  /**
   * Sends a pipeline on the shared connection, in order and not atomically. Rejects with
   * {@link RedisUnavailableError} if any command could not get a reply.
   */
  pipeline(commands: readonly Command[]): Promise<RawReply[]> {
    return Promise.all(commands.map((command) => settle(this.#shared.sendCommand(command))));
  }

  /**
   * Runs `MULTI`, the commands and `EXEC` on the dedicated connection. Transactions are
   * serialised (one finishes before the next is written) and each is queued in one synchronous
   * step, so they never interleave. A command rejected while queueing makes Redis discard the
   * whole transaction (`EXECABORT`): the result is then `{ ok: false }` with EXEC's message plus
   * the first queueing error, and nothing was applied.
   */
  transaction(commands: readonly Command[]): Promise<TransactionResult> {
    const run = () => this.#runTransaction(commands);
    const result = this.#txTail.then(run, run);
    this.#txTail = result.catch(() => undefined);
    return result;
  }

  #runTransaction(commands: readonly Command[]): Promise<TransactionResult> {
    return runTransaction((args) => this.#tx.sendCommand(args), commands);
  }

  /**
   * Destroys the blocking pool's connections (a block could last seconds), then closes both
   * connections, waiting for replies still pending (destroys them on failure).
   */
  async close(): Promise<void> {
    this.#blocking.close();
    await Promise.all(
      [this.#shared, this.#tx].map(async (connection) => {
        try {
          await connection.close();
        } catch {
          connection.destroy();
        }
      }),
    );
  }
}

/**
 * Writes `MULTI`, the commands and `EXEC` through `send` in one synchronous step (so nothing else
 * sent on that connection lands in between) and reads the outcome: EXEC's replies, or
 * `{ ok: false }` with EXEC's message plus the first queueing error when Redis discarded the
 * transaction. Rejects with {@link RedisUnavailableError} if a reply is missing.
 */
export async function runTransaction(
  send: (args: Command) => Promise<unknown>,
  commands: readonly Command[],
): Promise<TransactionResult> {
  const sent = [
    settle(send(["MULTI"])),
    ...commands.map((command) => settle(send(command))),
    settle(send(["EXEC"])),
  ];
  const replies = await Promise.all(sent);
  const exec = replies.at(-1);
  if (Array.isArray(exec)) return { ok: true, replies: exec };
  const firstError = replies.slice(0, -1).find((reply) => reply instanceof ErrorReply);
  const execMessage = exec instanceof ErrorReply ? exec.message : "ERR transaction aborted";
  const detail = firstError instanceof ErrorReply ? ` First error: ${firstError.message}` : "";
  return { ok: false, error: `${execMessage}${detail}` };
}

/** Resolves error replies as values; turns connection failures into RedisUnavailableError. */
export async function settle(pending: Promise<unknown>): Promise<RawReply> {
  try {
    return await pending;
  } catch (error) {
    if (error instanceof ErrorReply) return error;
    throw new RedisUnavailableError(error);
  }
}

/** Default size of the blocking pool. */
export const DEFAULT_BLOCKING_CONNECTIONS = 64;

/**
 * Opens a connection. With `reconnect`, a connection that drops after it first connected is
 * re-established in the background; without, it stays down.
 */
async function openConnection(url: string, reconnect: boolean): Promise<Connection> {
  let connectedOnce = false;
  const client = createClient({
    url,
    RESP: 2,
    disableOfflineQueue: true,
    disableClientInfo: true,
    commandOptions: { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } },
    socket: {
      connectTimeout: 2000,
      reconnectStrategy: (retries: number, cause: Error) =>
        connectedOnce && reconnect ? Math.min(50 * 2 ** retries, 2000) : cause,
    },
  });
  // Without a listener an 'error' event would crash the process; failures surface per request.
  client.on("error", () => undefined);
  await client.connect();
  connectedOnce = true;
  return {
    sendCommand: (args) => client.sendCommand(args),
    close: () => client.close(),
    destroy: () => client.destroy(),
    isReady: () => client.isReady,
  };
}
