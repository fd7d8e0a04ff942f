/**
 * Throughput of 16 clients on one lock when 10 % of responses hang, against the same run
 * without faults, at edgelock's default settings (requestTimeout 3 s): each client loops
 * tryLock (wait up to 10 s) → hold 10 ms → release for a measured window. Hung responses come
 * from the bridge's fault modes: "lose" (applied, then no answer) and "fail" (never applied, no
 * answer), each socket closed after 5 s (past requestTimeout: from the client's side, a hang).
 *
 * Run: `node --import tsx bench/hung-responses.ts [measureMs]` (default 10 000 per phase).
 * Prints one line per phase and the ratios; not part of `npm run bench`.
 * @module
 */
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "@upstash/redis";
import { startRedisServer } from "../demo/redis-server.js";
import { type FaultConfig, startBridge } from "../src/bridge/index.js";
import { EdgeLock, TransportError } from "../src/index.js";

const CLIENTS = 16;
const HOLD_MS = 10;
const WARM_MS = 2_000;
const measureMs = Number(process.argv[2] ?? 10_000);

interface Phase {
  label: string;
  cycles: number;
  perSec: number;
  errors: number;
  ambiguous: number;
  requests: number;
  /** Waits that fell back to polling (a subscription failed or was lost). */
  polls: number;
  /** Background clean-ups that failed (`error` events). */
  backgroundErrors: number;
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  const token = randomBytes(16).toString("hex");
  const bridge = await startBridge({ redisUrl: server.url, token });
  try {
    const phases: Phase[] = [];
    const hang = (action: "lose" | "fail"): FaultConfig => ({
      seed: 29,
      rules: [{ action, mode: "hang", rate: 0.1, hangMs: 5_000 }],
    });
    phases.push(await phase("no faults", bridge.url, token, undefined, bridge));
    phases.push(await phase("10 % lose-hang", bridge.url, token, hang("lose"), bridge));
    phases.push(await phase("10 % fail-hang", bridge.url, token, hang("fail"), bridge));
    const base = phases[0]?.perSec ?? 0;
    for (const p of phases) {
      console.log(
        `${p.label.padEnd(16)} ${p.cycles} cycles, ${p.perSec.toFixed(1)}/s (ratio ${(p.perSec / base).toFixed(2)}), ${p.errors} failed calls (${p.ambiguous} ambiguous), ${(p.requests / Math.max(1, p.cycles)).toFixed(2)} requests per cycle, ${p.polls} waits fell back to polling, ${p.backgroundErrors} background errors`,
      );
    }
  } finally {
    await bridge.close();
    await server.stop();
  }
}

async function phase(
  label: string,
  url: string,
  token: string,
  faults: FaultConfig | undefined,
  bridge: Awaited<ReturnType<typeof startBridge>>,
): Promise<Phase> {
  const name = `hung:${randomBytes(4).toString("hex")}`;
  const background: Promise<unknown>[] = [];
  let requests = 0;
  let polls = 0;
  let backgroundErrors = 0;
  const clients = Array.from(
    { length: CLIENTS },
    () =>
      new EdgeLock({
        redis: new Redis({ url, token }),
        waitUntil: (p) => background.push(p),
        onEvent: (e) => {
          requests += e.requests;
          if (e.type === "wait-strategy" && e.strategy === "poll") polls += 1;
          if (e.type === "error") backgroundErrors += 1;
        },
      }),
  );
  if (faults) bridge.setFaults(faults);
  const started = performance.now();
  const measureFrom = started + WARM_MS;
  const end = measureFrom + measureMs;
  let cycles = 0;
  let errors = 0;
  let ambiguous = 0;
  let requestsAtStart = 0;
  setTimeout(() => {
    requestsAtStart = requests;
  }, WARM_MS);
  await Promise.all(
    clients.map(async (edgelock) => {
      const lock = edgelock.getLock(name);
      while (performance.now() < end) {
        try {
          const lease = await lock.tryLock({ waitTime: 10_000, leaseTime: 5_000 });
          if (!lease) continue;
          await sleep(HOLD_MS);
          await lease.release();
          if (performance.now() >= measureFrom && performance.now() < end) cycles += 1;
        } catch (error) {
          if (!(error instanceof TransportError)) throw error;
          errors += 1;
          if (error.ambiguous) ambiguous += 1;
        }
      }
    }),
  );
  const measured = requests - requestsAtStart;
  bridge.clearFaults();
  await Promise.allSettled(background);
  return {
    label,
    cycles,
    perSec: (cycles * 1000) / measureMs,
    errors,
    ambiguous,
    requests: measured,
    polls,
    backgroundErrors,
  };
}

await main();
