/**
 * Vitest global setup: one throwaway redis-server and one bridge in front of it for the whole
 * run. Test files reach them through `inject("redisUrl" | "bridgeUrl" | "bridgeToken")` (see
 * `test/support/env.ts`). A second bridge on the same Redis (`faultBridgeUrl`, same token) is
 * reserved for the Worker tests, which inject faults into it.
 */

import { randomBytes } from "node:crypto";
import type { TestProject } from "vitest/node";
import { startBridge } from "../src/bridge/index.js";
import { startRedisServer } from "./support/redis-server.js";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await startRedisServer();
  const token = randomBytes(16).toString("hex");
  let bridge: Awaited<ReturnType<typeof startBridge>>;
  let faultBridge: Awaited<ReturnType<typeof startBridge>>;
  try {
    bridge = await startBridge({ redisUrl: redis.url, token });
  } catch (error) {
    await redis.stop();
    throw error;
  }
  try {
    faultBridge = await startBridge({ redisUrl: redis.url, token });
  } catch (error) {
    await bridge.close();
    await redis.stop();
    throw error;
  }
  project.provide("redisUrl", redis.url);
  project.provide("bridgeUrl", bridge.url);
  project.provide("bridgeToken", token);
  project.provide("faultBridgeUrl", faultBridge.url);
  return async () => {
    await faultBridge.close();
    await bridge.close();
    await redis.stop();
  };
}
