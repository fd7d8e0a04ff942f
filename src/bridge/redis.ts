/**
 * The Redis side of the bridge: two RESP2 connections through `@redis/client`, raw
 * `sendCommand` (no reply transformers) and bulk strings kept as `Buffer`.
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

/** The subset of a `@redis/client` connection the bridge uses. */
interface Connection {
  sendCommand(args: readonly string[]): Promise<unknown>;
  close(): Promise<void>;
  destroy(): void;
}

/**
 * Two connections to one Redis: a shared one for single commands and pipelines (node-redis
 * pipelines concurrent commands on it), and a dedicated one for transactions.
 */
export class RedisBackend {
  readonly #shared: Connection;
  readonly #tx: Connection;
  #txTail: Promise<unknown> = Promise.resolve();

  private constructor(shared: Connection, tx: Connection) {
    this.#shared = shared;
    this.#tx = tx;
  }

  /**
   * Opens both connections to `url` (e.g. `redis://127.0.0.1:6379`).
   *
   * Fails fast: if Redis cannot be reached now, rejects with {@link RedisUnavailableError}. Once
   * connected, a dropped connection is re-established in the background (backoff 50 ms doubling
   * up to 2 s) while requests fail with 500.
   */
  static async connect(url: string): Promise<RedisBackend> {
    const opened: Connection[] = [];
    try {
      opened.push(await openConnection(url));
      opened.push(await openConnection(url));
    } catch (error) {
      for (const connection of opened) connection.destroy();
      throw new RedisUnavailableError(error);
    }
    const [shared, tx] = opened as [Connection, Connection];
    return new RedisBackend(shared, tx);
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

  async #runTransaction(commands: readonly Command[]): Promise<TransactionResult> {
    const sent = [
      settle(this.#tx.sendCommand(["MULTI"])),
      ...commands.map((command) => settle(this.#tx.sendCommand(command))),
      settle(this.#tx.sendCommand(["EXEC"])),
    ];
    const replies = await Promise.all(sent);
    const exec = replies.at(-1);
    if (Array.isArray(exec)) return { ok: true, replies: exec };
    const firstError = replies.slice(0, -1).find((reply) => reply instanceof ErrorReply);
    const execMessage = exec instanceof ErrorReply ? exec.message : "ERR transaction aborted";
    const detail = firstError instanceof ErrorReply ? ` First error: ${firstError.message}` : "";
    return { ok: false, error: `${execMessage}${detail}` };
  }

  /** Closes both connections, waiting for replies still pending (destroys them on failure). */
  async close(): Promise<void> {
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

/** Resolves error replies as values; turns connection failures into RedisUnavailableError. */
async function settle(pending: Promise<unknown>): Promise<RawReply> {
  try {
    return await pending;
  } catch (error) {
    if (error instanceof ErrorReply) return error;
    throw new RedisUnavailableError(error);
  }
}

async function openConnection(url: string): Promise<Connection> {
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
        connectedOnce ? Math.min(50 * 2 ** retries, 2000) : cause,
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
  };
}
