/**
 * Keep-alive strategies, which replace Redisson's watchdog thread: none, an in-invocation timer,
 * or the `LeaseKeeper` Durable Object's alarm across invocations (with the acquiring invocation
 * polling the keeper so its lease's signal learns of a loss).
 * @module
 */
import { ServiceLimitError, TransportError } from "../errors.js";
import {
  DEFAULT_KEEPER_INSTANCE,
  type KeeperRegistration,
  type KeeperReply,
  type LeaseKeeperBinding,
  type LeaseKeeperStub,
} from "../keeper.js";
import { checkMs, checkName, checkOptions } from "../validate.js";
import type { HostKind } from "./json.js";
import { renewalPeriod, reschedule, retryDelay } from "./renewal.js";

/** Renewal through the `LeaseKeeper` Durable Object, across invocations. */
export interface KeeperKeepAlive {
  /** The keeper namespace; defaults to the EdgeLock's `keeper` option. */
  keeper?: LeaseKeeperBinding;
  /**
   * Stop renewing this many ms after the acquire, whatever happens to the owner: a crashed
   * owner's lock is free again within `maxHoldTime + leaseTime`. Integer in [1, 86 400 000].
   */
  maxHoldTime: number;
  /** Keeper instance name. @default "edgelock-lease-keeper" */
  instance?: string;
}

/**
 * How a lease is kept alive:
 * - `"none"`: only explicit `lease.renew()` calls;
 * - `"timer"`: renew every `leaseTime / 3` while this invocation lives (Redisson's watchdog
 *   period), retrying every `leaseTime / 9` after a failure; the timer never keeps a Node
 *   process alive by itself;
 * - {@link KeeperKeepAlive}: the `LeaseKeeper` Durable Object's alarm renews across invocations;
 *   while the acquiring invocation lives, the lease asks the keeper every `leaseTime / 3` (an
 *   RPC, no Redis request) and its `signal` aborts when the keeper found the lease lost, gave up
 *   at `maxHoldTime`, or no longer knows it.
 *
 * Either stops renewing when the service refuses a renewal with a `ServiceLimitError` (its
 * request budget spent, …): the lease's `signal` then aborts at once with a `LeaseLostError`
 * whose `cause` is that error, and the lock runs out at the lease's expiry unless released.
 *
 * Default: `"timer"` in watchdog mode (`leaseTime` omitted), `"none"` with a fixed lease.
 */
export type KeepAlive = "none" | "timer" | KeeperKeepAlive;

/** What a keep-alive strategy may see and do of its lease. Internal. */
export interface KeptLease {
  /** Which primitive issued the lease. */
  readonly kind: HostKind;
  /** Permit ids (permit leases). */
  readonly permitIds?: readonly string[] | undefined;
  readonly name: string;
  readonly owner: string;
  readonly id: string;
  readonly leaseTime: number;
  /** One timer renewal: true when still held; false when lost (the lease has ended then). */
  renewByTimer(): Promise<boolean>;
  /** Someone else (the keeper) confirmed that the lock runs at least until `expiresAt`. */
  confirm(expiresAt: number): void;
  /**
   * Nobody keeps the lease alive any more: abort its signal. `refused`: the service limit that
   * refused its renewal, when that is why.
   */
  markLost(refused?: ServiceLimitError): void;
  /** Reports a failure in the background. */
  backgroundError(operation: "renew" | "keeper", error: unknown): void;
}

/** Stops a started keep-alive. */
export type StopKeepAlive = () => Promise<void>;

/**
 * Starts `keepAlive` for `lease`.
 * @returns the stop function, or `undefined` for `"none"`.
 * @throws TypeError when no keeper is configured; {@link TransportError} when it refused.
 */
export async function startKeepAlive(
  lease: KeptLease,
  keepAlive: KeepAlive,
  defaultKeeper: LeaseKeeperBinding | undefined,
): Promise<StopKeepAlive | undefined> {
  if (keepAlive === "none") return undefined;
  if (keepAlive === "timer") return startTimer(lease);
  return startKeeper(lease, keepAlive, defaultKeeper);
}

function startTimer(lease: KeptLease): StopKeepAlive {
  const stop = reschedule(
    () =>
      lease.renewByTimer().then(
        (renewed) => (renewed ? renewalPeriod(lease.leaseTime) : undefined),
        (error: unknown) => {
          lease.backgroundError("renew", error);
          // Resending into a limit of the service only adds load: stop, and tell the holder.
          if (error instanceof ServiceLimitError) {
            lease.markLost(error);
            return undefined;
          }
          return retryDelay(lease.leaseTime);
        },
      ),
    renewalPeriod(lease.leaseTime),
  );
  return async () => stop();
}

async function startKeeper(
  lease: KeptLease,
  keepAlive: KeeperKeepAlive,
  defaultKeeper: LeaseKeeperBinding | undefined,
): Promise<StopKeepAlive> {
  const keeper = keepAlive.keeper ?? defaultKeeper;
  if (!keeper)
    throw new TypeError("`keepAlive.keeper` is required (no default `keeper` was configured)");
  const instance = keepAlive.instance ?? DEFAULT_KEEPER_INSTANCE;
  let stub: LeaseKeeperStub = keeper.getByName(instance);
  const registration: KeeperRegistration = {
    name: lease.name,
    owner: lease.owner,
    id: lease.id,
    leaseTime: lease.leaseTime,
    maxHoldTime: keepAlive.maxHoldTime,
  };
  if (lease.kind === "read-lock" || lease.kind === "write-lock" || lease.kind === "permit") {
    registration.kind = lease.kind;
  }
  if (lease.permitIds !== undefined) registration.permitIds = [...lease.permitIds];
  const reply = await stub.register(registration);
  if (!reply.ok)
    throw new TransportError(
      lease.name,
      `LeaseKeeper refused the lease: ${reply.error ?? "unknown"}`,
      true,
    );
  // Ask the keeper every period how the lease is doing (an RPC, no Redis request), so that the
  // signal aborts in this invocation when the keeper finds the lease lost or gives up.
  const stopPolling = reschedule(
    () =>
      stub.status(lease.id).then(
        (status) => {
          if (status.state !== "renewing") {
            // Lost, given up at maxHoldTime, refused by a limit of the service, or no longer
            // known: nobody keeps this lease alive.
            lease.markLost(
              status.state === "refused" && status.limit !== undefined
                ? new ServiceLimitError(lease.name, status.limit, status.error ?? "")
                : undefined,
            );
            return undefined;
          }
          if (typeof status.expiresAt === "number") lease.confirm(status.expiresAt);
          return renewalPeriod(lease.leaseTime);
        },
        () => {
          lease.backgroundError(
            "keeper",
            new TransportError(lease.name, "LeaseKeeper status call failed", true),
          );
          // A stub whose call threw is broken for good: take a fresh one, and ask again sooner
          // than a period, as after a failed renewal.
          stub = keeper.getByName(instance);
          return retryDelay(lease.leaseTime);
        },
      ),
    renewalPeriod(lease.leaseTime),
  );
  return async () => {
    stopPolling();
    // The release goes ahead even if the keeper cannot be told: its next renewal finds the
    // owner gone (the renewal script checks the owner field) and forgets the lease.
    const out = await stub
      .unregister(lease.id)
      .catch((): KeeperReply => ({ ok: false, error: "unregister call failed" }));
    if (!out.ok)
      lease.backgroundError(
        "keeper",
        new TransportError(
          lease.name,
          `LeaseKeeper unregister failed: ${out.error ?? "unknown"}`,
          true,
        ),
      );
  };
}

/** Validates a `keepAlive` option. */
export function checkKeepAlive(value: unknown): KeepAlive | undefined {
  if (value === undefined || value === "none" || value === "timer") return value;
  if (typeof value !== "object" || value === null) {
    throw new TypeError('`keepAlive` must be "none", "timer" or { keeper, maxHoldTime }');
  }
  const o = checkOptions(value as KeeperKeepAlive, "keepAlive", [
    "keeper",
    "maxHoldTime",
    "instance",
  ]);
  checkMs(o.maxHoldTime, "keepAlive.maxHoldTime", 1);
  if (o.keeper !== undefined && typeof (o.keeper as LeaseKeeperBinding).getByName !== "function") {
    throw new TypeError("`keepAlive.keeper` must be a LeaseKeeper Durable Object namespace");
  }
  if (o.instance !== undefined) checkName(o.instance, "keepAlive.instance");
  return value as KeeperKeepAlive;
}
