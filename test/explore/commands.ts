/**
 * The explorer's commands for fast-check's model-based runs: what clients call, what the
 * network does with each request, crashes, pauses, leases running out, and the heal that
 * checks liveness. Indices (of a client, a lease, a pending request) are taken modulo what
 * exists when the command runs, so that every shrunk sequence still means something.
 */
import fc from "fast-check";
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
  ) {}
  check = (m: Readonly<Model>) => live(m, this.client);
  async run(m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    const c = this.client % m.clients;
    // A client makes at most two calls at once, as a request handler would.
    if (w.unsettled(c).length < 2) w.acquire(c, this.waitTime, this.leaseTime);
    await step(w);
  }
  toString = () => `acquire(c${this.client}, wait ${this.waitTime}, lease ${this.leaseTime})`;
}

/** See {@link commandArbitraries}. */
export class Reenter implements Command {
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
    if (target && w.unsettled(c).length < 2) w.acquire(c, 0, target.lease.leaseTime, target);
    await step(w);
  }
  toString = () => `reenter(c${this.client}, lease ${this.lease})`;
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

/** See {@link commandArbitraries}. */
export class Net implements Command {
  constructor(
    readonly how: Decision,
    readonly k: number,
  ) {}
  check = () => true;
  async run(_m: Model, w: World) {
    w.note(`# ${this.toString()}`);
    await w.decide(this.how, this.k);
    await step(w);
  }
  toString = () => `net(${this.how}, ${this.k})`;
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
const index = fc.nat({ max: 7 });

/** Prints a command as its `toString` in fast-check's reports. */
const named = (command: Command): Command =>
  Object.assign(command, { [fc.toStringMethod]: () => command.toString() });

/** The command arbitraries, weighted so that the network decides most often. */
export function commandArbitraries(): fc.Arbitrary<Command>[] {
  return weighted().map((arbitrary) => arbitrary.map(named));
}

function weighted(): fc.Arbitrary<Command>[] {
  const acquire = fc
    .tuple(client, fc.constantFrom(0, 1_200, 6_000), fc.constantFrom(300, 450, 600))
    .map(([c, wait, lease]): Command => new Acquire(c, wait, lease));
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
    )
    .map(([how, k]): Command => new Net(how, k));
  const reenter = fc.tuple(client, index).map(([c, i]): Command => new Reenter(c, i));
  const release = fc.tuple(client, index).map(([c, i]): Command => new Release(c, i));
  return [
    ...Array.from({ length: 4 }, () => acquire),
    ...Array.from({ length: 6 }, () => net),
    reenter,
    release,
    release,
    fc.tuple(client, index).map(([c, i]): Command => new Renew(c, i)),
    client.map((c): Command => new Abort(c)),
    client.map((c): Command => new EndStreams(c)),
    client.map((c): Command => new Crash(c)),
    fc.tuple(client, fc.boolean()).map(([c, p]): Command => new Pause(c, p)),
    fc.constant<Command>(new LeaseRunsOut()),
    fc.boolean().map((r): Command => new Heal(r)),
  ];
}
