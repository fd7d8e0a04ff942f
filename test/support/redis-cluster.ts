/**
 * A throwaway local Redis Cluster for tests: three `redis-server --cluster-enabled yes` masters
 * on free loopback ports (no persistence, config files in a temporary folder), joined with
 * `redis-cli --cluster create`, and ready once every node reports `cluster_state:ok`.
 */

import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { createClient } from "@redis/client";
import { keySlot } from "../../src/slot.js";
import { type RedisServer, startRedisServer } from "./redis-server.js";

const run = promisify(execFile);

/** How long the cluster may take to reach `cluster_state:ok` on every node. */
const READY_TIMEOUT_MS = 20_000;
/** Pause between two `CLUSTER INFO` rounds while waiting for the nodes to agree. */
const POLL_MS = 50;
const CLI_NOT_FOUND =
  "redis-cli not found on PATH: install it with `apt-get install -y redis-tools` (or redis-server)";

/** A running local cluster. */
export interface RedisCluster {
  /** The masters, e.g. `redis://127.0.0.1:40123`, in the order they were started. */
  urls: string[];
  /** The master processes. */
  nodes: RedisServer[];
  /** The URL (one of {@link RedisCluster.urls}) of the master owning `key`'s hash slot. */
  masterOf(key: string): string;
  /** Stops every node and removes the temporary folder. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `masters` cluster-enabled redis-servers on 127.0.0.1 and joins them into one cluster
 * without replicas (`redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`), which
 * spreads the 16 384 slots evenly. Resolves once `CLUSTER INFO` says `cluster_state:ok` and
 * knows every node, on every node.
 * @throws Error when redis-server or redis-cli is missing, or the cluster does not form within
 * 20 s (everything started is stopped first).
 */
export async function startRedisCluster(masters = 3): Promise<RedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), "edgelock-cluster-"));
  const nodes: RedisServer[] = [];
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      await Promise.all(nodes.map((node) => node.stop()));
      await rm(dir, { recursive: true, force: true });
    })();
    return stopped;
  };
  try {
    for (let i = 0; i < masters; i++) {
      nodes.push(
        await startRedisServer({
          args: [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            join(dir, `nodes-${i}.conf`),
            "--dir",
            dir,
          ],
        }),
      );
    }
    const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
    try {
      await run(
        "redis-cli",
        ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"],
        { timeout: READY_TIMEOUT_MS },
      );
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") throw new Error(CLI_NOT_FOUND);
      throw error;
    }
    const owners = await waitUntilOk(
      nodes.map((node) => node.url),
      masters,
    );
    return {
      urls: nodes.map((node) => node.url),
      nodes,
      masterOf: (key) => {
        const slot = keySlot(key);
        const owner = owners.find(({ from, to }) => slot >= from && slot <= to);
        if (!owner) throw new Error(`no master owns slot ${slot}`);
        return owner.url;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A range of slots and the URL of the master owning it. */
interface SlotOwner {
  from: number;
  to: number;
  url: string;
}

/**
 * Polls `CLUSTER INFO` on every node until each says `cluster_state:ok` and knows all nodes,
 * then reads who owns which slots (`CLUSTER SLOTS`).
 */
async function waitUntilOk(urls: string[], masters: number): Promise<SlotOwner[]> {
  const clients = await Promise.all(
    urls.map(async (url) => {
      const client = createClient({ url, RESP: 2, disableClientInfo: true });
      client.on("error", () => undefined);
      await client.connect();
      return client;
    }),
  );
  try {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const infos = await Promise.all(
        clients.map(async (client) => String(await client.sendCommand(["CLUSTER", "INFO"]))),
      );
      const ready = infos.every(
        (info) =>
          /^cluster_state:ok\r?$/m.test(info) &&
          new RegExp(`^cluster_known_nodes:${masters}\\r?$`, "m").test(info) &&
          /^cluster_slots_ok:16384\r?$/m.test(info),
      );
      if (ready) {
        const reply = (await clients[0]?.sendCommand(["CLUSTER", "SLOTS"])) as [
          number,
          number,
          [string, number],
        ][];
        return reply.map(([from, to, [host, port]]) => ({
          from,
          to,
          url: `redis://${host}:${port}`,
        }));
      }
      if (Date.now() > deadline) {
        throw new Error(`the cluster did not reach cluster_state:ok within ${READY_TIMEOUT_MS} ms`);
      }
      await sleep(POLL_MS);
    }
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
}
