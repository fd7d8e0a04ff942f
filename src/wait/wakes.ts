/**
 * Wake-ups over pub/sub (SUBSCRIBE served as Server-Sent Events by the REST API), Redisson's
 * wake path (RedissonLock#tryLock with LockPubSub) with one change: a release wakes exactly one
 * waiter, not every subscriber. Each client has one subscription per primitive name, on its own
 * channel `edgelock_wake:{<name>}:<hub id>` (`edgelock_wake:<SHA1 of the name>:<hub id>` for a
 * name that a REST path cannot carry: {@link wakeChannel}), shared by all its waits on that
 * name; a busy attempt
 * registers the wait's id `<hub id>:<wait>` (lua/lib/wake.lua), and the script that frees what
 * it waits for publishes that id (with a payload after `|`, e.g. a fair lock's epoch) on that
 * channel. Messages are dispatched locally by id; anything else on the channel is ignored.
 *
 * Order, so that no wake-up is lost (Redisson's): subscribe, wait for the confirmation, then
 * attempt (which registers), then wait for a message or the wait's bound. A subscription stays
 * open while a wait uses it and for {@link SUBSCRIPTION_IDLE_MS} after the last, so that a client
 * that waits again soon registers with its first attempt instead of subscribing again.
 * @module
 */
import { Deadline } from "../abort.js";
import type { LockContext } from "../context.js";
import { randomHex } from "../ids.js";
import type { RequestCounter, ScriptRunner } from "../transport/index.js";
import { sha1Hex } from "../transport/sha1.js";
import { directStreams } from "../transport/sse.js";

/**
 * Whether the REST API's `/subscribe/<channel>` path carries `text` as it is: the channel goes
 * into the URL path unencoded (by `@upstash/redis` and by ../transport/sse.ts alike), so a `/`,
 * `?`, `#`, `%`, `\` or a control character would subscribe to another channel, or to none.
 * With `comma`, a `,` fails too: `@upstash/redis` splits an event at the second comma, so a
 * message on such a channel would reach nobody (lua/lib/channel.lua tests the same set).
 */
function carried(text: string, comma: boolean): boolean {
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (code < 0x20 || code === 0x7f || "/?#%\\".includes(ch) || (comma && ch === ",")) {
      return false;
    }
  }
  return text.length > 0;
}

const WAKE_PREFIX = "edgelock_wake:{";
/** The reason a subscription not confirmed in time ends its deadline with (not a failure). */
const PENDING = Symbol("pending");

/**
 * The channel base of wake key `edgelock_wake:{<name>}`, as lua/lib/channel.lua builds it: the
 * key itself, or `edgelock_wake:<SHA1 hex of the name>` when a REST path cannot carry the name,
 * so that every name's waiters are woken by push. Redisson's channels are never renamed (a JVM
 * client publishes on them): a wait on one of those that a path cannot carry polls.
 */
export async function wakeChannel(prefix: string): Promise<string> {
  if (!prefix.startsWith(WAKE_PREFIX) || !prefix.endsWith("}")) return prefix;
  const name = prefix.slice(WAKE_PREFIX.length, -1);
  return carried(name, true) ? prefix : `edgelock_wake:${await sha1Hex(name)}`;
}

/**
 * How long a stream must have been open for a wait to subscribe again when it ends, in ms:
 * a server that ends every stream at once would otherwise cost a subscription and an attempt
 * per round trip. A shorter-lived stream turns the wait to polling.
 */
export const MIN_STREAM_LIFE_MS = 1_000;

/** How long an unused subscription stays open, in ms. */
export const SUBSCRIPTION_IDLE_MS = 1_000;

/** What one wait for a wake-up ended with. */
export type WakeOutcome =
  /** A release woke this wait; `payload` is what it sent after the id ('' when nothing). */
  | { woke: true; payload: string }
  /** The bound passed; `lost`: the subscription failed meanwhile (wait no more on this slot). */
  | { woke: false; lost: boolean };

/** One subscription, shared by the waits of one client on one name. */
interface Shared {
  readonly channel: string;
  readonly slots: Map<string, WakeSlot>;
  ready: Promise<boolean>;
  confirmed: boolean;
  /** When the subscription was confirmed, and when it was lost (`Date.now()`; 0: not yet). */
  confirmedAt: number;
  lostAt: number;
  lost: boolean;
  idle: ReturnType<typeof setTimeout> | undefined;
  close(): void;
}

/** One wait's place on a shared subscription. */
export class WakeSlot {
  /** The id a busy attempt registers (`<hub id>:<wait>`). */
  readonly id: string;
  readonly #shared: Shared;
  readonly #release: (slot: WakeSlot) => void;
  /** Only keeps the subscription open for a hold (see {@link WakeHub.joinOpen}); never waits. */
  readonly holding: boolean;
  #pending: string | undefined;
  #waiting: ((outcome: WakeOutcome) => void) | undefined;
  #relay: WakeSlot | undefined;
  #left = false;

  /** Internal: see {@link WakeHub.join}. */
  constructor(id: string, shared: Shared, release: (slot: WakeSlot) => void, holding = false) {
    this.id = id;
    this.#shared = shared;
    this.#release = release;
    this.holding = holding;
  }

  /** Whether the subscription failed or its stream ended: nothing wakes this slot any more. */
  get lost(): boolean {
    return this.#shared.lost;
  }

  /**
   * Whether the stream lived long enough ({@link MIN_STREAM_LIFE_MS}) that a wait may subscribe
   * again now that it is lost.
   */
  get renewable(): boolean {
    const { confirmedAt, lostAt } = this.#shared;
    return confirmedAt > 0 && lostAt - confirmedAt >= MIN_STREAM_LIFE_MS;
  }

  /**
   * Passes every message this slot receives on to `target` (without its payload), so a wait on
   * `target` also wakes for this slot's channel.
   */
  relayTo(target: WakeSlot): void {
    this.#relay = target;
  }

  /** Internal: a message for this slot arrived. */
  deliver(payload: string): void {
    if (this.#relay) {
      this.#relay.deliver("");
      return;
    }
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = undefined;
      waiting({ woke: true, payload });
    } else {
      // It arrived between an attempt and the wait after it: the next wait returns at once.
      this.#pending = payload;
    }
  }

  /** Internal: the subscription failed or its stream ended. */
  fail(): void {
    if (this.#relay) {
      // The wait on the target learns of it as of a wake-up, and drops this place then.
      this.#relay.deliver("");
      return;
    }
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.({ woke: false, lost: true });
  }

  /**
   * Waits for this slot's wake-up for at most `ms`.
   * @throws signal.reason when `signal` aborts first.
   */
  next(ms: number, signal: AbortSignal | undefined): Promise<WakeOutcome> {
    signal?.throwIfAborted();
    if (this.#pending !== undefined) {
      const payload = this.#pending;
      this.#pending = undefined;
      return Promise.resolve({ woke: true, payload });
    }
    if (this.#shared.lost) return Promise.resolve({ woke: false, lost: true });
    return new Promise<WakeOutcome>((resolve, reject) => {
      const done = (outcome: WakeOutcome) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve(outcome);
      };
      const onAbort = () => {
        clearTimeout(timer);
        this.#waiting = undefined;
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        this.#waiting = undefined;
        done({ woke: false, lost: false });
      }, ms);
      this.#waiting = done;
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Gives the place up; the subscription closes once no wait uses it. Idempotent. */
  leave(): void {
    if (this.#left) return;
    this.#left = true;
    this.#release(this);
  }
}

/**
 * The subscriptions of one client (see the module documentation). At most `max` are open at
 * once (a Worker invocation may keep 6 connections open); a wait that finds none free polls.
 */
export class WakeHub {
  /** Prefix of every wait id of this client; hex, so it never holds `:` or `|`. */
  readonly id = randomHex(8);
  readonly #runner: ScriptRunner;
  readonly #max: number;
  readonly #shared = new Map<string, Shared>();

  constructor(runner: ScriptRunner, max: number) {
    this.#runner = runner;
    this.#max = max;
  }

  /** Whether this client can be woken at all (its Redis client subscribes, `max` > 0). */
  get enabled(): boolean {
    return this.#max > 0 && this.#runner.canSubscribe;
  }

  /** Subscriptions open now. */
  get open(): number {
    return this.#shared.size;
  }

  /**
   * A place for wait `id` ({@link waitId}) on `<prefix>:<hub id>` whose subscription is confirmed already, or
   * `undefined` (none open yet: see {@link join}). `holding`: the place only keeps the
   * subscription open while the client holds a lease on the name; a wait that finds every
   * subscription taken closes one that only such places keep open.
   */
  joinOpen(prefix: string, id: string, holding = false): WakeSlot | undefined {
    const shared = this.#confirmed(prefix);
    return shared && this.#slot(shared, id, holding);
  }

  /**
   * Whether {@link joinOpen} would find a confirmed subscription on `<prefix>:<hub id>` now: a
   * wait that finds none makes its first attempt before it sets anything else up (loop.ts).
   */
  isOpen(prefix: string): boolean {
    return this.#confirmed(prefix) !== undefined;
  }

  /** The subscription on `<prefix>:<hub id>` when it is confirmed and not lost. */
  #confirmed(prefix: string): Shared | undefined {
    // Asked twice per acquire: a client that never waited has no subscription to look up.
    if (this.#shared.size === 0) return undefined;
    const shared = this.#shared.get(this.#key(prefix));
    return shared?.confirmed && !shared.lost ? shared : undefined;
  }

  /** A new wait id of this client: `<hub id>:<random>`. */
  waitId(): string {
    return `${this.id}:${randomHex(8)}`;
  }

  /**
   * A place for wait `id` ({@link waitId}) on `<prefix>:<hub id>`, subscribing first when needed
   * (one request, added to `counter`) and resolving once the subscription is confirmed.
   * @returns the slot; `"unavailable"` when the client cannot subscribe, `max` subscriptions are
   * open, or the subscription failed (the wait then polls); `"pending"` when it was not
   * confirmed within `withinMs` (the wait's bound: the caller attempts and may join again).
   * @throws signal.reason when `signal` aborts first.
   */
  join(
    name: string,
    prefix: string,
    id: string,
    counter: RequestCounter,
    signal: AbortSignal | undefined,
    withinMs: number,
  ): Promise<WakeSlot | "unavailable" | "pending"> {
    return this.#join(name, this.#key(prefix), prefix, id, counter, signal, withinMs);
  }

  /**
   * Like {@link join}, on a channel whose every message wakes every wait of this client on it:
   * a Redisson channel (`redisson_lock__channel:{<name>}`), where a JVM client's unlock
   * publishes, for waits held up by a JVM holder.
   */
  joinBroadcast(
    name: string,
    channel: string,
    id: string,
    counter: RequestCounter,
    signal: AbortSignal | undefined,
    withinMs: number,
  ): Promise<WakeSlot | "unavailable" | "pending"> {
    return this.#join(name, channel, undefined, id, counter, signal, withinMs);
  }

  /**
   * `key`: the subscription's key here; `prefix`: the wake key of an own channel
   * (`<prefix>:<hub id>`), `undefined` for a broadcast channel (`key` is the channel).
   */
  async #join(
    name: string,
    key: string,
    prefix: string | undefined,
    id: string,
    counter: RequestCounter,
    signal: AbortSignal | undefined,
    withinMs: number,
  ): Promise<WakeSlot | "unavailable" | "pending"> {
    if (!this.enabled) return "unavailable";
    let channel = key;
    if (prefix !== undefined) {
      // Computed at each join (a digest takes microseconds), so that nothing here grows with
      // the number of names a long-lived client waits on.
      channel = `${await wakeChannel(prefix)}:${this.id}`;
    } else if (!carried(channel, false)) {
      return "unavailable";
    }
    let shared = this.#shared.get(key);
    if (shared?.lost) shared = undefined;
    if (!shared) {
      if (this.#shared.size >= this.#max) this.#closeUnwaited();
      if (this.#shared.size >= this.#max) return "unavailable";
      shared = this.#subscribe(name, key, channel, counter, prefix === undefined);
    }
    const slot = this.#slot(shared, id);
    // Not confirmed within `withinMs`: "pending" (the deadline's reason), not a failure.
    const deadline = new Deadline(withinMs, () => PENDING, signal);
    let outcome: boolean | "pending";
    try {
      outcome = await deadline.race(shared.ready);
    } catch (error) {
      if (error !== PENDING) {
        slot.leave();
        throw error;
      }
      outcome = "pending";
    } finally {
      deadline.clear();
    }
    if (outcome === true) return slot;
    slot.leave();
    return outcome === "pending" ? "pending" : "unavailable";
  }

  /** Closes one subscription no wait uses (idle, or kept open only for holds), if any. */
  #closeUnwaited(): void {
    for (const shared of this.#shared.values()) {
      if ([...shared.slots.values()].every((slot) => slot.holding)) {
        shared.close();
        return;
      }
    }
  }

  #key(prefix: string): string {
    return `${prefix}:${this.id}`;
  }

  #slot(shared: Shared, id: string, holding = false): WakeSlot {
    clearTimeout(shared.idle);
    shared.idle = undefined;
    const slot = new WakeSlot(
      id,
      shared,
      (s) => {
        shared.slots.delete(s.id);
        if (shared.slots.size > 0 || shared.idle !== undefined) return;
        if (shared.lost) {
          shared.close();
          return;
        }
        shared.idle = setTimeout(() => shared.close(), SUBSCRIPTION_IDLE_MS);
      },
      holding,
    );
    shared.slots.set(slot.id, slot);
    return slot;
  }

  #subscribe(
    name: string,
    key: string,
    channel: string,
    counter: RequestCounter,
    broadcast: boolean,
  ): Shared {
    const slots = new Map<string, WakeSlot>();
    let closed = false;
    const lose = () => {
      if (shared.lost) return;
      shared.lost = true;
      shared.lostAt = Date.now();
      for (const slot of slots.values()) slot.fail();
      if (slots.size === 0) shared.close();
    };
    const sub = this.#runner.subscribe(
      name,
      channel,
      (message) => {
        if (broadcast) {
          for (const slot of slots.values()) slot.deliver("");
          return;
        }
        const bar = message.indexOf("|");
        const id = bar < 0 ? message : message.slice(0, bar);
        slots.get(id)?.deliver(bar < 0 ? "" : message.slice(bar + 1));
      },
      lose,
      counter,
      directStreams,
    );
    const shared: Shared = {
      channel,
      slots,
      ready: sub.ready.then(
        () => {
          shared.confirmed = true;
          shared.confirmedAt = Date.now();
          return true;
        },
        () => {
          lose();
          return false;
        },
      ),
      confirmed: false,
      confirmedAt: 0,
      lostAt: 0,
      lost: false,
      idle: undefined,
      close: () => {
        clearTimeout(shared.idle);
        if (this.#shared.get(key) === shared) this.#shared.delete(key);
        // Once: a subscription closed for a wait that needed its place is closed again when its
        // last hold ends.
        if (closed) return;
        closed = true;
        sub.close();
      },
    };
    this.#shared.set(key, shared);
    return shared;
  }
}

const hubs = new WeakMap<LockContext, WakeHub>();

/**
 * The client's wake-up subscriptions, made at its first wait: code that never waits (the cron
 * guard, the LeaseKeeper) bundles none of this module.
 */
export function wakeHubOf(ctx: LockContext): WakeHub {
  let hub = hubs.get(ctx);
  if (!hub) {
    hub = new WakeHub(ctx.runner, ctx.maxSubscriptions);
    hubs.set(ctx, hub);
  }
  return hub;
}
