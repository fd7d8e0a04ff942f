/**
 * One client of the liveness campaign in a process of its own (forked by liveness.ts with tsx),
 * so that the campaign can SIGKILL it: a holder at half its lease, or a waiter once it has
 * registered. It makes one acquire when told to, reports its events and its outcome, never
 * releases, and stays until it is killed.
 *
 * Configured by EDGELOCK_LIVENESS_CLIENT (JSON {@link LivenessChildConfig}); speaks over the
 * IPC channel: in {@link ToLivenessChild}, out {@link FromLivenessChild}.
 */
import { Redis } from "@upstash/redis";
import { EdgeLock, type LockEvent } from "../../src/index.js";
import { type AcquireOptions, acquire, type LeasedKind, type Role } from "./liveness-kinds.js";

export interface LivenessChildConfig {
  bridgeUrl: string;
  bridgeToken: string;
  kind: LeasedKind;
  role: Role;
  name: string;
  options: AcquireOptions;
}

/** Parent → child: make the acquire now. */
export type ToLivenessChild = { type: "go" };

/** What the parent needs of an event: its kind, cost and the waits it counts. */
export interface EventSummary {
  type: LockEvent["type"];
  requests: number;
  renewed?: boolean;
}

/** Child → parent. `at` and `startedAt` are this process's `Date.now()` (the host's clock). */
export type FromLivenessChild =
  | { type: "ready" }
  | { type: "event"; event: EventSummary }
  | { type: "acquired"; startedAt: number; at: number; permitIds?: readonly string[] }
  | { type: "gave-up"; startedAt: number; at: number }
  | { type: "failed"; startedAt: number; at: number; error: string };

const config = JSON.parse(process.env.EDGELOCK_LIVENESS_CLIENT ?? "null") as LivenessChildConfig;
if (!config || !process.send) {
  throw new Error("liveness-client.ts runs forked, with EDGELOCK_LIVENESS_CLIENT");
}
const send = (message: FromLivenessChild) => process.send?.(message);

const edgelock = new EdgeLock({
  redis: new Redis({ url: config.bridgeUrl, token: config.bridgeToken }),
  onEvent: (e) => {
    const event: EventSummary = { type: e.type, requests: e.requests };
    if (e.type === "renew") event.renewed = e.renewed;
    send({ type: "event", event });
  },
});

process.on("message", (message: ToLivenessChild) => {
  if (message.type !== "go") return;
  const startedAt = Date.now();
  acquire(edgelock, config.kind, config.role, config.name, config.options).then(
    (lease) => {
      const at = Date.now();
      if (lease === null) send({ type: "gave-up", startedAt, at });
      else if (lease.permitIds)
        send({ type: "acquired", startedAt, at, permitIds: lease.permitIds });
      else send({ type: "acquired", startedAt, at });
      // Held, never released: the parent kills this process while the lease lasts.
    },
    (error: unknown) => send({ type: "failed", startedAt, at: Date.now(), error: String(error) }),
  );
});
send({ type: "ready" });
