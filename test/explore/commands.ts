/**
 * The explorer's commands for fast-check's model-based runs: what clients call, what the
 * network does with each request, crashes, pauses, leases running out, and the heal that
 * checks liveness. Indices (of a client, a lease, a pending request) are taken modulo what
 * exists when the command runs, so that every shrunk sequence still means something.
 */
import fc from "fast-check";
import type { KindSpec, Mode } from "./kinds.js";
import type { World } from "./world.js";

/** What the commands' preconditions need to know, kept beside the real world. */
export interface Model {
  clients: number;
  crashed: Set<number>;
  paused: Set<number>;
}

/** One step of a run. */
export type Command = fc.AsyncCommand<Model, World, false>;

const live = (m: Readonly<Model>, c: number): boolean => !m.crashed.has(c % m.clients);

/** Ends every command: let the clients react, then check safety. */
async function step(world: World): Promise<void> {
  await world.settleStep();
  await world.checkSafety();
}

/** See {@link commandArbitraries}. */
export class Acquire implements Command {
  constructor(
    readonly client: number,
    readonly waitTime: number,
    readonly leaseTime: number,
    readonly permits = 1,
    readonly mode: Mode = "write",
  ) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    // A client makes at most two calls at once, as a request handler would.
    if (w.unsettled(c).length < 2) {
      w.acquire(c, this.waitTime, this.leaseTime, this.permits, this.mode);
    }
    await step(w);
  }
  toString = () =>
    `acquire(c${this.client}${this.mode === "read" ? ", read" : ""}, wait ${this.waitTime}${this.leaseTime === 0 ? "" : `, lease ${this.leaseTime}`}${this.permits === 1 ? "" : `, permits ${this.permits}`})`;
}

/** See {@link commandArbitraries}. */
export class Reenter implements Command {
  constructor(
    readonly client: number,
    readonly lease: number,
    /** A read-write lock's holder takes the other side (a writer reads; a reader's write is refused). */
    readonly other = false,
  ) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    const held = w.heldBy(c);
    const target = held[this.lease % Math.max(1, held.length)];
    if (target && w.unsettled(c).length < 2) {
      const leaseTime = target.lease?.leaseTime ?? 300;
      const mode = this.other ? (target.mode === "read" ? "write" : "read") : target.mode;
      w.acquire(c, 0, leaseTime, 1, mode, target);
    }
    await step(w);
  }
  toString = () =>
    `reenter(c${this.client}, lease ${this.lease}${this.other ? ", other side" : ""})`;
}

/** See {@link commandArbitraries}. */
export class Release implements Command {
  constructor(
    readonly client: number,
    readonly lease: number,
  ) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    const open = w.unreleasedOf(c);
    const target = open[this.lease % Math.max(1, open.length)];
    if (target) w.release(target);
    await step(w);
  }
  toString = () => `release(c${this.client}, lease ${this.lease})`;
}

/** See {@link commandArbitraries}. */
export class Renew implements Command {
  constructor(
    readonly client: number,
    readonly lease: number,
  ) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    const held = w.heldBy(c);
    const target = held[this.lease % Math.max(1, held.length)];
    if (target) w.renew(target);
    await step(w);
  }
  toString = () => `renew(c${this.client}, lease ${this.lease})`;
}

/** See {@link commandArbitraries}. */
export class Abort implements Command {
  constructor(readonly client: number) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    w.abort(this.client % m.clients);
    await step(w);
  }
  toString = () => `abort(c${this.client})`;
}

/** What the network does with one pending request. */
export type Decision = "deliver" | "duplicate" | "lose-answer" | "lose-request";

/**
 * See {@link commandArbitraries}. The request decided on: the pending requests are grouped by
 * what they ask for (`lock/acquire`, `lock/cancel`, ...), in the order each first arrived; `g`
 * picks the group and `k` the request in it (oldest first), both modulo what is there. So which
 * kind of request moves next is as likely with many copies of one held as with one.
 */
export class Net implements Command {
  constructor(
    readonly how: Decision,
    readonly k: number,
    readonly g = 0,
  ) {}
  check = () => true;
  async run(_m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    await w.decide(this.how, this.k, this.g);
    await step(w);
  }
  toString = () => `net(${this.how}, ${this.k}${this.g === 0 ? "" : `, ${this.g}`})`;
}

/** See {@link commandArbitraries}. */
export class EndStreams implements Command {
  constructor(readonly client: number) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    w.endStreams(this.client % m.clients);
    await step(w);
  }
  toString = () => `endStreams(c${this.client})`;
}

/** See {@link commandArbitraries}. */
export class Crash implements Command {
  constructor(readonly client: number) {}
  // One client always lives, so that liveness has someone to judge.
  check = (m: Readonly<Model>) => live(m, this.client) && m.crashed.size < m.clients - 1;
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    m.crashed.add(c);
    m.paused.delete(c);
    w.crash(c);
    await step(w);
  }
  toString = () => `crash(c${this.client})`;
}

/** See {@link commandArbitraries}. */
export class Pause implements Command {
  constructor(
    readonly client: number,
    readonly paused: boolean,
  ) {}
  check = (m: Readonly<Model>) =>
    live(m, this.client) && m.paused.has(this.client % m.clients) !== this.paused;
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    if (this.paused) m.paused.add(c);
    else m.paused.delete(c);
    w.setPaused(c, this.paused);
    await step(w);
  }
  toString = () => `${this.paused ? "pause" : "resume"}(c${this.client})`;
}

/** See {@link commandArbitraries}. */
export class LeaseRunsOut implements Command {
  check = () => true;
  async run(_m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    await w.leaseRunsOut(1_500);
    await step(w);
  }
  toString = () => "leaseRunsOut()";
}

/** See {@link commandArbitraries}. */
export class ClockStepsBack implements Command {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(_m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    w.clockStepsBack(this.ms);
    await step(w);
  }
  toString = () => `clockStepsBack(${this.ms})`;
}

/** See {@link commandArbitraries}. */
export class SetOrAdd implements Command {
  constructor(
    readonly client: number,
    readonly op: "set" | "add",
    readonly amount: number,
  ) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    if (w.unsettled(c).length < 2) w.setOrAdd(c, this.op, this.amount);
    await step(w);
  }
  toString = () => `${this.op}(c${this.client}, ${this.amount})`;
}

/** See {@link commandArbitraries}. */
export class StrayRelease implements Command {
  constructor(readonly client: number) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    if (w.unsettled(c).length < 2) w.strayRelease(c, 1);
    await step(w);
  }
  toString = () => `strayRelease(c${this.client})`;
}

/** See {@link commandArbitraries}. */
export class CountDown implements Command {
  constructor(readonly client: number) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    if (w.unsettled(c).length < 2) w.countDown(c);
    await step(w);
  }
  toString = () => `countDown(c${this.client})`;
}

/** See {@link commandArbitraries}. */
export class Await implements Command {
  constructor(
    readonly client: number,
    readonly waitTime: number,
  ) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    if (w.unsettled(c).length < 2) w.await(c, this.waitTime);
    await step(w);
  }
  toString = () => `await(c${this.client}, wait ${this.waitTime})`;
}

/** See {@link commandArbitraries}. */
export class Heal implements Command {
  constructor(readonly release: boolean) {}
  check = () => true;
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    m.paused.clear();
    await w.heal(this.release);
  }
  toString = () => `heal(${this.release ? "release" : "hold"})`;
}

const client = fc.nat({ max: 3 });
/** A lease as long as the clients' replay window (`DEFAULT_REPLAY_WINDOW_MS`). */
export const LONG_LEASE_MS = 30_000;
const index = fc.nat({ max: 7 });

/** Prints a command as its `toString` in fast-check's reports. */
const named = (command: Command): Command =>
  Object.assign(command, { [fc.toStringMethod]: () => command.toString() });

/** The command arbitraries of `kind`'s family, weighted so that the network decides most often. */
export function commandArbitraries(kind: KindSpec): fc.Arbitrary<Command>[] {
  return weighted(kind).map((arbitrary) => arbitrary.map(named));
}

const times = <T>(n: number, value: T): T[] => Array.from({ length: n }, () => value);

function weighted(kind: KindSpec): fc.Arbitrary<Command>[] {
  const wait = fc.constantFrom(0, 1_200, 6_000);
  // Now and then a lease as long as the clients' replay window (30 s): its acquire writes no
  // replay record (the hold is its own), which only such leases exercise.
  const lease = fc.oneof(
    { arbitrary: fc.constantFrom(300, 450, 600), weight: 8 },
    { arbitrary: fc.constant(LONG_LEASE_MS), weight: 1 },
  );
  const shortWait = fc.constantFrom(0, 1_200, 3_000);
  const net = fc
    .tuple(
      fc.constantFrom<Decision>(
        "deliver",
        "deliver",
        "deliver",
        "duplicate",
        "lose-answer",
        "lose-request",
      ),
      index,
      index,
    )
    .map(([how, k, g]): Command => new Net(how, k, g));
  const release = fc.tuple(client, index).map(([c, i]): Command => new Release(c, i));
  const renew = fc.tuple(client, index).map(([c, i]): Command => new Renew(c, i));
  const common = [
    ...times(6, net),
    client.map((c): Command => new Abort(c)),
    client.map((c): Command => new EndStreams(c)),
    client.map((c): Command => new Crash(c)),
    fc.tuple(client, fc.boolean()).map(([c, p]): Command => new Pause(c, p)),
    fc.constantFrom(1_500, 3_000).map((ms): Command => new ClockStepsBack(ms)),
    fc.boolean().map((r): Command => new Heal(r)),
  ];
  const setOrAdd = fc
    .tuple(client, fc.constantFrom<"set" | "add">("set", "add"))
    .map(([c, op]): Command => new SetOrAdd(c, op, op === "set" ? kind.initial + 1 : 1));
  switch (kind.family) {
    case "lock": {
      const rw = kind.modes.length > 1;
      const mode = rw ? fc.constantFrom<Mode>("read", "write") : fc.constant<Mode>("write");
      const acquire = fc
        .tuple(client, wait, lease, mode)
        .map(([c, w, l, m]): Command => new Acquire(c, w, l, 1, m));
      const other = rw ? fc.boolean() : fc.constant(false);
      return [
        ...times(4, acquire),
        ...common,
        fc.tuple(client, index, other).map(([c, i, o]): Command => new Reenter(c, i, o)),
        release,
        release,
        renew,
        fc.constant<Command>(new LeaseRunsOut()),
      ];
    }
    case "semaphore": {
      // Shorter waits: permits a crashed holder keeps stay taken, and waiters wait out their
      // budgets behind them in every heal.
      const acquire = fc
        .tuple(client, shortWait, fc.constantFrom(1, 1, 2))
        .map(([c, w, p]): Command => new Acquire(c, w, 0, p));
      return [
        ...times(4, acquire),
        ...common,
        release,
        release,
        client.map((c): Command => new StrayRelease(c)),
        setOrAdd,
      ];
    }
    case "permits": {
      const acquire = fc
        .tuple(client, wait, lease, fc.constantFrom(1, 1, 2))
        .map(([c, w, l, p]): Command => new Acquire(c, w, l, p));
      return [
        ...times(4, acquire),
        ...common,
        release,
        release,
        renew,
        setOrAdd,
        fc.constant<Command>(new LeaseRunsOut()),
      ];
    }
    case "latch":
      return [
        ...times(
          3,
          client.map((c): Command => new CountDown(c)),
        ),
        ...times(
          3,
          fc.tuple(client, shortWait).map(([c, w]): Command => new Await(c, w)),
        ),
        ...common,
        client.map((c): Command => new SetOrAdd(c, "set", kind.initial)),
      ];
  }
}
