/**
 * One explored run: 2–4 edgelock clients, each behind its own proxy of the controlled network,
 * on one lock name of a real redis-server behind the real bridge; what each client believes
 * it holds, and the properties checked against Redis after every step.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "@upstash/redis";
import { type RedisServer, startRedisServer } from "../../demo/redis-server.js";
import { type Bridge, startBridge } from "../../src/bridge/index.js";
import { EdgeLock, type Lease, LeaseLostError, TransportError } from "../../src/index.js";
import { connectRaw, type RawRedis } from "../support/env.js";
import type { KindSpec } from "./kinds.js";
import { ControlledNetwork, type PendingRequest } from "./network.js";

/** Time limit of every client's Redis call: resends come a third of it apart at most. */
export const REQUEST_TIMEOUT_MS = 1_000;
/** How long the network must be still before the next step looks at it. */
const QUIET_MS = 25;
/** The most a step waits for the network to become still. */
const QUIET_LIMIT_MS = 1_500;
/**
 * Liveness bounds once the lock is free and a live call waits with budget: the first live
 * waiter comes back at the holder's expiry (250 ms), or, when the first registered waiter is
 * dead, once its 2 s claim window ended. The margin absorbs timing noise on 2 busy cores; a
 * stall of seconds stays far above it.
 */
export const LIVENESS_MS = { live: 250 + 1_000, dead: 2_250 + 1_250 } as const;
/** How often the liveness watcher looks at the lock while the network runs free. */
const WATCH_EVERY_MS = 20;

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

type CallOp = "acquire" | "reenter" | "release" | "renew";

/** One call a client made, and how it ended. */
interface CallRecord {
  id: number;
  client: number;
  op: CallOp;
  owner: string | undefined;
  startedAt: number;
  waitTime: number;
  settled: boolean;
  /** `acquired`, `busy`, `released`/`still-held`/`expired`/`not-owner`, `renewed`, `lost`, `aborted`, `error`. */
  outcome: string | undefined;
  ambiguous: boolean;
  abort: AbortController | undefined;
  promise: Promise<void>;
}

/** A lease a client got, and until when it believed it held. */
interface LeaseRecord {
  id: number;
  client: number;
  lease: Lease;
  acquiredAt: number;
  /** When the belief ended before `expiresAt`: release called, signal aborted, crash. */
  endedAt: number | undefined;
  releasing: boolean;
  /** `expiresAt` as last seen while the belief lasted. */
  lastExpiresAt: number;
}

interface ClientState {
  index: number;
  clientId: string;
  edgelock: EdgeLock;
  crashedAt: number | undefined;
  paused: boolean;
  background: Promise<unknown>[];
  /** Owners whose hold count is uncertain (an aborted or failed call may have applied). */
  uncertain: Set<string>;
}

const now = () => Date.now();

/** The real side of a model run. */
export class World {
  readonly kind: KindSpec;
  readonly name: string;
  readonly session: Session;
  readonly network: ControlledNetwork;
  readonly clients: ClientState[];
  readonly calls: CallRecord[] = [];
  readonly leases: LeaseRecord[] = [];
  /** What happened, one line per step, for the report of a failing run. */
  readonly log: string[] = [];
  steps = 0;
  #nextId = 0;
  readonly #started = now();

  private constructor(kind: KindSpec, session: Session, network: ControlledNetwork, n: number) {
    this.kind = kind;
    this.session = session;
    this.network = network;
    this.name = `x:${randomBytes(4).toString("hex")}`;
    this.clients = Array.from({ length: n }, (_, index) => {
      const clientId = `c${index}-${randomBytes(6).toString("hex")}`;
      const background: Promise<unknown>[] = [];
      const redis = new Redis({
        url: network.urlOf(index),
        token: session.token,
        // The client's own retries are copies of a request, as in production.
        retry: { retries: 2, backoff: () => 10 },
      });
      const edgelock = new EdgeLock({
        redis,
        clientId,
        requestTimeout: REQUEST_TIMEOUT_MS,
        waitUntil: (p) => {
          background.push(p.catch(() => undefined));
        },
      });
      return {
        index,
        clientId,
        edgelock,
        crashedAt: undefined,
        paused: false,
        background,
        uncertain: new Set<string>(),
      };
    });
  }

  /** A world of `clients` clients of `kind` on a fresh name. */
  static async start(kind: KindSpec, session: Session, clients: number): Promise<World> {
    const network = await ControlledNetwork.start(session.bridge.url, clients);
    return new World(kind, session, network, clients);
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

  /** Leases `client` believes valid now. */
  heldBy(client: number): LeaseRecord[] {
    const t = now();
    return this.leases.filter(
      (l) =>
        l.client === client &&
        l.endedAt === undefined &&
        !l.lease.ended &&
        l.lease.expiresAt > t &&
        this.isLive(client),
    );
  }

  /** Leases of `client` not released yet (valid or not). */
  unreleasedOf(client: number): LeaseRecord[] {
    return this.leases.filter((l) => l.client === client && !l.releasing);
  }

  /** Calls not settled yet. */
  unsettled(client?: number): CallRecord[] {
    return this.calls.filter((c) => !c.settled && (client === undefined || c.client === client));
  }

  // ---- client operations -------------------------------------------------------------

  /** Starts an acquire (a new owner, or `reenter`'s owner), waiting up to `waitTime`. */
  acquire(client: number, waitTime: number, leaseTime: number, reenter?: LeaseRecord): void {
    const state = this.#client(client);
    const abort = new AbortController();
    const owner = reenter?.lease.owner;
    const call = this.#call(client, reenter ? "reenter" : "acquire", owner, waitTime, abort);
    call.promise = this.kind
      .acquire(state.edgelock, this.name, { waitTime, leaseTime, owner, signal: abort.signal })
      .then(
        (lease) => {
          if (lease === null) return this.#settle(call, "busy");
          const record = this.#recordLease(client, lease);
          this.#settle(call, `acquired L${record.id}`);
        },
        (error: unknown) => {
          if (owner !== undefined) state.uncertain.add(owner);
          this.#settle(call, abort.signal.aborted ? "aborted" : "error", error);
        },
      );
    this.note(
      `c${client} C${call.id} ${reenter ? `re-enters L${reenter.id}` : "acquires"} wait ${waitTime} lease ${leaseTime}`,
    );
  }

  /** Starts the release of `lease`: its holder stops believing it holds now. */
  release(record: LeaseRecord): void {
    record.releasing = true;
    record.endedAt ??= now();
    const call = this.#call(record.client, "release", record.lease.owner, 0, undefined);
    call.promise = record.lease.release().then(
      (result) => this.#settle(call, result),
      (error: unknown) => {
        this.#client(record.client).uncertain.add(record.lease.owner);
        this.#settle(call, "error", error);
      },
    );
    this.note(`c${record.client} C${call.id} releases L${record.id}`);
  }

  /** Starts a renewal of `lease`. */
  renew(record: LeaseRecord): void {
    const call = this.#call(record.client, "renew", record.lease.owner, 0, undefined);
    call.promise = record.lease.renew().then(
      () => this.#settle(call, "renewed"),
      (error: unknown) =>
        this.#settle(call, error instanceof LeaseLostError ? "lost" : "error", error),
    );
    this.note(`c${record.client} C${call.id} renews L${record.id}`);
  }

  /** Aborts the oldest waiting acquire of `client`, if any. */
  abort(client: number): void {
    const call = this.unsettled(client).find((c) => c.abort !== undefined);
    if (!call) return;
    call.abort?.abort(new Error("explorer abort"));
    this.note(`c${client} aborts C${call.id}`);
  }

  /** The client crashes: it never sends again, and believes nothing any more. */
  crash(client: number): void {
    const state = this.#client(client);
    state.crashedAt = now();
    for (const l of this.leases) if (l.client === client) l.endedAt ??= state.crashedAt;
    this.network.crash(client);
    this.note(`c${client} crashes`);
  }

  setPaused(client: number, paused: boolean): void {
    this.#client(client).paused = paused;
    this.network.setPaused(client, paused);
    this.note(`c${client} ${paused ? "pauses" : "resumes"}`);
  }

  /** A network decision on the `k`-th pending request (modulo their number). */
  async decide(
    how: "deliver" | "duplicate" | "lose-answer" | "lose-request",
    k: number,
  ): Promise<void> {
    const pending = this.network.pending;
    const request = pending[k % Math.max(1, pending.length)];
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
   * Waits until the lock's key in Redis has expired (its holder's lease ran out), as read
   * from `PEXPIRETIME`, at most `limitMs`.
   */
  async leaseRunsOut(limitMs: number): Promise<void> {
    const { expiresAt } = await this.kind.holds(this.session.raw, this.name);
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

  // ---- properties -----------------------------------------------------------------------

  /**
   * Safety, after every step: no two owners with overlapping validity windows; every lease
   * believed valid is held in Redis by its owner at least until its `expiresAt`; exact hold
   * counts for owners whose calls all ended definitely; fencing tokens growing.
   */
  async checkSafety(): Promise<void> {
    this.#checkWindows();
    this.#checkTokens();
    const t = now();
    const believed = this.leases.filter(
      (l) =>
        l.endedAt === undefined &&
        !l.lease.ended &&
        this.isLive(l.client) &&
        l.lease.expiresAt > t + 30,
    );
    if (believed.length === 0) return;
    const redis = await this.kind.holds(this.session.raw, this.name);
    for (const l of believed) {
      // The belief may have ended while Redis was read.
      if (l.endedAt !== undefined || l.lease.ended || l.lease.expiresAt <= now()) continue;
      const count = redis.holds.get(l.lease.owner) ?? 0;
      if (count < 1) {
        throw new Violation(
          `L${l.id} of c${l.client} believes it holds until ${l.lease.expiresAt - t} ms from now, but Redis has no hold of its owner (holders: ${[...redis.holds.keys()].join(", ") || "none"})`,
        );
      }
      if (redis.expiresAt !== -1 && redis.expiresAt < l.lease.expiresAt - 1) {
        throw new Violation(
          `L${l.id} of c${l.client} believes it holds until ${l.lease.expiresAt}, but Redis expires the hold at ${redis.expiresAt} (${l.lease.expiresAt - redis.expiresAt} ms earlier)`,
        );
      }
    }
    for (const owner of new Set(believed.map((l) => l.lease.owner))) {
      const client = believed.find((l) => l.lease.owner === owner)?.client ?? 0;
      const state = this.#client(client);
      if (state.uncertain.has(owner)) continue;
      if (this.calls.some((c) => c.owner === owner && !c.settled)) continue;
      const open = this.leases.filter((l) => l.lease.owner === owner && !l.releasing);
      // A lease of the owner that ran out locally leaves its count to the hold's TTL, which
      // a later re-entry may have renewed or restarted: the count is then not known here.
      if (open.some((l) => l.lease.ended || l.lease.expiresAt <= t)) continue;
      const expected = open.length;
      const count = redis.holds.get(owner) ?? 0;
      if (count !== expected) {
        throw new Violation(
          `owner of c${client} holds ${count} time(s) in Redis, but its calls say ${expected} (a copy applied twice, or a release lost)`,
        );
      }
    }
  }

  #checkWindows(): void {
    const windows = this.leases
      .map((l) => ({ l, start: l.acquiredAt, end: this.#windowEnd(l) }))
      .filter((w) => w.end > w.start);
    for (let i = 0; i < windows.length; i++) {
      for (let j = i + 1; j < windows.length; j++) {
        const a = windows[i];
        const b = windows[j];
        if (a === undefined || b === undefined || a.l.lease.owner === b.l.lease.owner) continue;
        if (a.start < b.end && b.start < a.end) {
          throw new Violation(
            `L${a.l.id} (c${a.l.client}) and L${b.l.id} (c${b.l.client}) both believed they held: overlap ${Math.min(a.end, b.end) - Math.max(a.start, b.start)} ms`,
          );
        }
      }
    }
  }

  #checkTokens(): void {
    if (!this.kind.fenced) return;
    const windows = this.leases
      .map((l) => ({ l, start: l.acquiredAt, end: this.#windowEnd(l) }))
      .filter((w) => w.end > w.start);
    for (const a of windows) {
      for (const b of windows) {
        if (a.l.lease.owner === b.l.lease.owner || !(a.end <= b.start)) continue;
        const ta = a.l.lease.fencingToken ?? 0;
        const tb = b.l.lease.fencingToken ?? 0;
        if (!(tb > ta)) {
          throw new Violation(
            `L${b.l.id} (c${b.l.client}) held after L${a.l.id} (c${a.l.client}) with fencing token ${tb} <= ${ta}`,
          );
        }
      }
    }
  }

  /** Until when `l`'s holder believed (or believes) it holds. */
  #windowEnd(l: LeaseRecord): number {
    if (l.endedAt === undefined && !l.lease.ended) l.lastExpiresAt = l.lease.expiresAt;
    return Math.min(l.endedAt ?? Number.POSITIVE_INFINITY, l.lastExpiresAt);
  }

  /**
   * The network runs free until every live client's calls ended, while a watcher checks
   * liveness: the lock never stays free longer than {@link LIVENESS_MS} while a live call
   * waits with budget left. Leases won meanwhile are held until they run out (`release`
   * false) or released at once. Then background work ends and the keys are checked.
   */
  async heal(release: boolean): Promise<void> {
    this.note(`heal (${release ? "release" : "hold"} what is won)`);
    for (const c of this.clients) if (c.paused) this.setPaused(c.index, false);
    this.network.setFree(true);
    const onLease = (record: LeaseRecord) => {
      if (release && this.isLive(record.client)) this.release(record);
    };
    this.#onLease = onLease;
    try {
      await this.#watchLiveness();
    } finally {
      this.#onLease = undefined;
    }
    await this.#background(5_000);
    await this.network.quiet(QUIET_MS, QUIET_LIMIT_MS);
    await this.checkSafety();
    this.network.setFree(false);
    this.steps++;
  }

  #onLease: ((record: LeaseRecord) => void) | undefined;

  async #watchLiveness(): Promise<void> {
    const live = () => this.calls.filter((c) => !c.settled && this.isLive(c.client));
    const deadline =
      Math.max(now(), ...live().map((c) => c.startedAt + c.waitTime)) +
      REQUEST_TIMEOUT_MS * 4 +
      2_000;
    const deadWaiter = this.calls.some(
      (c) =>
        c.waitTime > 0 &&
        !this.isLive(c.client) &&
        (c.settled === false || (this.#client(c.client).crashedAt ?? 0) < c.startedAt + c.waitTime),
    );
    const bound = deadWaiter ? LIVENESS_MS.dead : LIVENESS_MS.live;
    let freeSince: number | undefined;
    /** A stall seen: reported once the lock is taken again, with the whole gap. */
    let stall: { since: number; starving: string; first: string | undefined } | undefined;
    const report = (gap: number, taken: boolean) => {
      if (!stall) return;
      this.note(`liveness violated: free ${gap} ms`);
      throw new Violation(
        `liveness: the lock stayed free for ${gap} ms${taken ? "" : " (not taken yet)"}, from +${stall.since - this.#started} ms (bound ${bound} ms), while ${stall.starving} waited with budget; first registered waiter then: ${stall.first ?? "none"}`,
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
      const exists = (await this.session.raw.exists(this.name)) === 1;
      if (exists) {
        if (freeSince !== undefined) report(t - freeSince, true);
        freeSince = undefined;
      } else freeSince ??= t;
      if (freeSince !== undefined && t - freeSince > bound && !stall) {
        const since = freeSince;
        const starving = live().filter(
          (c) =>
            (c.op === "acquire" || c.op === "reenter") &&
            c.startedAt + c.waitTime - since > bound + 200,
        );
        if (starving.length > 0) {
          stall = {
            since,
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
    for (const l of this.leases) {
      if (!l.releasing && this.isLive(l.client) && !l.lease.ended) this.release(l);
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
    waitTime: number,
    abort: AbortController | undefined,
  ): CallRecord {
    const call: CallRecord = {
      id: this.#nextId++,
      client,
      op,
      owner,
      startedAt: now(),
      waitTime,
      settled: false,
      outcome: undefined,
      ambiguous: false,
      abort,
      promise: Promise.resolve(),
    };
    this.calls.push(call);
    this.#begun.push({ client, count: this.network.receivedFrom[client] ?? 0, call });
    return call;
  }

  #settle(call: CallRecord, outcome: string, error?: unknown): void {
    call.settled = true;
    call.outcome = outcome;
    call.ambiguous = error instanceof TransportError && error.ambiguous;
    const why =
      error === undefined
        ? ""
        : `: ${error instanceof Error ? `${error.name} ${error.message}` : String(error)}`;
    this.note(`c${call.client} C${call.id} ${call.op} -> ${outcome}${why.slice(0, 160)}`);
  }

  #recordLease(client: number, lease: Lease): LeaseRecord {
    const record: LeaseRecord = {
      id: this.#nextId++,
      client,
      lease,
      acquiredAt: now(),
      endedAt: undefined,
      releasing: false,
      lastExpiresAt: lease.expiresAt,
    };
    // A crashed client believes nothing: what it wins after its crash never counts.
    if (!this.isLive(client)) record.endedAt = record.acquiredAt;
    lease.signal.addEventListener("abort", () => {
      record.endedAt ??= now();
    });
    this.leases.push(record);
    this.#onLease?.(record);
    return record;
  }
}

function describeRequest(request: PendingRequest): string {
  return `(c${request.client} ${request.label}${request.response ? "" : ", copy"})`;
}
