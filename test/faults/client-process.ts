/**
 * A set-workload client in a process of its own (forked by set-campaign.ts with tsx and
 * clock-preload.ts), talking to the same bridge and resource redis-server as the test process:
 * what the pause scenario stops with SIGSTOP, and what the clock scenario moves the clock of.
 *
 * Configured by EDGELOCK_SET_CLIENT (JSON {@link ChildConfig}); speaks over the IPC channel:
 * in {@link ToChild}, out {@link FromChild}.
 */
import { Redis } from "@upstash/redis";
import { EdgeLock, LeaseLostError } from "../../src/index.js";
import { rawClient } from "./nodes.js";
import {
  acquirer,
  type CycleRecord,
  MIN_USABLE_MS,
  runClient,
  runCycle,
  type SetClientConfig,
  SetResource,
} from "./set-workload.js";

/** What the parent hands a child. */
export interface ChildConfig {
  set: SetClientConfig;
  mode: "loop" | "pause";
  bridgeUrl: string;
  bridgeToken: string;
  resourceUrl: string;
  requestTimeout: number;
  watchdogTimeout?: number;
  /**
   * Pause mode: on "continue", check the lease again before writing (a holder whose clock was
   * stepped while it held); otherwise write regardless (a holder paused after its check).
   */
  recheck?: boolean;
}

/** Parent → child. */
export type ToChild =
  | { type: "go" }
  | { type: "stop" }
  | { type: "clock"; offsetMs: number }
  | { type: "continue" };

/** What a paused holder found about its lease once resumed. */
export interface PauseReport {
  /** `lease.signal` had aborted by the time the holder ran again (before its write). */
  abortedOnResume: boolean;
  /** `lease.signal.reason.reason` ("lost" / "released"), if aborted. */
  reason?: string;
  /** What `lease.renew()` answered after the write: "renewed" or the error's reason. */
  renew: string;
}

/** Child → parent. */
export type FromChild =
  | { type: "ready" }
  | { type: "record"; record: CycleRecord }
  | { type: "checked"; record: CycleRecord }
  | { type: "pause"; report: PauseReport }
  | { type: "clock-set"; offsetMs: number }
  | { type: "done" };

const send = (message: FromChild) => process.send?.(message);
const config = JSON.parse(process.env.EDGELOCK_SET_CLIENT ?? "null") as ChildConfig | null;
if (!config || !process.send)
  throw new Error("client-process.ts runs forked, with EDGELOCK_SET_CLIENT");

const waiters = new Map<ToChild["type"], () => void>();
let stopped = false;
process.on("message", (message: ToChild) => {
  if (message.type === "clock") {
    (globalThis as { setClockOffset?: (ms: number) => void }).setClockOffset?.(message.offsetMs);
    send({ type: "clock-set", offsetMs: message.offsetMs });
    return;
  }
  if (message.type === "stop") stopped = true;
  waiters.get(message.type)?.();
});
const next = (type: ToChild["type"]) => new Promise<void>((resolve) => waiters.set(type, resolve));

const redis = new Redis({ url: config.bridgeUrl, token: config.bridgeToken });
const edgelock = new EdgeLock({
  redis,
  requestTimeout: config.requestTimeout,
  ...(config.watchdogTimeout === undefined ? {} : { watchdogTimeout: config.watchdogTimeout }),
});
const resource = await rawClient(config.resourceUrl);
const set = new SetResource(resource, config.set.setKey);
const acquire = acquirer(config.set, edgelock, redis, resource);
const go = next("go");
send({ type: "ready" });
await go;

if (config.mode === "loop") {
  await runClient(
    config.set,
    acquire,
    set,
    (record) => send({ type: "record", record }),
    () => stopped,
  );
} else {
  let abortedOnResume = false;
  let reason: string | undefined;
  const record = await runCycle(config.set, 0, acquire, set, {
    beforeWrite: async (checked, held) => {
      const resumed = next("continue");
      send({ type: "checked", record: checked });
      // The parent SIGSTOPs this process here, past its lease, and SIGCONTs it later.
      await resumed;
      // Let the timers that fell due during the pause run (the lease's expiry timer, a due
      // renewal) before looking at the lease: a zero timer runs after every overdue one.
      await new Promise((resolve) => setTimeout(resolve, 0));
      abortedOnResume = held.signal.aborted;
      if (held.signal.reason instanceof LeaseLostError) reason = held.signal.reason.reason;
      checked.tooLate = config.recheck
        ? held.signal.aborted || held.expiresAt() - Date.now() < MIN_USABLE_MS
        : // Paused between its check and its write: it writes, as such a process would.
          false;
    },
    beforeRelease: async (_, held) => {
      let renew = "renewed";
      try {
        await held.lease?.renew();
      } catch (error) {
        renew = error instanceof LeaseLostError ? `LeaseLostError(${error.reason})` : String(error);
      }
      const report: PauseReport = { abortedOnResume, renew };
      if (reason !== undefined) report.reason = reason;
      send({ type: "pause", report });
    },
  });
  send({ type: "record", record });
}
send({ type: "done" });
await resource.close();
process.disconnect();
