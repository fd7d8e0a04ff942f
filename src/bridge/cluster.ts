/**
 * The Redis side of the bridge in front of a Redis Cluster: `@redis/client`'s cluster client
 * (RESP2, bulk strings as `Buffer`), every command sent to the master owning its first key.
 *
 * @module
 */

import { createCluster, ErrorReply, RESP_TYPES } from "@redis/client";
import type { Command } from "./commands.js";
import { CommandTable, keySlot } from "./keys.js";
import {
  type Backend,
  BlockingPool,
  type BlockingPoolOptions,
  CommandRefusedError,
  type RawReply,
  RedisUnavailableError,
  runTransaction,
  settle,
  type TransactionResult,
} from "./redis.js";

const TYPE_MAPPING = { [RESP_TYPES.BLOB_STRING]: Buffer };
const COMMAND_OPTIONS = { typeMapping: TYPE_MAPPING };

/** What Redis Cluster answers for a transaction whose keys span slots; the bridge says it first. */
export const CROSSSLOT_TRANSACTION =
  "CROSSSLOT Keys in request don't hash to the same slot (bridge: a transaction on a cluster runs on one node, so all its keys must share one hash slot: give them a common hash tag such as {order:42})";

/** Refusal of a blocking request whose keys live on several nodes. */
export const BLOCKING_ACROSS_NODES =
  "ERR bridge: on a cluster, a pipeline holding a blocking command must keep its keys on one node (it runs on one pooled connection)";

function openCluster(rootNodes: readonly string[]) {
  const first = new URL(rootNodes[0] as string);
  return createCluster({
    rootNodes: rootNodes.map((url) => ({ url })),
    RESP: 2,
    // Discovered nodes take their settings from here, not from the root URLs.
    defaults: {
      ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
      ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
      disableClientInfo: true,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: 2000,
        ...(first.protocol === "rediss:" ? { tls: true as const } : {}),
        // A node that drops is reconnected (backoff 50 ms doubling); after 5 failed attempts its
        // client is given up, and the next request for its slots opens a fresh one.
        reconnectStrategy: (retries: number, cause: Error) =>
          retries < 5 ? Math.min(50 * 2 ** retries, 2000) : cause,
      },
    },
    commandOptions: COMMAND_OPTIONS,
  });
}

type Cluster = ReturnType<typeof openCluster>;
type NodeClient = Awaited<ReturnType<Cluster["getNodeClientForKey"]>>;

/**
 * A Redis Cluster behind the bridge.
 *
 * - A command with keys goes to the master owning its first key's slot (found in Redis's own
 *   command table; `EVAL`/`EVALSHA` by the first of their `numkeys` keys), as a cluster-aware
 *   client sends it; a command whose keys span slots gets Redis's `CROSSSLOT` error. A `MOVED`
 *   or `ASK` redirection (a slot being moved) is followed by the cluster client, never returned.
 * - A command without keys goes where `@redis/client` routes it: `SCRIPT LOAD`/`SCRIPT FLUSH`
 *   to every master, `PING` to every master, `DBSIZE` summed over them, others to any master.
 * - A pipeline keeps its order on every node (commands to one node are written in order on its
 *   connection); a command without keys waits for the ones before it, and those after it wait
 *   for it. Pipelines are not atomic, on one server either.
 * - A transaction runs on the node owning its keys, which must share one slot (else 400
 *   {@link CROSSSLOT_TRANSACTION}, nothing sent); one refused with `MOVED` runs again on the
 *   slot's new owner.
 * - A request holding a blocking command runs on a pooled connection of its own to the node
 *   owning its keys (the same pool semantics as on one server: `max` counts connections to all
 *   nodes); its keys must live on one node (else 400 {@link BLOCKING_ACROSS_NODES}). It is not
 *   redirected: one sent while its slot moves answers Redis's `MOVED` error (the next
 *   non-blocking command on that slot teaches the bridge the new owner).
 * - Every master has its own script cache: `EVALSHA` answers `NOSCRIPT` on a node that never ran
 *   the script, whatever another node has (edgelock then sends `EVAL`).
 */
export class ClusterBackend implements Backend {
  readonly #cluster: Cluster;
  readonly #table: CommandTable;
  readonly #blocking: BlockingPool;
  /** The first root URL: scheme and credentials of the pooled connections' URLs. */
  readonly #root: string;

  private constructor(cluster: Cluster, table: CommandTable, pool: BlockingPool, root: string) {
    this.#cluster = cluster;
    this.#table = table;
    this.#blocking = pool;
    this.#root = root;
  }

  /**
   * Discovers the cluster from `rootNodes` (`redis://` or `rediss://` URLs of some of its
   * nodes; credentials and TLS of the first apply to every node), connects to its masters and
   * reads Redis's command table. Fails fast.
   * @throws RedisUnavailableError when no root node answers or the cluster cannot be used.
   */
  static async connect(
    rootNodes: readonly string[],
    blocking: BlockingPoolOptions,
  ): Promise<ClusterBackend> {
    const cluster = openCluster(rootNodes);
    // Without a listener an 'error' event would crash the process; failures surface per request.
    cluster.on("error", () => undefined);
    let table: CommandTable;
    try {
      await cluster.connect();
      table = CommandTable.parse(await cluster.sendCommand(undefined, true, ["COMMAND"]));
    } catch (error) {
      cluster.destroy();
      throw new RedisUnavailableError(error);
    }
    const root = rootNodes[0] as string;
    return new ClusterBackend(cluster, table, new BlockingPool(root, blocking), root);
  }

  /** The pool that {@link ClusterBackend.blocking} runs on. */
  get blockingPool(): BlockingPool {
    return this.#blocking;
  }

  /** Sends one command to the node owning its first key (see the class documentation). */
  async single(command: Command): Promise<RawReply> {
    const [reply] = await this.#route([command]);
    return reply;
  }

  /**
   * Sends a pipeline, each command to its node, in order per node (see the class
   * documentation). Rejects with {@link RedisUnavailableError} if any command got no reply.
   */
  pipeline(commands: readonly Command[]): Promise<RawReply[]> {
    return this.#route(commands);
  }

  /**
   * Runs `MULTI`, the commands and `EXEC` on the node owning the transaction's keys (any master
   * without keys), written in one step on that node's connection so nothing else lands in
   * between. Keys in several slots: `{ ok: false }` with {@link CROSSSLOT_TRANSACTION}, nothing
   * sent. A command rejected while queueing discards the transaction (`EXECABORT`, with the
   * first error); when that error is `MOVED` (the slot has a new owner), the bridge learns the
   * new layout and runs the transaction there instead, once.
   */
  async transaction(commands: readonly Command[]): Promise<TransactionResult> {
    const keys = commands.flatMap((command) => this.#table.keys(command));
    if (new Set(keys.map(keySlot)).size > 1) return { ok: false, error: CROSSSLOT_TRANSACTION };
    const [key] = keys;
    for (let attempt = 0; ; attempt++) {
      const node = key === undefined ? await this.#anyNode() : await this.#nodeFor(key);
      const chainId = Symbol("transaction");
      const outcome = await runTransaction(
        (args) => node.sendCommand(args, { ...COMMAND_OPTIONS, chainId }),
        commands,
      );
      if (
        outcome.ok ||
        key === undefined ||
        attempt > 0 ||
        !/First error: MOVED /.test(outcome.error)
      ) {
        return outcome;
      }
      // A keyed read through the cluster client follows the redirection and refreshes its map.
      await settle(this.#cluster.sendCommand(key, true, ["EXISTS", key], COMMAND_OPTIONS));
    }
  }

  /**
   * Sends a request holding a blocking command on a pooled connection to the node owning its
   * keys (any master when it has none).
   * @throws CommandRefusedError when its keys live on several nodes (nothing sent).
   * @throws BlockingPoolBusyError, RedisUnavailableError as {@link BlockingPool.run}.
   */
  async blocking(commands: readonly Command[], signal?: AbortSignal): Promise<RawReply[]> {
    const keys = commands.flatMap((command) => this.#table.keys(command).slice(0, 1));
    const clients = await Promise.all(
      keys.length > 0 ? keys.map((key) => this.#nodeFor(key)) : [this.#anyNode()],
    );
    const nodes = new Set(clients.map(addressOf));
    if (nodes.size > 1) throw new CommandRefusedError(BLOCKING_ACROSS_NODES);
    const [node] = nodes as Set<string>;
    return this.#blocking.run(commands, signal, this.#urlOf(node as string));
  }

  /** The node owning `channel`'s hash slot (its `{tag}`), where a script publishing to it runs. */
  async subscriptionUrl(channel: string): Promise<string> {
    return this.#urlOf(addressOf(await this.#nodeFor(channel)));
  }

  /** Destroys the blocking pool's connections, then closes the cluster client. */
  async close(): Promise<void> {
    this.#blocking.close();
    try {
      await this.#cluster.close();
    } catch {
      this.#cluster.destroy();
    }
  }

  /**
   * Sends commands to their nodes: each run of commands with keys is written in order, one
   * node client per command; a command without keys runs alone, after those before it.
   */
  async #route(commands: readonly Command[]): Promise<RawReply[]> {
    const pending: Promise<RawReply>[] = [];
    try {
      let i = 0;
      while (i < commands.length) {
        const run: { command: Command; key: string }[] = [];
        for (; i < commands.length; i++) {
          const command = commands[i] as Command;
          const [key] = this.#table.keys(command);
          if (key === undefined) break;
          run.push({ command, key });
        }
        if (run.length > 0) {
          const nodes = await Promise.all(run.map(({ key }) => this.#nodeFor(key)));
          // Written synchronously, in order: each node's connection keeps the request's order.
          for (const [k, { command, key }] of run.entries()) {
            pending.push(this.#direct(nodes[k] as NodeClient, key, command));
          }
          continue;
        }
        await Promise.allSettled(pending);
        const keyless = settle(
          this.#cluster.sendCommand(undefined, false, commands[i++] as Command, COMMAND_OPTIONS),
        );
        pending.push(keyless);
        await keyless.catch(() => undefined);
      }
    } catch (error) {
      await Promise.allSettled(pending);
      throw error instanceof RedisUnavailableError ? error : new RedisUnavailableError(error);
    }
    return Promise.all(pending);
  }

  /** The client of some master (replicas, if any, are never used). */
  async #anyNode(): Promise<NodeClient> {
    const masters = this.#cluster.masters;
    try {
      const master = masters[Math.floor(Math.random() * masters.length)];
      if (!master) throw new Error("no master known");
      return await this.#cluster.nodeClient(master);
    } catch (error) {
      throw new RedisUnavailableError(error);
    }
  }

  /** The master client owning `key`'s slot. */
  async #nodeFor(key: string): Promise<NodeClient> {
    try {
      return await this.#cluster.getNodeClientForKey(key);
    } catch (error) {
      throw new RedisUnavailableError(error);
    }
  }

  /** Sends `command` to `node`; a redirection (the slot moved) goes through the cluster client. */
  async #direct(node: NodeClient, key: string, command: Command): Promise<RawReply> {
    const reply = await settle(node.sendCommand(command, COMMAND_OPTIONS));
    if (reply instanceof ErrorReply && /^(?:MOVED|ASK) /.test(reply.message)) {
      return settle(this.#cluster.sendCommand(key, false, command, COMMAND_OPTIONS));
    }
    return reply;
  }

  /** A URL for `host:port` with the root URL's scheme and credentials. */
  #urlOf(address: string): string {
    const at = address.lastIndexOf(":");
    const host = address.slice(0, at);
    const url = new URL(this.#root);
    url.hostname = host.includes(":") ? `[${host}]` : host;
    url.port = address.slice(at + 1);
    url.pathname = "";
    return url.toString();
  }
}

/** `host:port` a node client is connected to. */
function addressOf(client: NodeClient): string {
  const socket = client.options?.socket as { host?: string; port?: number } | undefined;
  return `${socket?.host}:${socket?.port}`;
}
