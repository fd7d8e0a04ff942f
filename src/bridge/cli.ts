#!/usr/bin/env node
/**
 * `edgelock-bridge`: runs the Upstash-REST-compatible bridge in front of a Redis server.
 *
 * ```
 * edgelock-bridge --token dev [--redis-url redis://127.0.0.1:6379] [--port 8079] [--host 127.0.0.1]
 *                 [--blocking refuse|instant|block] [--blocking-connections 64]
 *                 [--max-subscriptions 256] [--log]
 * edgelock-bridge --token dev --cluster-node redis://127.0.0.1:7000 [--cluster-node ...] ...
 * ```
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 1 when Redis is unreachable at start (or the port cannot
 * be bound), 2 on a usage error (e.g. no token).
 *
 * @module
 */

import { parseArgs } from "node:util";
import type { BlockingMode, Bridge, RequestLogEntry } from "./index.js";
import {
  checkRedisUrl,
  DEFAULT_BLOCKING_CONNECTIONS,
  DEFAULT_MAX_SUBSCRIPTIONS,
  RedisUnavailableError,
  startBridge,
} from "./index.js";

const USAGE =
  "usage: edgelock-bridge --token <token> [--redis-url <url> | --cluster-node <url> ...] [--port <port>] [--host <host>] [--blocking refuse|instant|block] [--blocking-connections <n>] [--max-subscriptions <n>] [--log] (env: EDGELOCK_BRIDGE_TOKEN, REDIS_URL, PORT)";

const HELP = `${USAGE}

Serves the Upstash REST protocol (POST /, /pipeline, /multi-exec, and pub/sub as Server-Sent
Events: POST /subscribe/<channel>, /psubscribe/<pattern>, /publish/<channel>/<message>) over a
Redis server.

  --token <token>     bearer token clients must send (env EDGELOCK_BRIDGE_TOKEN; required)
  --redis-url <url>   Redis to forward to (env REDIS_URL; default redis://127.0.0.1:6379)
  --cluster-node <url>
                      front a Redis Cluster instead: a node to discover it from (repeat the
                      flag for more nodes; credentials and rediss:// of the first apply to all).
                      Commands go to the node owning their first key; a multi-exec whose keys
                      span hash slots gets 400 (CROSSSLOT). Not with --redis-url
  --port <port>       port to listen on, 0 for any free port (env PORT; default 8079)
  --host <host>       interface to bind (default 127.0.0.1)
  --blocking <mode>   how blocking commands (BLPOP, BRPOP, XREAD ... BLOCK, WAIT, ...) are
                      answered: refuse (400, as the Upstash REST API lists them as not
                      supported), instant (at once: the element or null), block (held open)
                      (default refuse)
  --blocking-connections <n>
                      most Redis connections serving blocking commands (BLPOP, BRPOP, BLMOVE,
                      BZPOPMIN, XREAD ... BLOCK, WAIT, ...) at once, each request on its own so
                      none stalls the others; a request finding all busy gets 503; 0 refuses
                      blocking commands with 400 (default 64; used with --blocking block)
  --max-subscriptions <n>
                      most pub/sub subscriptions open at once, each an SSE stream on a Redis
                      connection of its own; one more gets 503 (default 256)
  --log               print one line per request to stdout: time, method, route, status,
                      duration and command names (never the token or command arguments)
  --help              print this help

Control endpoints (same token): GET /__bridge/stats, POST /__bridge/stats/reset,
POST /__bridge/faults (JSON FaultConfig), DELETE /__bridge/faults, POST /__bridge/blocking
({"mode": "refuse" | "instant" | "block"}), POST /__bridge/subscriptions/drop.`;

interface CliConfig {
  redisUrl?: string;
  cluster?: { rootNodes: string[] };
  token: string;
  port: number;
  host: string;
  blockingConnections: number;
  blocking: BlockingMode;
  maxSubscriptions: number;
  log: boolean;
}

/** Parses flags and environment; returns a config, or an exit code after printing. */
function readConfig(argv: string[], env: NodeJS.ProcessEnv): CliConfig | number {
  let values: ReturnType<typeof parse>["values"];
  try {
    values = parse(argv).values;
  } catch (error) {
    process.stderr.write(`edgelock-bridge: ${(error as Error).message}. ${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  const token = values.token ?? env.EDGELOCK_BRIDGE_TOKEN;
  if (!token) {
    process.stderr.write(`edgelock-bridge: a token is required. ${USAGE}\n`);
    return 2;
  }
  const portText = values.port ?? env.PORT ?? "8079";
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) {
    process.stderr.write(`edgelock-bridge: invalid port "${portText}". ${USAGE}\n`);
    return 2;
  }
  const blockingText = values["blocking-connections"] ?? String(DEFAULT_BLOCKING_CONNECTIONS);
  if (!/^\d{1,6}$/.test(blockingText)) {
    process.stderr.write(
      `edgelock-bridge: invalid --blocking-connections "${blockingText}" (an integer >= 0). ${USAGE}\n`,
    );
    return 2;
  }
  const blocking = values.blocking ?? "refuse";
  if (blocking !== "refuse" && blocking !== "instant" && blocking !== "block") {
    process.stderr.write(
      `edgelock-bridge: invalid --blocking "${blocking}" (refuse, instant or block). ${USAGE}\n`,
    );
    return 2;
  }
  const subscriptionsText = values["max-subscriptions"] ?? String(DEFAULT_MAX_SUBSCRIPTIONS);
  if (!/^\d{1,6}$/.test(subscriptionsText)) {
    process.stderr.write(
      `edgelock-bridge: invalid --max-subscriptions "${subscriptionsText}" (an integer >= 0). ${USAGE}\n`,
    );
    return 2;
  }
  const rootNodes = values["cluster-node"] ?? [];
  if (rootNodes.length > 0 && values["redis-url"] !== undefined) {
    process.stderr.write(
      `edgelock-bridge: --redis-url and --cluster-node exclude each other. ${USAGE}\n`,
    );
    return 2;
  }
  const redisUrl = values["redis-url"] ?? env.REDIS_URL ?? "redis://127.0.0.1:6379";
  try {
    if (rootNodes.length > 0) {
      for (const url of rootNodes) checkRedisUrl(url, "--cluster-node");
    } else {
      checkRedisUrl(redisUrl, values["redis-url"] === undefined ? "REDIS_URL" : "--redis-url");
    }
  } catch (error) {
    process.stderr.write(`edgelock-bridge: ${(error as Error).message} ${USAGE}\n`);
    return 2;
  }
  return {
    token,
    port,
    ...(rootNodes.length > 0 ? { cluster: { rootNodes } } : { redisUrl }),
    host: values.host ?? "127.0.0.1",
    blockingConnections: Number(blockingText),
    blocking,
    maxSubscriptions: Number(subscriptionsText),
    log: values.log === true,
  };
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      "redis-url": { type: "string" },
      "cluster-node": { type: "string", multiple: true },
      token: { type: "string" },
      port: { type: "string" },
      host: { type: "string" },
      "blocking-connections": { type: "string" },
      blocking: { type: "string" },
      "max-subscriptions": { type: "string" },
      log: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
}

/** The Redis URL with any password masked, for messages. */
function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "<invalid url>";
  }
}

function describe(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  const text = cause instanceof Error ? cause.message || cause.name : String(cause);
  return text.replace(/\s+/g, " ");
}

/** `--log`: one line per request; the entry carries no token and no command argument. */
function printLogLine(entry: RequestLogEntry): void {
  const commands = entry.commands.length > 0 ? ` ${entry.commands.join(",")}` : "";
  process.stdout.write(
    `${new Date().toISOString()} ${entry.method} ${entry.route} ${entry.status} ${entry.durationMs.toFixed(1)}ms${commands}\n`,
  );
}

async function main(): Promise<number | undefined> {
  const config = readConfig(process.argv.slice(2), process.env);
  if (typeof config === "number") return config;

  let bridge: Bridge;
  try {
    const { log, ...options } = config;
    bridge = await startBridge(log ? { ...options, log: printLogLine } : options);
  } catch (error) {
    const redis = config.cluster
      ? `the Redis Cluster at ${config.cluster.rootNodes.map(redact).join(", ")}`
      : `Redis at ${redact(config.redisUrl ?? "")}`;
    const target =
      error instanceof RedisUnavailableError
        ? `cannot reach ${redis}`
        : `cannot listen on ${config.host}:${config.port}`;
    process.stderr.write(`edgelock-bridge: ${target}: ${describe(error)}\n`);
    return 1;
  }
  process.stdout.write(`edgelock-bridge listening on ${bridge.url}\n`);

  const stop = () => {
    bridge.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  return undefined;
}

main().then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`edgelock-bridge: ${describe(error)}\n`);
    process.exitCode = 1;
  },
);
