/**
 * The benchmark's world: its own throwaway redis-server, the bridge in a child process in front
 * of it, a direct TCP client for setup and counters, and the description of the machine.
 * @module
 */
import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import * as os from "node:os";
import { Redis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { type RedisServer, startRedisServer } from "../demo/redis-server.js";
import { type CommandCounts, parseCommandStats } from "./billing.js";
import type { BridgeReply, BridgeRequest } from "./bridge-protocol.js";
import { now } from "./stats.js";

/** Counters read before and after a measured phase; see {@link BenchEnv.counters}. */
export interface Counters {
  /** HTTP data requests the bridge served (`bridge.stats().requests`). */
  httpRequests: number;
  /** Redis commands inside those requests (`bridge.stats().commands`). */
  httpCommands: number;
  /** CPU time of the bridge process, µs. */
  bridgeCpuMicros: number;
  /**
   * CPU time of the redis-server process, µs (`INFO cpu`: used_cpu_user + used_cpu_sys): its
   * share of every command, script and reply, and of its own housekeeping (the expiry of keys
   * with a TTL, whenever that runs). Read in the same INFO as `commandStats` (its own cost lands
   * in each measured block: the same for every participant).
   */
  redisCpuMicros: number;
  /**
   * Commands the benchmark's TCP clients sent (counted where ioredis sends them: Redis's own
   * INFO counters also count the commands a Lua script runs, which are no round trips).
   */
  tcpCommands: number;
  /**
   * Calls per Redis command, from `INFO commandstats` (scripts' inner calls included): the
   * difference of two readings is the bill of what ran in between (bench/billing.ts).
   */
  commandStats: CommandCounts;
}

/** What a scenario needs. Close it with {@link BenchEnv.close}. */
export interface BenchEnv {
  redisUrl: string;
  bridgeUrl: string;
  token: string;
  /** Direct TCP client for setup (populating keys, SCRIPT FLUSH, INFO); never measured. */
  admin: IORedis;
  /** A new `@upstash/redis` client on the bridge with the client's own defaults (or `options`). */
  http(options?: { enableAutoPipelining?: boolean }): Redis;
  /** A new ioredis client (default options) on the redis-server, connected and ready. */
  tcp(): Promise<IORedis>;
  /** Reads every counter. */
  counters(): Promise<Counters>;
  /** How the bridge answers blocking commands from now on (`POST /__bridge/blocking`). */
  setBlocking(mode: "refuse" | "instant" | "block"): Promise<void>;
  /**
   * Makes the bridge hold every command request `ms` before running it (its `delayMs` fault,
   * `POST /__bridge/faults`), a network's round trip on loopback; 0 removes it.
   */
  setDelay(ms: number): Promise<void>;
  machine(): Promise<Machine>;
  close(): Promise<void>;
}

/** The machine the numbers were taken on. */
export interface Machine {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  redis: string;
  date: string;
  /** 1-minute load average when the run started (other processes compete for the cores). */
  loadAverageAtStart: number;
}

/** Starts redis-server and the bridge (in a child process) on free loopback ports. */
export async function startBenchEnv(): Promise<BenchEnv> {
  const redis = await startRedisServer();
  let bridge: BridgeChild | undefined;
  let admin: IORedis | undefined;
  try {
    const token = randomBytes(16).toString("hex");
    bridge = await startBridgeChild(redis.url, token);
    admin = await connectTcp(redis.url);
    return makeEnv(redis, bridge, admin, token);
  } catch (error) {
    admin?.disconnect();
    await bridge?.close();
    await redis.stop();
    throw error;
  }
}

/**
 * When each message delivered to a subscription of the benchmark's HTTP clients arrived
 * (`now()`, before any listener of the library sees it), so that the contended scenario can
 * split a hand-off into the release's trip to the next holder's message and what the next
 * holder does after it.
 */
export const messageArrivals: number[] = [];

function timingMessages(redis: Redis): Redis {
  const subscribe = redis.subscribe.bind(redis);
  redis.subscribe = ((channels: string | string[]) => {
    const sub = subscribe(channels);
    sub.on("message", () => messageArrivals.push(now()));
    return sub;
  }) as typeof redis.subscribe;
  return redis;
}

function makeEnv(redis: RedisServer, bridge: BridgeChild, admin: IORedis, token: string): BenchEnv {
  const tcpClients = new Set<IORedis>();
  const sent = { commands: 0 };
  return {
    redisUrl: redis.url,
    bridgeUrl: bridge.url,
    token,
    admin,
    http: (options = {}) => timingMessages(new Redis({ url: bridge.url, token, ...options })),
    tcp: async () => {
      const client = await connectTcp(redis.url);
      countSends(client, sent);
      tcpClients.add(client);
      client.once("end", () => tcpClients.delete(client));
      return client;
    },
    counters: async () => {
      const b = await bridge.stats();
      // Both sections in one INFO (Redis 7): one round trip, and one INFO in each block's count.
      const info = (await admin.call("INFO", "cpu", "commandstats")) as string;
      return {
        httpRequests: b.stats.requests,
        httpCommands: b.stats.commands,
        bridgeCpuMicros: b.cpuMicros,
        redisCpuMicros: parseRedisCpu(info),
        tcpCommands: sent.commands,
        commandStats: parseCommandStats(info),
      };
    },
    setBlocking: async (mode) => {
      const response = await fetch(`${bridge.url}/__bridge/blocking`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ mode }),
      });
      if (!response.ok) throw new Error(`bridge: blocking ${mode}: HTTP ${response.status}`);
    },
    setDelay: async (ms) => {
      const response = await fetch(`${bridge.url}/__bridge/faults`, {
        method: ms > 0 ? "POST" : "DELETE",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(ms > 0 ? { body: JSON.stringify({ delayMs: ms }) } : {}),
      });
      if (!response.ok) throw new Error(`bridge: delay ${ms} ms: HTTP ${response.status}`);
    },
    machine: async () => {
      const info = await admin.info("server");
      const cpus = os.cpus();
      return {
        cpuModel: cpus[0]?.model.trim() ?? "unknown",
        cores: os.availableParallelism(),
        memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
        os: `${os.type()} ${os.release()} ${os.arch()}`,
        node: process.version,
        redis: /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown",
        date: new Date().toISOString(),
        loadAverageAtStart: Math.round((os.loadavg()[0] ?? 0) * 100) / 100,
      };
    },
    close: async () => {
      for (const client of tcpClients) client.disconnect();
      admin.disconnect();
      await bridge.close();
      await redis.stop();
    },
  };
}

/** Counts every command `client` sends from now on (each is one round trip, unpipelined). */
function countSends(client: IORedis, sent: { commands: number }): void {
  const send = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<IORedis["sendCommand"]>) => {
    sent.commands += 1;
    return send(...args);
  }) as IORedis["sendCommand"];
}

async function connectTcp(url: string): Promise<IORedis> {
  const client = new IORedis(url, { lazyConnect: true });
  await client.connect();
  return client;
}

interface BridgeChild {
  url: string;
  stats(): Promise<{ stats: import("../src/bridge/index.js").BridgeStats; cpuMicros: number }>;
  close(): Promise<void>;
}

const BRIDGE_START_TIMEOUT_MS = 20_000;

/** Forks `bench/bridge-process.ts` and waits for its URL. */
async function startBridgeChild(redisUrl: string, token: string): Promise<BridgeChild> {
  const child: ChildProcess = fork(new URL("./bridge-process.ts", import.meta.url), {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, BENCH_REDIS_URL: redisUrl, BENCH_BRIDGE_TOKEN: token },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = once(child, "exit");
  const pending = new Map<number, (reply: Extract<BridgeReply, { type: "stats" }>) => void>();
  let nextId = 1;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`bridge did not start within ${BRIDGE_START_TIMEOUT_MS} ms`)),
      BRIDGE_START_TIMEOUT_MS,
    );
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`bridge process exited early (code ${code})`));
    });
    child.on("message", (reply: BridgeReply) => {
      if (reply.type === "ready") {
        clearTimeout(timer);
        resolve(reply.url);
      } else {
        pending.get(reply.id)?.(reply);
        pending.delete(reply.id);
      }
    });
  });
  const request = (message: BridgeRequest) => child.send(message);
  let closed: Promise<void> | undefined;
  return {
    url,
    stats: () =>
      new Promise((resolve) => {
        const id = nextId++;
        pending.set(id, resolve);
        request({ type: "stats", id });
      }),
    close: () => {
      closed ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        request({ type: "close" });
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      })();
      return closed;
    },
  };
}

/** used_cpu_user + used_cpu_sys of an `INFO cpu` reply (seconds, 6 decimals), in µs. */
export function parseRedisCpu(info: string): number {
  let micros = 0;
  for (const line of info.split(/\r?\n/)) {
    const m = /^used_cpu_(?:user|sys):([0-9.]+)$/.exec(line);
    if (m?.[1]) micros += Math.round(Number(m[1]) * 1e6);
  }
  return micros;
}
