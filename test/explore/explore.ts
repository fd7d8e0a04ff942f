/**
 * The explorer's property: fast-check generates a number of clients and a sequence of
 * commands, runs them against a {@link World} (checking safety after each), ends with a heal
 * that checks liveness, then checks the keys left. A failure is shrunk and reported with the
 * seed and path that replay it.
 */
import fc from "fast-check";
import * as sourceScripts from "../../src/lua.gen.js";
import { restoreClock } from "./clock.js";
import { type Command, commandArbitraries, type Model } from "./commands.js";
import { type KindName, type KindSpec, SPECS } from "./kinds.js";
import { type EdgeLockModule, type Session, Violation, World } from "./world.js";

/** Most commands in one run (before the final heal). */
export const MAX_COMMANDS = 32;

/** What an exploration did. */
export interface ExploreStats {
  runs: number;
  steps: number;
  violations: number;
}

/** A failing run, shrunk, with what replays it. */
export interface ExploreFailure {
  kind: KindName;
  seed: number;
  path: string;
  /** The shrunk sequence: clients, then commands. */
  counterexample: string;
  /** The property that broke, and what the run did (one line per step). */
  message: string;
}

/** Options of {@link explore}. */
export interface ExploreOptions {
  kind: KindName;
  session: Session;
  seed: number;
  /** Replays one counterexample instead of generating (with `seed`). */
  path?: string | undefined;
  numRuns: number;
  /** Stops generating new runs after this long (a run in progress finishes). */
  timeLimitMs?: number | undefined;
  /** Stops shrinking after this long: the smallest failure found so far is reported. */
  shrinkLimitMs?: number | undefined;
  stats: ExploreStats;
  /** Called after each run with its number of steps and its log. */
  onRun?: (steps: number, failed: boolean, log: readonly string[]) => void;
  /** Where the clients' edgelock comes from (default: src/; mutants.ts: a mutated copy). */
  lib?: EdgeLockModule | undefined;
  /** Its scripts (src/lua.gen.ts, or the copy's), loaded into Redis before the first run. */
  scripts?: object | undefined;
  /** Whether a failure is shrunk (default true); false reports the first failing run. */
  shrink?: boolean | undefined;
}

/** The property over one kind, counting runs and steps into `stats`. */
function property(options: ExploreOptions, shrinking: { since: number | undefined }) {
  const spec = SPECS[options.kind];
  return fc.asyncProperty(
    fc.integer({ min: 2, max: 4 }),
    // A plain array, not fc.commands: its shrinking does not depend on which commands ran,
    // so a seed and a path replay the same sequence.
    fc.array(fc.oneof(...commandArbitraries(spec)), { maxLength: MAX_COMMANDS, size: "max" }),
    async (clients, commands) => {
      // Past its budget, shrinking skips its remaining candidates: the smallest failure so
      // far is the one reported.
      const { since } = shrinking;
      if (since !== undefined && options.shrinkLimitMs !== undefined) {
        fc.pre(Date.now() - since < options.shrinkLimitMs);
      }
      try {
        await runSequence(
          spec,
          options.session,
          clients,
          commands,
          (steps, failed, log) => {
            options.stats.runs++;
            options.stats.steps += steps;
            options.onRun?.(steps, failed, log);
          },
          options.lib,
        );
      } catch (error) {
        shrinking.since ??= Date.now();
        throw error;
      }
    },
  );
}

/**
 * Runs one sequence of commands on `clients` clients of `spec`, then the final heal
 * (liveness) and the key check.
 * @throws Violation with the run's log when a property broke.
 */
export async function runSequence(
  spec: KindSpec,
  session: Session,
  clients: number,
  commands: Iterable<Command>,
  onRun?: (steps: number, failed: boolean, log: readonly string[]) => void,
  lib?: EdgeLockModule,
): Promise<void> {
  const world = await World.start(spec, session, clients, lib);
  let failed = false;
  try {
    await fc.asyncModelRun(
      () => ({
        model: { clients, crashed: new Set<number>(), paused: new Set<number>() } as Model,
        real: world,
      }),
      commands,
    );
    await world.heal(false);
    await world.checkKeys();
  } catch (error) {
    failed = true;
    const what = error instanceof Violation ? error.message : `run failed: ${String(error)}`;
    throw new Violation(`${what}\n  run (${clients} clients):\n    ${world.log.join("\n    ")}`);
  } finally {
    restoreClock();
    await world.close();
    onRun?.(world.steps, failed, world.log);
  }
}

/**
 * Loads every script of `modules` into Redis (`SCRIPT LOAD`), as a Redis that has served the
 * clients before has them: their requests are then one EVALSHA each, not a NOSCRIPT answer and
 * an EVAL, and every network decision is about a request that does something.
 */
export async function loadScripts(session: Session, modules: object): Promise<void> {
  for (const value of Object.values(modules) as unknown[]) {
    const source = (value as { source?: unknown } | undefined)?.source;
    if (typeof source === "string") await session.raw.scriptLoad(source);
  }
}

/**
 * Explores one kind from `seed` (or replays `seed` + `path`).
 * @returns the shrunk failure, or `undefined` when every run held.
 */
export async function explore(options: ExploreOptions): Promise<ExploreFailure | undefined> {
  await loadScripts(options.session, options.scripts ?? sourceScripts);
  const plugins: fc.Plugin<unknown>[] = [];
  if (options.timeLimitMs !== undefined) {
    plugins.push(fc.interruptAfterTimeLimit(options.timeLimitMs));
  }
  const details = await fc.check(property(options, { since: undefined }), {
    seed: options.seed,
    path: options.path,
    numRuns: options.path === undefined ? options.numRuns : 1,
    // A replay runs the sequence once, as printed, without shrinking it again.
    endOnFailure: options.path !== undefined || options.shrink === false,
    plugins,
  });
  if (!details.failed) return undefined;
  options.stats.violations++;
  const error = details.errorInstance;
  const counterexample = fc.stringify(details.counterexample);
  return {
    kind: options.kind,
    seed: details.seed,
    path: details.counterexamplePath ?? "",
    counterexample,
    message: error instanceof Error ? error.message : String(error),
  };
}
