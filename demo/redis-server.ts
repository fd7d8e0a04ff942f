/**
 * Spawns a throwaway `redis-server` on a free loopback port, without persistence. Used by the
 * test harness (`test/global-setup.ts`) and by `npm run demo`.
 */

import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, Socket } from "node:net";

/** A running redis-server. */
export interface RedisServer {
  /** e.g. `redis://127.0.0.1:40123` */
  url: string;
  port: number;
  /** Terminates the server and waits for the process to exit. Idempotent. */
  stop(): Promise<void>;
  /** `kill -9`: no shutdown, no save; resolves when the process is gone. Idempotent. */
  kill9(): Promise<void>;
}

const NOT_FOUND =
  "redis-server not found on PATH: install it with `apt-get install -y redis-server`";
const READY_LINE = "Ready to accept connections";
const START_TIMEOUT_MS = 10_000;

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /**
   * More `redis-server` arguments after the defaults, e.g. `["--cluster-enabled", "yes"]`.
   * Default: none.
   */
  args?: readonly string[];
  /** Start on exactly this port (e.g. again after `kill9()`), without retrying another. */
  port?: number;
}

/**
 * Starts `redis-server --port P --bind 127.0.0.1 --save '' --appendonly no` (plus
 * `options.args`) on a free port and resolves once it answers PING. Retries with another port if
 * the chosen one was taken meanwhile.
 *
 * @throws Error `redis-server not found on PATH: ...` when the binary is missing.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  if (options.port !== undefined) return launch(options.port, options.args ?? []);
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await launch(port, options.args ?? []);
    } catch (error) {
      if (error instanceof Error && error.message === NOT_FOUND) throw error;
      lastError = error;
    }
  }
  throw lastError;
}

async function launch(port: number, args: readonly string[]): Promise<RedisServer> {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...args],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`redis-server did not start within ${START_TIMEOUT_MS} ms`)),
        START_TIMEOUT_MS,
      );
      const settle = (error?: Error) => {
        clearTimeout(timer);
        child.stdout?.off("data", onData);
        child.off("error", onError);
        child.off("exit", onExit);
        if (error) reject(error);
        else resolve();
      };
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8");
        if (output.includes(READY_LINE)) settle();
      };
      const onError = (error: NodeJS.ErrnoException) =>
        settle(error.code === "ENOENT" ? new Error(NOT_FOUND) : error);
      const onExit = (code: number | null) =>
        settle(new Error(`redis-server exited early (code ${code}): ${lastLine(output)}`));
      child.stdout?.on("data", onData);
      child.on("error", onError);
      child.on("exit", onExit);
    });
    // Keep draining so a chatty server never blocks on a full pipe.
    child.stdout?.resume();
    child.stderr?.resume();
    await ping(port);
  } catch (error) {
    await kill(child, exited);
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: () => {
      stopped ??= kill(child, exited);
      return stopped;
    },
    kill9: () => {
      stopped ??= kill(child, exited, "SIGKILL");
      return stopped;
    },
  };
}

async function kill(
  child: ChildProcess,
  exited: Promise<void>,
  signal: NodeJS.Signals = "SIGTERM",
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) {
    return;
  }
  child.kill(signal);
  await exited;
}

function lastLine(text: string): string {
  return text.trim().split("\n").at(-1) ?? "";
}

/** Asks the OS for a free loopback port. */
async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  await once(server, "close");
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return address.port;
}

/** Sends one inline PING and waits for `+PONG`. */
async function ping(port: number): Promise<void> {
  const socket = new Socket();
  try {
    socket.connect(port, "127.0.0.1");
    await once(socket, "connect");
    socket.write("PING\r\n");
    let reply = "";
    while (!reply.includes("\r\n")) {
      const [chunk] = (await once(socket, "data")) as [Buffer];
      reply += chunk.toString("utf8");
    }
    if (!reply.startsWith("+PONG")) throw new Error(`redis-server answered PING with ${reply}`);
  } finally {
    socket.destroy();
  }
}
