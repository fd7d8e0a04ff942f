/**
 * Redis nodes for the fault campaigns: a redis-server (no persistence) that can be killed with
 * SIGKILL and restarted on the same port, and a bridge in front of it. Raw access (SCAN, PTTL,
 * GET/SET of the unguarded counter) goes over TCP, behind the bridge's back.
 */
import { randomBytes } from "node:crypto";
import { createClient } from "@redis/client";
import { Redis, type RedisConfigNodejs } from "@upstash/redis";
import { type RedisServer, startRedisServer } from "../../demo/redis-server.js";
import { type Bridge, startBridge } from "../../src/bridge/index.js";
import type { KeyEntry } from "./checkers.js";

/** A redis-server process that can be killed and restarted on its port. */
export class RedisNode {
  readonly port: number;
  #server: RedisServer | undefined;
  /** SIGKILLs so far. */
  kills = 0;

  private constructor(server: RedisServer) {
    this.port = server.port;
    this.#server = server;
  }

  /** Starts a redis-server on a free loopback port (retrying another port if it was taken). */
  static async start(): Promise<RedisNode> {
    return new RedisNode(await startRedisServer());
  }

  /** `redis://127.0.0.1:<port>` */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** True while the process runs. */
  get running(): boolean {
    return this.#server !== undefined;
  }

  /** `kill -9`: no shutdown, no save; resolves when the process is gone. */
  async kill9(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    this.kills += 1;
    await server.kill9();
  }

  /** Starts the server again on the same port, empty (no persistence); resolves when ready. */
  async restart(): Promise<void> {
    if (this.#server) return;
    let lastError: unknown;
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        this.#server = await startRedisServer({ port: this.port });
        return;
      } catch (error) {
        // The port can stay busy for a moment after SIGKILL; try again shortly.
        lastError = error;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    throw lastError;
  }

  /** Terminates the server (SIGTERM) and waits for it. Idempotent. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    await server?.stop();
  }
}

/** A raw RESP2 client (replies as the server sends them). Close with `close()`. */
export async function rawClient(url: string) {
  const client = createClient({ url, RESP: 2, disableClientInfo: true });
  client.on("error", () => undefined);
  await client.connect();
  return {
    /** Sends one command; replies are strings, numbers, arrays or null. */
    send: (args: readonly string[]) => client.sendCommand([...args]) as Promise<unknown>,
    close: () => client.close(),
  };
}

/** A raw client. */
export type RawClient = Awaited<ReturnType<typeof rawClient>>;

/** Every key matching `*<fragment>*`, with its PTTL. */
export async function scanKeys(raw: RawClient, fragment: string): Promise<KeyEntry[]> {
  const keys = new Set<string>();
  let cursor = "0";
  do {
    const reply = (await raw.send(["SCAN", cursor, "MATCH", `*${fragment}*`, "COUNT", "1000"])) as [
      string,
      string[],
    ];
    cursor = String(reply[0]);
    for (const key of reply[1]) keys.add(String(key));
  } while (cursor !== "0");
  const out: KeyEntry[] = [];
  for (const key of [...keys].sort()) {
    out.push({ key, pttl: Number(await raw.send(["PTTL", key])) });
  }
  return out;
}

/** A redis-server with a bridge in front of it. */
export interface Pair {
  node: RedisNode;
  bridge: Bridge;
  url: string;
  token: string;
  /** A fresh `@upstash/redis` client on the bridge (client defaults unless overridden). */
  redis(options?: Partial<RedisConfigNodejs>): Redis;
  /** Stops the bridge and the server. */
  close(): Promise<void>;
}

/** Starts a redis-server and a bridge (random token) in front of it. */
export async function startPair(): Promise<Pair> {
  const node = await RedisNode.start();
  const token = randomBytes(16).toString("hex");
  let bridge: Bridge;
  try {
    bridge = await startBridge({ redisUrl: node.url, token });
  } catch (error) {
    await node.stop();
    throw error;
  }
  return {
    node,
    bridge,
    url: bridge.url,
    token,
    redis: (options = {}) => new Redis({ url: bridge.url, token, ...options }),
    close: async () => {
      await bridge.close();
      await node.stop();
    },
  };
}
