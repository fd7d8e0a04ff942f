/**
 * Child process that runs the bridge (`startBridge`) for the benchmark, so that the bridge's
 * event loop and CPU time are not the measured client's. Talks to its parent over IPC:
 * it sends `{ type: "ready", url }`, answers `{ type: "stats", id }` with the bridge's counters
 * and its own CPU time, and closes on `{ type: "close" }` or when the parent goes away.
 *
 * Started by `bench/env.ts` as `node --import tsx bench/bridge-process.ts` with `BENCH_REDIS_URL`
 * and `BENCH_BRIDGE_TOKEN` in its environment.
 * @module
 */
import { startBridge } from "../src/bridge/index.js";
import type { BridgeReply, BridgeRequest } from "./bridge-protocol.js";

const redisUrl = process.env.BENCH_REDIS_URL;
const token = process.env.BENCH_BRIDGE_TOKEN;
if (!redisUrl || !token || !process.send) {
  process.stderr.write("bench/bridge-process.ts must be forked by bench/env.ts\n");
  process.exit(2);
}

const bridge = await startBridge({ redisUrl, token });
const send = (reply: BridgeReply) => process.send?.(reply);

const shutdown = async () => {
  await bridge.close();
  process.exit(0);
};

process.on("message", (message: BridgeRequest) => {
  if (message.type === "stats") {
    const { user, system } = process.cpuUsage();
    send({ type: "stats", id: message.id, stats: bridge.stats(), cpuMicros: user + system });
  } else if (message.type === "close") {
    void shutdown();
  }
});
process.on("disconnect", () => void shutdown());
send({ type: "ready", url: bridge.url });
