/**
 * One explored run: 2–4 edgelock clients, each behind its own proxy of the controlled network,
 * on one name of a real redis-server behind the real bridge; what each client believes it
 * holds, and the properties checked against Redis after every step (counts.ts for the
 * semaphores and the latch).
 */
import { randomBytes } from "node:crypto";
import { Redis } from "@upstash/redis";
import { type RedisServer, startRedisServer } from "../../demo/redis-server.js";
import { type Bridge, startBridge } from "../../src/bridge/index.js";
import type { EdgeLock, Lease, SemaphorePermits } from "../../src/index.js";
import * as edgelock from "../../src/index.js";
import { connectRaw, type RawRedis } from "../support/env.js";
import { clockOffset, realNow, stepClockBack, toReal } from "./clock.js";
import { checkCounts, noteLatchSettled } from "./counts.js";
import type { Held, KindSpec, Mode } from "./kinds.js";
import { ControlledNetwork, type PendingRequest } from "./network.js";

/** What the explorer loads edgelock from: the source, or a mutated copy of it (teeth.ts). */
export type EdgeLockModule = typeof edgelock;

/** Time limit of every client's Redis call: resends come a third of it apart at most. */
export const REQUEST_TIMEOUT_MS = 1_000;
/** How long the network must be still before the next step looks at it. */
const QUIET_MS = 25;
/** The most a step waits for the network to become still. */
const QUIET_LIMIT_MS = 1_500;
/**
 * Liveness bounds once what a live call waits for is there (the lock free, permits available,
 * the latch open) and it waits with budget: the first live waiter comes back at the holder's
 * expiry (250 ms), or, when the first registered waiter is dead, once its 2 s claim window
 * ended. The margin absorbs timing noise on 2 busy cores; a stall of seconds stays far above it.
 */
export const LIVENESS_MS = { live: 250 + 1_000, dead: 2_250 + 1_250 } as const;
/** How often the liveness watcher looks at the name while the network runs free. */
const WATCH_EVERY_MS = 20;
/**
 * How late a lease's `signal` may abort after its `expiresAt`: its expiry timer on a busy event
 * loop. A lease timed on a stepped wall clock aborts a whole step (1.5 s or more) late.
 */
export const SIGNAL_SLACK_MS = 500;

/** Shared for a whole exploration: one redis-server, one bridge, one raw connection. */
export interface Session {
  redis: RedisServer;
  bridge: Bridge;
  token: string;
  raw: RawRedis;
  close(): Promise<void>;
}

/** Starts a redis-server on a free loopback port and the bridge in front of it. */
export async function startSession(): Promise<Session> {
  const redis = await startRedisServer();
  const token = randomBytes(16).toString("hex");
  try {
    const bridge = await startBridge({ redisUrl: redis.url, token });
    const raw = await connectRaw(redis.url);
    return {
      redis,
      bridge,
      token,
      raw,
      close: async () => {
        await raw.close();
        await bridge.close();
        await redis.stop();
      },
    };
  } catch (error) {
    await redis.stop();
    throw error;
  }
}

/** A property the run broke. */
export class Violation extends Error {
  override name = "Violation";
}

export type CallOp =
  | "acquire"
  | "reenter"
  | "release"
  | "renew"
  | "set"
  | "add"
  | "stray-release"
  | "count-down"
  | "await";

/** One call a client made, and how it ended. */
export interface CallRecord {
  id: number;
  client: number;
  op: CallOp;
  owner: string | undefined;
  /** Permits it takes, gives or adds; a latch's count set; 1 otherwise. */
  amount: number;
  startedAt: number;
  waitTime: number;
  settled: boolean;
  /** When it settled (real ms). */
  settledAt: number;
  /** Calls settled before it started, and its place among the settled ones (0 until then). */
  startedSeq: number;
  settledSeq: number;
  /** `acquired L<n>`, `busy`, `released`/`still-held`/`expired`/`not-owner`, `renewed`, `lost`, `aborted`, `refused`, `error`, or a count. */
  outcome: string | undefined;
  /** The call threw and may have applied (or not). */
  failed: boolean;
  ambiguous: boolean;
  /** The client crashed before the call settled: it may have applied, nobody will know. */
  orphaned: boolean;
  /** What it answered: a count, a flag. */
  value: number | boolean | undefined;
  abort: AbortController | undefined;
  promise: Promise<void>;
}

/** A hold a client got (a lease, or a semaphore's permit handle), and until when it believed it held. */
export interface HoldRecord {
  id: number;
  client: number;
  owner: string;
  /** The HASH field it is kept in (lock family). */
  field: string;
  mode: Mode;
  permits: number;
  lease: Lease | undefined;
  handle: SemaphorePermits | undefined;
  acquiredAt: number;
  /** When the belief ended before its expiry: release called, signal aborted, crash. */
  endedAt: number | undefined;
  releasing: boolean;
  /** How its release ended: `released` (also `still-held`, `expired`, `not-owner`), `refused`, `failed`; undefined while it has not. */
  released: "released" | "refused" | "failed" | undefined;
  /** Its expiry (real ms) as last seen while the belief lasted; Infinity for a permit handle. */
  lastExpiresAt: number;
}

export interface ClientState {
  index: number;
  clientId: string;
  edgelock: EdgeLock;
  crashedAt: number | undefined;
  paused: boolean;
  background: Promise<unknown>[];
  /** Background work (resends, cancels) not finished yet. */
  pendingBackground: number;
  /** Owners whose hold count is uncertain (an aborted or failed call may have applied). */
  uncertain: Set<string>;
}

const now = realNow;
const errorName = (error: unknown) => (error instanceof Error ? error.name : "");

/** The real side of a model run. */
export class World {
  readonly kind: KindSpec;
  readonly name: string;
  readonly session: Session;
  readonly network: ControlledNetwork;
  readonly clients: ClientState[];
  readonly calls: CallRecord[] = [];
  readonly holds: HoldRecord[] = [];
  /** What happened, one line per step, for the report of a failing run. */
  readonly log: string[] = [];
  /** Family state of the semaphores and the latch (counts.ts). */
  readonly counts = {
    /** Permits set (semaphores), or the latch's count at its last certain setting. */
    base: 0,
    /** Calls after which the latch's count is no longer known exactly. */
    latchCertain: true,
    /** The `settledSeq` of the call that last set the latch's count for certain. */
    latchSetSeq: 0,
  };
  /** A property broken as a call settled, thrown by the next check. */
  deferredViolation: string | undefined;
  steps = 0;
  #nextId = 0;
  #settledSeq = 0;
  readonly #started = now();

  /** When the run began (real ms). */
  get startedAt(): number {
    return this.#started;
  }

  private constructor(
    kind: KindSpec,
    session: Session,
    network: ControlledNetwork,
    n: number,
    lib: EdgeLockModule,
  ) {
    this.kind = kind;
    this.session = session;
    this.network = network;
    this.name = `x:${randomBytes(4).toString("hex")}`;
    this.clients = Array.from({ length: n }, (_, index) => {
      const clientId = `c${index}-${randomBytes(6).toString("hex")}`;
      const redis = new Redis({
        url: network.urlOf(index),
        token: session.token,
        // The client's own retries are copies of a request, as in production.
        retry: { retries: 2, backoff: () => 10 },
      });
      const state: ClientState = {
        index,
        clientId,
        edgelock: undefined as unknown as EdgeLock,
        crashedAt: undefined,
        paused: false,
        background: [],
        pendingBackground: 0,
        uncertain: new Set<string>(),
      };
      state.edgelock = new lib.EdgeLock({
        redis,
        clientId,
        requestTimeout: REQUEST_TIMEOUT_MS,
        waitUntil: (p) => {
          state.pendingBackground++;
          state.background.push(
            p.then(
              () => undefined,
              () => undefined,
            ),
          );
          void p.then(
            () => state.pendingBackground--,
            () => state.pendingBackground--,
          );
        },
      });
      return state;
    });
  }

  /**
   * A world of `clients` clients of `kind` on a fresh name, edgelock loaded from `lib`. A
   * semaphore's permits and a latch's count are set first, through a free network.
   */
  static async start(
    kind: KindSpec,
    session: Session,
    clients: number,
    lib: EdgeLockModule = edgelock,
  ): Promise<World> {
    const network = await ControlledNetwork.start(session.bridge.url, clients);
    const world = new World(kind, session, network, clients, lib);
    if (kind.initial > 0) {
      network.setFree(true);
      try {
        const first = world.#client(0).edgelock;
        const set =
          kind.family === "latch"
            ? await first.getCountDownLatch(world.name).trySetCount(kind.initial)
            : kind.family === "permits"
              ? await first.getPermitExpirableSemaphore(world.name).trySetPermits(kind.initial)
              : await first.getSemaphore(world.name).trySetPermits(kind.initial);
        if (!set) throw new Error(`${kind.name} ${world.name} was set already`);
      } catch (error) {
        await network.close();
        throw error;
      }
      network.setFree(false);
      await network.quiet(QUIET_MS, QUIET_LIMIT_MS);
      world.counts.base = kind.initial;
      world.note(`set to ${kind.initial}`);
    }
    return world;
  }

  /** Milliseconds since the run began, for the log. */
  at(): string {
    return `+${String(now() - this.#started).padStart(5)}ms`;
  }

  note(line: string): void {
    this.log.push(`${this.at()} ${line}`);
  }

  isLive(client: number): boolean {
    return this.clients[client]?.crashedAt === undefined;
  }

  /** When a hold's lease runs out, in real ms (Infinity for a permit handle). */
  expiresAt(h: HoldRecord): number {
    return h.lease === undefined ? Number.POSITIVE_INFINITY : toReal(h.lease.expiresAt);
  }

  /** Whether the hold's lease ended (released or found lost; never for a permit handle). */
  ended(h: HoldRecord): boolean {
    return h.lease?.ended ?? false;
  }

  /** Holds `client` believes valid now. */
  heldBy(client: number): HoldRecord[] {
    const t = now();
    return this.holds.filter(
      (h) =>
        h.client === client &&
        h.endedAt === undefined &&
        !this.ended(h) &&
        this.expiresAt(h) > t &&
        this.isLive(client),
    );
  }

  /** Holds of `client` not released yet (valid or not). */
  unreleasedOf(client: number): HoldRecord[] {
    return this.holds.filter((h) => h.client === client && !h.releasing);
  }

  /** Calls not settled yet. */
  unsettled(client?: number): CallRecord[] {
    return this.calls.filter((c) => !c.settled && (client === undefined || c.client === client));
  }

  // ---- client operations -------------------------------------------------------------

  /**
   * Starts an acquire (a new owner, or `reenter`'s owner, on `mode`'s side), waiting up to
   * `waitTime`.
   */
  acquire(
    client: number,
    waitTime: number,
    leaseTime: number,
    permits: number,
    mode: Mode,
    reenter?: HoldRecord,
  ): void {
    const state = this.#client(client);
    const abort = new AbortController();
    const owner = reenter?.owner;
    const call = this.#call(client, reenter ? "reenter" : "acquire", owner, permits, waitTime);
    call.abort = abort;
    call.promise = this.kind
      .acquire(state.edgelock, this.name, {
        waitTime,
        leaseTime,
        permits,
        mode,
        owner,
        signal: abort.signal,
      })
      .then(
        (held) => {
          if (held === null) return this.#settle(call, "busy");
          const record = this.#recordHold(client, held, mode, permits);
          this.#settle(call, `acquired L${record.id}`);
        },
        (error: unknown) => {
          if (errorName(error) === "LockUpgradeError") return this.#settle(call, "refused", error);
          if (owner !== undefined) state.uncertain.add(owner);
          call.failed = true;
          this.#settle(call, abort.signal.aborted ? "aborted" : "error", error);
        },
      );
    const what = reenter
      ? `re-enters L${reenter.id}${mode === reenter.mode ? "" : ` as ${mode}`}`
      : this.kind.modes.length > 1
        ? `acquires ${mode}`
        : "acquires";
    const size = this.kind.family === "lock" ? "" : ` permits ${permits}`;
    this.note(`c${client} C${call.id} ${what} wait ${waitTime} lease ${leaseTime}${size}`);
  }

  /** Starts the release of `hold`: its holder stops believing it holds now. */
  release(record: HoldRecord): void {
    record.releasing = true;
    record.endedAt ??= now();
    const call = this.#call(record.client, "release", record.owner, record.permits, 0);
    const released: Promise<string | number> = record.lease
      ? record.lease.release()
      : (record.handle as SemaphorePermits).release();
    call.promise = released.then(
      (result) => {
        record.released = "released";
        this.#settle(call, String(result));
      },
      (error: unknown) => {
        if (errorName(error) === "OverReleaseError") {
          record.released = "refused";
          return this.#settle(call, "refused", error);
        }
        record.released = "failed";
        call.failed = true;
        this.#client(record.client).uncertain.add(record.owner);
        this.#settle(call, "error", error);
      },
    );
    this.note(`c${record.client} C${call.id} releases L${record.id}`);
  }

  /** Starts a renewal of `hold`'s lease. */
  renew(record: HoldRecord): void {
    const lease = record.lease;
    if (lease === undefined) return;
    const call = this.#call(record.client, "renew", record.owner, record.permits, 0);
    call.promise = lease.renew().then(
      () => this.#settle(call, "renewed"),
      (error: unknown) =>
        this.#settle(call, errorName(error) === "LeaseLostError" ? "lost" : "error", error),
    );
    this.note(`c${record.client} C${call.id} renews L${record.id}`);
  }

  /** Aborts the oldest waiting acquire (or await) of `client`, if any. */
  abort(client: number): void {
    const call = this.unsettled(client).find((c) => c.abort !== undefined);
    if (!call) return;
    call.abort?.abort(new Error("explorer abort"));
    this.note(`c${client} aborts C${call.id}`);
  }

  /** A semaphore's `addPermits(amount)`, a latch's `trySetCount(amount)`, or `trySetPermits`. */
  setOrAdd(client: number, op: "set" | "add", amount: number): void {
    const e = this.#client(client).edgelock;
    const call = this.#call(client, op, undefined, amount, 0);
    const family = this.kind.family;
    const sent: Promise<number | boolean> =
      family === "latch"
        ? e.getCountDownLatch(this.name).trySetCount(amount)
        : family === "permits"
          ? op === "set"
            ? e.getPermitExpirableSemaphore(this.name).trySetPermits(amount)
            : e.getPermitExpirableSemaphore(this.name).addPermits(amount)
          : op === "set"
            ? e.getSemaphore(this.name).trySetPermits(amount)
            : e.getSemaphore(this.name).addPermits(amount);
    call.promise = this.#settleValue(call, sent);
    const what = family === "latch" ? "trySetCount" : op === "set" ? "trySetPermits" : "addPermits";
    this.note(`c${client} C${call.id} ${what}(${amount})`);
  }

  /**
   * A name-level `semaphore.release(amount)` that no permit handle backs: a buggy double
   * release. Refused unless edgelock callers hold that many or they fit under the permits set.
   */
  strayRelease(client: number, amount: number): void {
    const call = this.#call(client, "stray-release", undefined, amount, 0);
    const sent = this.#client(client).edgelock.getSemaphore(this.name).release(amount);
    call.promise = this.#settleValue(call, sent);
    this.note(`c${client} C${call.id} releases ${amount} permit(s) it does not hold`);
  }

  /** A latch's `countDown()`. */
  countDown(client: number): void {
    const call = this.#call(client, "count-down", undefined, 1, 0);
    const sent = this.#client(client).edgelock.getCountDownLatch(this.name).countDown();
    call.promise = this.#settleValue(call, sent);
    this.note(`c${client} C${call.id} counts down`);
  }

  /** A latch's `await({ waitTime })`. */
  await(client: number, waitTime: number): void {
    const abort = new AbortController();
    const call = this.#call(client, "await", undefined, 1, waitTime);
    call.abort = abort;
    const sent = this.#client(client)
      .edgelock.getCountDownLatch(this.name)
      .await({ waitTime, signal: abort.signal });
    call.promise = this.#settleValue(call, sent);
    this.note(`c${client} C${call.id} awaits wait ${waitTime}`);
  }

  #settleValue(call: CallRecord, sent: Promise<number | boolean>): Promise<void> {
    return sent.then(
      (value) => {
        call.value = value;
        this.#settle(call, String(value));
      },
      (error: unknown) => {
        if (errorName(error) === "OverReleaseError") return this.#settle(call, "refused", error);
        call.failed = true;
        this.#settle(call, call.abort?.signal.aborted ? "aborted" : "error", error);
      },
    );
  }

  /** The client crashes: it never sends again, and believes nothing any more. */
  crash(client: number): void {
    const state = this.#client(client);
    state.crashedAt = now();
    for (const h of this.holds) if (h.client === client) h.endedAt ??= state.crashedAt;
    for (const c of this.unsettled(client)) c.orphaned = true;
    this.network.crash(client);
    this.note(`c${client} crashes`);
  }

  setPaused(client: number, paused: boolean): void {
    this.#client(client).paused = paused;
    this.network.setPaused(client, paused);
    this.note(`c${client} ${paused ? "pauses" : "resumes"}`);
  }

  /** The clients' wall clock steps back by `ms` (their timers keep running). */
  clockStepsBack(ms: number): void {
    stepClockBack(ms);
    this.note(`clock steps back ${ms} ms (${clockOffset()} ms behind)`);
  }

  /**
   * A network decision on a pending request: the `k`-th (oldest first) of the `g`-th group of
   * requests that ask for the same thing, both modulo their numbers.
   */
  async decide(
    how: "deliver" | "duplicate" | "lose-answer" | "lose-request",
    k: number,
    g = 0,
  ): Promise<void> {
    const groups = new Map<string, PendingRequest[]>();
    for (const request of this.network.pending) {
      const group = groups.get(request.label);
      if (group) group.push(request);
      else groups.set(request.label, [request]);
    }
    const all = [...groups.values()];
    const group = all[g % Math.max(1, all.length)] ?? [];
    const request = group[k % Math.max(1, group.length)];
    if (request === undefined) return;
    this.note(`net ${how} #${request.seq} ${describeRequest(request)}`);
    const taken =
      how === "deliver"
        ? this.network.deliver(request)
        : how === "duplicate"
          ? this.network.duplicate(request)
          : how === "lose-answer"
            ? this.network.loseAnswer(request)
            : this.network.loseRequest(request);
    await taken;
  }

  endStreams(client: number): void {
    const ended = this.network.endStreams(client);
    this.note(`net ends ${ended} stream(s) of c${client}`);
  }

  /**
   * Waits until the hold in Redis that runs out first has run out (a lock's key, as read from
   * `PEXPIRETIME`; a permit's lease), at most `limitMs`. Nothing runs out of a plain semaphore
   * or a latch.
   */
  async leaseRunsOut(limitMs: number): Promise<void> {
    let expiresAt = 0;
    const raw = this.session.raw;
    if (this.kind.family === "lock") {
      expiresAt = (await this.kind.holds(raw, this.name)).expiresAt;
    } else if (this.kind.family === "permits") {
      const next = (await raw.zRangeByScoreWithScores(`{${this.name}}:timeout`, now(), "+inf", {
        LIMIT: { offset: 0, count: 1 },
      })) as { score: number }[];
      expiresAt = next[0]?.score ?? 0;
    }
    const wait = expiresAt > 0 ? Math.min(limitMs, expiresAt - now() + 5) : 0;
    this.note(`lease runs out (waits ${Math.max(0, wait)} ms)`);
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  /** Lets the clients react to what just happened, before the next step looks. */
  async settleStep(): Promise<void> {
    const begun = this.#begun.splice(0);
    for (const { client, count, call } of begun) {
      await this.network.arrival(client, count, call.promise, QUIET_LIMIT_MS);
    }
    await this.network.quiet(QUIET_MS, QUIET_LIMIT_MS);
    this.steps++;
  }

  /**
   * Whether nothing can change the name any more until a client calls: every live client's
   * calls and background work ended, and no request (or copy) is held or in flight.
   */
  quiescent(): boolean {
    return (
      this.network.held.length === 0 &&
      this.network.inFlight === 0 &&
      this.clients.every(
        (c) =>
          c.crashedAt !== undefined ||
          (c.pendingBackground === 0 && this.unsettled(c.index).length === 0),
      )
    );
  }

  // ---- properties -----------------------------------------------------------------------

  /** Every property that can be checked after a step (see the families' own below). */
  async checkSafety(): Promise<void> {
    if (this.deferredViolation !== undefined) throw new Violation(this.deferredViolation);
    await this.#checkSignals();
    if (this.kind.family === "lock") await this.#checkLocks();
    else await checkCounts(this);
  }

  /**
   * A lease's `signal` aborts once its `expiresAt` passed (without a renewal confirming a later
   * one): a caller guarding its work with the signal stops in time, whatever its wall clock
   * did.
   */
  async #checkSignals(): Promise<void> {
    const overdue = () =>
      this.holds.filter((h) => {
        const lease = h.lease;
        if (lease === undefined || lease.ended || h.releasing || !this.isLive(h.client)) {
          return false;
        }
        return now() - toReal(lease.expiresAt) > SIGNAL_SLACK_MS;
      });
    if (overdue().length === 0) return;
    // An event loop that was busy runs the expiry timers that came due in its next turn: the
    // check looks again after them.
    await new Promise((resolve) => setTimeout(resolve, 1));
    const [late] = overdue();
    if (late?.lease) {
      throw new Violation(
        `L${late.id} of c${late.client}: its signal has not aborted ${now() - toReal(late.lease.expiresAt)} ms after its expiresAt`,
      );
    }
  }

  /**
   * Safety of the lock family, after every step: no two owners with overlapping validity
   * windows (readers excepted among themselves); every lease believed valid is held in Redis by
   * its owner at least until its `expiresAt`; exact hold counts for owners whose calls all ended
   * definitely; fencing tokens growing.
   */
  async #checkLocks(): Promise<void> {
    this.#checkWindows();
    this.#checkTokens();
    const t = now();
    const believed = this.holds.filter(
      (h) =>
        h.endedAt === undefined &&
        !this.ended(h) &&
        this.isLive(h.client) &&
        this.expiresAt(h) > t + 30,
    );
    if (believed.length === 0) return;
    const redis = await this.kind.holds(this.session.raw, this.name);
    for (const h of believed) {
      // The belief may have ended while Redis was read.
      if (h.endedAt !== undefined || this.ended(h) || this.expiresAt(h) <= now()) continue;
      const count = redis.holds.get(h.field) ?? 0;
      if (count < 1) {
        throw new Violation(
          `L${h.id} of c${h.client} believes it holds until ${this.expiresAt(h) - t} ms from now, but Redis has no hold of its owner (holders: ${[...redis.holds.keys()].join(", ") || "none"})`,
        );
      }
      const expiresAt = this.expiresAt(h);
      if (redis.expiresAt !== -1 && redis.expiresAt < expiresAt - 1) {
        throw new Violation(
          `L${h.id} of c${h.client} believes it holds until ${expiresAt}, but Redis expires the hold at ${redis.expiresAt} (${expiresAt - redis.expiresAt} ms earlier)`,
        );
      }
    }
    for (const field of new Set(believed.map((h) => h.field))) {
      const one = believed.find((h) => h.field === field) as HoldRecord;
      const state = this.#client(one.client);
      if (state.uncertain.has(one.owner)) continue;
      if (this.calls.some((c) => c.owner === one.owner && !c.settled)) continue;
      const open = this.holds.filter((h) => h.field === field && !h.releasing);
      // A lease of the owner that ran out locally leaves its count to the hold's TTL, which
      // a later re-entry may have renewed or restarted: the count is then not known here.
      if (open.some((h) => this.ended(h) || this.expiresAt(h) <= t)) continue;
      const expected = open.length;
      const count = redis.holds.get(field) ?? 0;
      if (count !== expected) {
        throw new Violation(
          `owner of c${one.client} holds ${count} time(s)${one.mode === "read" && this.kind.modes.length > 1 ? " (read)" : ""} in Redis, but its calls say ${expected} (a copy applied twice, or a release lost)`,
        );
      }
    }
  }

  /** Holds with their validity windows (real ms), those that lasted at all. */
  windows(): { h: HoldRecord; start: number; end: number }[] {
    return this.holds
      .map((h) => ({ h, start: h.acquiredAt, end: this.#windowEnd(h) }))
      .filter((w) => w.end > w.start);
  }

  #checkWindows(): void {
    const windows = this.windows();
    for (let i = 0; i < windows.length; i++) {
      for (let j = i + 1; j < windows.length; j++) {
        const a = windows[i];
        const b = windows[j];
        if (a === undefined || b === undefined || a.h.owner === b.h.owner) continue;
        if (a.h.mode === "read" && b.h.mode === "read") continue;
        if (a.start < b.end && b.start < a.end) {
          throw new Violation(
            `L${a.h.id} (c${a.h.client}${this.#side(a.h)}) and L${b.h.id} (c${b.h.client}${this.#side(b.h)}) both believed they held: overlap ${Math.min(a.end, b.end) - Math.max(a.start, b.start)} ms`,
          );
        }
      }
    }
  }

  #side(h: HoldRecord): string {
    return this.kind.modes.length > 1 ? `, ${h.mode}` : "";
  }

  #checkTokens(): void {
    if (!this.kind.fenced) return;
    const windows = this.windows();
    for (const a of windows) {
      for (const b of windows) {
        if (a.h.owner === b.h.owner || !(a.end <= b.start)) continue;
        const ta = a.h.lease?.fencingToken ?? 0;
        const tb = b.h.lease?.fencingToken ?? 0;
        if (!(tb > ta)) {
          throw new Violation(
            `L${b.h.id} (c${b.h.client}) held after L${a.h.id} (c${a.h.client}) with fencing token ${tb} <= ${ta}`,
          );
        }
      }
    }
  }

  /** Until when `h`'s holder believed (or believes) it holds, real ms. */
  #windowEnd(h: HoldRecord): number {
    if (h.endedAt === undefined && !this.ended(h)) h.lastExpiresAt = this.expiresAt(h);
    return Math.min(h.endedAt ?? Number.POSITIVE_INFINITY, h.lastExpiresAt);
  }

  /**
   * The network runs free until every live client's calls ended, while a watcher checks
   * liveness: what a live call waits for is never there (the lock free, the permits it asks
   * for available, the latch open) longer than {@link LIVENESS_MS} while it waits with budget
   * left. Holds won meanwhile are held until they run out (`release` false) or released at
   * once. Then background work ends and the properties are checked once more.
   */
  async heal(release: boolean): Promise<void> {
    this.note(`heal (${release ? "release" : "hold"} what is won)`);
    for (const c of this.clients) if (c.paused) this.setPaused(c.index, false);
    this.network.setFree(true);
    const onHold = (record: HoldRecord) => {
      if (release && this.isLive(record.client)) this.release(record);
    };
    this.#onHold = onHold;
    try {
      await this.#watchLiveness();
    } finally {
      this.#onHold = undefined;
    }
    await this.#background(5_000);
    await this.network.quiet(QUIET_MS, QUIET_LIMIT_MS);
    await this.checkSafety();
    this.network.setFree(false);
    this.steps++;
  }

  #onHold: ((record: HoldRecord) => void) | undefined;

  /** What a stall is reported as: the lock free, permits available, the latch open. */
  #freeAs(amount: number): string {
    switch (this.kind.family) {
      case "lock":
        return "the lock stayed free";
      case "latch":
        return "the latch stayed open";
      default:
        return `${amount} permit(s) stayed available`;
    }
  }

  async #watchLiveness(): Promise<void> {
    const live = () => this.calls.filter((c) => !c.settled && this.isLive(c.client));
    const waits = (c: CallRecord) => c.op === "acquire" || c.op === "reenter" || c.op === "await";
    const deadline =
      Math.max(now(), ...live().map((c) => c.startedAt + c.waitTime)) +
      REQUEST_TIMEOUT_MS * 4 +
      2_000 +
      clockOffset();
    const deadWaiter = this.calls.some(
      (c) =>
        c.waitTime > 0 &&
        !this.isLive(c.client) &&
        (c.settled === false || (this.#client(c.client).crashedAt ?? 0) < c.startedAt + c.waitTime),
    );
    const bound = deadWaiter ? LIVENESS_MS.dead : LIVENESS_MS.live;
    // Since when at least `n` is free (a lock or latch: 1), per amount a live call waits for.
    const freeSince = new Map<number, number>();
    /** A stall seen: reported once what was free is taken again, with the whole gap. */
    let stall:
      | { since: number; amount: number; starving: string; first: string | undefined }
      | undefined;
    const report = (gap: number, taken: boolean) => {
      if (!stall) return;
      this.note(`liveness violated: free ${gap} ms`);
      throw new Violation(
        `liveness: ${this.#freeAs(stall.amount)} for ${gap} ms${taken ? "" : " (not taken yet)"}, from +${stall.since - this.#started} ms (bound ${bound} ms), while ${stall.starving} waited with budget; first registered waiter then: ${stall.first ?? "none"}`,
      );
    };
    while (live().length > 0) {
      const t = now();
      if (t > deadline) {
        report(t - (stall?.since ?? t), false);
        throw new Violation(
          `calls still unsettled ${t - deadline} ms past their budgets: ${live()
            .map((c) => `C${c.id} (c${c.client} ${c.op})`)
            .join(", ")}`,
        );
      }
      const free = await this.kind.free(this.session.raw, this.name, t);
      if (stall && free < stall.amount) report(t - stall.since, true);
      for (const amount of new Set(live().map((c) => c.amount))) {
        if (free >= amount) freeSince.set(amount, freeSince.get(amount) ?? t);
        else freeSince.delete(amount);
      }
      for (const [amount, since] of freeSince) {
        if (stall || t - since <= bound) continue;
        const starving = live().filter(
          (c) => waits(c) && c.amount === amount && c.startedAt + c.waitTime - since > bound + 200,
        );
        if (starving.length > 0) {
          stall = {
            since,
            amount,
            starving: starving
              .map((c) => `C${c.id} (c${c.client}, ${c.startedAt + c.waitTime - since} ms left)`)
              .join(", "),
            first: await this.kind.firstWaiter(this.session.raw, this.name),
          };
        }
      }
      await Promise.race([
        new Promise((resolve) => setTimeout(resolve, WATCH_EVERY_MS)),
        ...live().map((c) => c.promise),
      ]);
    }
    if (stall) report(now() - stall.since, false);
  }

  async #background(limitMs: number): Promise<void> {
    const all = this.clients.filter((c) => c.crashedAt === undefined).flatMap((c) => c.background);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(all),
      new Promise((resolve) => {
        timer = setTimeout(resolve, limitMs);
      }),
    ]);
    clearTimeout(timer);
  }

  /**
   * After the final heal: no key of the name lives without a TTL except those the kind
   * documents.
   */
  async checkKeys(): Promise<void> {
    const keys = (await this.session.raw.keys(`*${this.name}*`)).map(String);
    const allowed = new Set(this.kind.persistent(this.name));
    for (const key of keys) {
      if (allowed.has(key)) continue;
      const ttl = Number(await this.session.raw.pTTL(key));
      if (ttl === -1) throw new Violation(`key ${key} left without a TTL`);
    }
  }

  /** Ends the run: every client's calls settle (crashed ones' too, bounded), proxies close. */
  async close(): Promise<void> {
    for (const c of this.calls) c.abort?.abort(new Error("run over"));
    for (const h of this.holds) {
      if (!h.releasing && this.isLive(h.client) && !this.ended(h)) this.release(h);
    }
    this.network.setFree(true);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(this.calls.map((c) => c.promise)),
      new Promise((resolve) => {
        timer = setTimeout(resolve, REQUEST_TIMEOUT_MS * 12);
      }),
    ]);
    clearTimeout(timer);
    await this.network.close();
  }

  // ---- bookkeeping ------------------------------------------------------------------------

  #client(client: number): ClientState {
    const state = this.clients[client];
    if (state === undefined) throw new RangeError(`no client ${client}`);
    return state;
  }

  /** The calls started in the current step, whose first request the step waits for. */
  #begun: { client: number; count: number; call: CallRecord }[] = [];

  #call(
    client: number,
    op: CallOp,
    owner: string | undefined,
    amount: number,
    waitTime: number,
  ): CallRecord {
    const call: CallRecord = {
      id: this.#nextId++,
      client,
      op,
      owner,
      amount,
      startedAt: now(),
      waitTime,
      settled: false,
      settledAt: 0,
      startedSeq: this.#settledSeq,
      settledSeq: 0,
      outcome: undefined,
      failed: false,
      ambiguous: false,
      orphaned: false,
      value: undefined,
      abort: undefined,
      promise: Promise.resolve(),
    };
    this.calls.push(call);
    this.#begun.push({ client, count: this.network.receivedFrom[client] ?? 0, call });
    return call;
  }

  #settle(call: CallRecord, outcome: string, error?: unknown): void {
    call.settled = true;
    call.settledAt = now();
    call.settledSeq = ++this.#settledSeq;
    call.outcome = outcome;
    call.ambiguous =
      errorName(error) === "TransportError" &&
      Boolean((error as { ambiguous?: boolean }).ambiguous);
    const why =
      error === undefined
        ? ""
        : `: ${error instanceof Error ? `${error.name} ${error.message}` : String(error)}`;
    this.note(`c${call.client} C${call.id} ${call.op} -> ${outcome}${why.slice(0, 160)}`);
    // Arguments the explorer got wrong, or a client that throws where it must not.
    if (error instanceof TypeError || error instanceof RangeError) {
      this.deferredViolation ??= `C${call.id} (c${call.client} ${call.op}) threw ${error.name}: ${error.message}`;
    }
    if (this.kind.family === "latch") noteLatchSettled(this, call);
  }

  #recordHold(client: number, held: Held, mode: Mode, permits: number): HoldRecord {
    const lease = "signal" in held ? held : undefined;
    const handle = lease === undefined ? (held as SemaphorePermits) : undefined;
    const owner = lease?.owner ?? `handle-${this.#nextId}`;
    const record: HoldRecord = {
      id: this.#nextId++,
      client,
      owner,
      field: this.kind.field(owner, mode),
      mode,
      permits: lease?.permitIds?.length ?? handle?.permits ?? permits,
      lease,
      handle,
      acquiredAt: now(),
      endedAt: undefined,
      releasing: false,
      released: undefined,
      lastExpiresAt: lease === undefined ? Number.POSITIVE_INFINITY : toReal(lease.expiresAt),
    };
    // A crashed client believes nothing: what it wins after its crash never counts.
    if (!this.isLive(client)) record.endedAt = record.acquiredAt;
    lease?.signal.addEventListener("abort", () => {
      record.endedAt ??= now();
    });
    this.holds.push(record);
    this.#onHold?.(record);
    return record;
  }
}

function describeRequest(request: PendingRequest): string {
  return `(c${request.client} ${request.label}${request.response ? "" : ", copy"})`;
}
