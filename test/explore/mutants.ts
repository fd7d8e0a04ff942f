/**
 * Mutants for the explorer's teeth (teeth.test.ts, `npm run explore:teeth`): each one a copy of
 * src/ and lua/ in a temporary directory with a defect put in by a string replace (asserted to
 * match), the scripts generated again from the mutated Lua by the copy's own lua/gen.mjs, and
 * edgelock imported from the copy. Nothing is ever written to the checkout.
 */
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import type { KindName } from "./kinds.js";
import { registerScripts } from "./network.js";
import { SEEDS, type SeedRun } from "./seeds.js";
import type { EdgeLockModule } from "./world.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** One string replace in a file of the copy (path from the repository's root). */
export interface Edit {
  file: string;
  from: string;
  to: string;
}

/** A defect the explorer must find, where it must find it. */
export interface Mutation {
  /** Short name, e.g. `late-copy-guard`. */
  id: string;
  /** What the defect is, in a sentence. */
  what: string;
  edits: readonly Edit[];
  /** The violation it must be found by (the first line of the explorer's report). */
  finds: RegExp;
  /** The kinds and seeds explored until it is found, in order (from the committed seed set). */
  seeds: readonly { kind: KindName; seed: SeedRun }[];
  /** Why the explorer does not find it (then `seeds` is empty and the teeth skip it). */
  notFound?: string;
}

/** A mutated edgelock, loaded. */
export interface Mutant {
  lib: EdgeLockModule;
  /** Its scripts (the copy's src/lua.gen.ts). */
  scripts: object;
  /** Removes the copy. */
  remove(): void;
}

/**
 * Copies src/ and lua/ to a temporary directory, applies `mutation`'s edits there (each must
 * match exactly once), regenerates the copy's scripts when Lua was edited, and imports
 * edgelock from the copy.
 * @throws when an edit does not match exactly once: the source changed under the mutation.
 */
export async function loadMutant(mutation: Mutation): Promise<Mutant> {
  const dir = mkdtempSync(join(tmpdir(), `edgelock-mutant-${mutation.id}-`));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    cpSync(join(ROOT, "src"), join(dir, "src"), { recursive: true });
    cpSync(join(ROOT, "lua"), join(dir, "lua"), { recursive: true });
    cpSync(join(ROOT, "tsconfig.base.json"), join(dir, "tsconfig.base.json"));
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
    for (const edit of mutation.edits) {
      const file = join(dir, edit.file);
      const text = readFileSync(file, "utf8");
      const found = text.split(edit.from).length - 1;
      if (found !== 1) {
        throw new Error(
          `mutation ${mutation.id}: ${edit.file} has ${found} matches of ${JSON.stringify(edit.from)}, not 1`,
        );
      }
      writeFileSync(file, text.replace(edit.from, edit.to));
    }
    if (mutation.edits.some((e) => e.file.startsWith("lua/"))) {
      await promisify(execFile)(process.execPath, [join(dir, "lua", "gen.mjs")], { cwd: dir });
    }
    const url = (path: string) => pathToFileURL(join(dir, "src", path)).href;
    const lib = (await import(url("index.ts"))) as EdgeLockModule;
    const scripts = (await import(url("lua.gen.ts"))) as object;
    registerScripts([scripts]);
    return { lib, scripts, remove };
  } catch (error) {
    remove();
    throw error;
  }
}

/** The committed seeds of `kind` that find a mutation, by their seed. */
function seeds(kind: KindName, ...which: number[]): { kind: KindName; seed: SeedRun }[] {
  return which.map((seed) => {
    const run = SEEDS[kind].find((s) => s.seed === seed);
    if (run === undefined) throw new Error(`${kind} seed ${seed} is not in the seed set`);
    return { kind, seed: run };
  });
}

/** Replaces `from` with `to` in `file`: one edit. */
const edit = (file: string, from: string, to: string): Edit => ({ file, from, to });

/**
 * The defects of issue 51's item 4, each where the explorer finds it: the kind, and the seeds
 * (fast-check's seed and run count) that find it, first one first.
 */
export const MUTATIONS: readonly Mutation[] = [
  {
    id: "late-copy-guard",
    what: "the guard against late copies of a cancelled attempt removed (ee360a7): a waiter holds a hand-off on its message while the cancel of an earlier attempt may still undo it",
    edits: [
      edit(
        "src/wait/loop.ts",
        "if (payload && at === undefined && unanswered === 0) {",
        "if (payload && at === undefined) {",
      ),
    ],
    finds: /Redis has no hold of its owner|both believed they held/,
    seeds: [],
    notFound:
      "random runs did not reach it in 25 minutes over the lock and both semaphores: it takes a waiter whose attempt has copies on their way, one answered busy, a release handing it the lock, a late copy, then the cancel, in that order",
  },
  {
    id: "lapsed-hand-off",
    what: "a release hands the lock to a registration whose slot lapsed",
    edits: [edit("lua/lib/wake.lua", "if tonumber(first[2]) > clock_ms() then", "if true then")],
    finds: /liveness|both believed they held/,
    seeds: [],
    notFound:
      "a registration lapses only after its slot (60 s for a waiter that asks for hand-offs, LOCK_HAND_OFF_SLOT_MS) without coming back, far beyond a run of a few seconds, and the slot is not an option a test can shorten",
  },
  {
    id: "re-registration-behind",
    what: "a waiter's re-registration placed behind later arrivals (hold_register's place-keeping for the bare entry removed)",
    edits: [
      edit(
        "lua/lib/reentrant.lua",
        `    if not lapses and member ~= waiter then
      lapses = tonumber(redis.call('zscore', waiting, waiter))
      bare = lapses ~= nil
    end
`,
        "",
      ),
    ],
    finds: /^liveness/,
    seeds: seeds("lock", 5),
  },
  {
    id: "acquire-reapplies",
    what: "an acquire that re-applies when its copy arrives (its own-hold check removed)",
    edits: [edit("lua/lock/acquire.lua", "\nif s.by == id then\n", "\nif false then\n")],
    finds: /holds 2 time\(s\) in Redis/,
    seeds: seeds("lock", 5),
  },
  {
    id: "semaphore-over-release",
    what: "a semaphore release without its over-release check",
    edits: [edit("lua/semaphore/release.lua", "  if not allowOver then\n", "  if false then\n")],
    finds: /the semaphore grew/,
    seeds: seeds("semaphore", 51_006),
  },
  {
    id: "release-not-owner",
    what: "a release that frees another owner's hold (release_refused's owner check removed)",
    edits: [
      edit(
        "lua/lib/release.lua",
        "  elseif redis.call('exists', name) == 1 then\n    return 3\n",
        "  elseif redis.call('exists', name) == 1 then\n    return\n",
      ),
      edit(
        "lua/lib/release.lua",
        "local count, current = tonumber(s[1]), s[2] or ''",
        "local count, current = tonumber(s[1]) or 1, s[2] or ''",
      ),
    ],
    finds: /both believed they held|Redis has no hold of its owner/,
    seeds: seeds("lock", 5, 51_001),
  },
  {
    id: "wall-clock-lease",
    what: "a lease timed on the wall clock alone (its expiry timer reads Date.now only), under a clock step back",
    edits: [
      edit(
        "src/lease/lease.ts",
        "return Math.min(this.#deadline - performance.now(), this.#expiresAt - Date.now());",
        "return this.#expiresAt - Date.now();",
      ),
    ],
    finds: /its signal has not aborted/,
    seeds: seeds("lock", 51_001),
  },
];
