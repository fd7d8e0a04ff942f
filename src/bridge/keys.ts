/**
 * Where the keys of a command are, for routing it on a Redis Cluster: Redis's own command table
 * (`COMMAND`, read once when the bridge connects) plus the commands whose keys move with their
 * arguments (`EVAL`/`EVALSHA` and their `numkeys`, `XREAD ... STREAMS`, ...), and the hash slot
 * of a key.
 *
 * @module
 */

// One copy of the slot function for the library and the bridge. Not the cluster-key-slot
// package: its 1.1.2 hashes `foo{}{bar}` as the tag `{bar` where Redis hashes the whole key (an
// empty first tag means no tag), so a bridge check against it would disagree with Redis.
import { keySlot } from "../slot.js";
import type { Command } from "./commands.js";

export { keySlot };

/** Key positions of one command as `COMMAND` reports them (argument 0 is the name). */
interface KeyPositions {
  /** First key's position; 0 when the command has no fixed keys. */
  first: number;
  /** Last key's position; negative counts from the end (-1: the last argument). */
  last: number;
  /** Distance between two keys. */
  step: number;
  /** Subcommands (`object|encoding`), whose positions replace the container's. */
  subcommands?: Map<string, KeyPositions>;
}

/**
 * Commands whose keys follow a count (`numkeys`) at a fixed position: the count's position.
 * A key before the count (`ZUNIONSTORE dest numkeys ...`) comes from the command table.
 */
const NUMKEYS_AT = new Map<string, number>([
  ["eval", 2],
  ["evalsha", 2],
  ["eval_ro", 2],
  ["evalsha_ro", 2],
  ["fcall", 2],
  ["fcall_ro", 2],
  ["blmpop", 2],
  ["bzmpop", 2],
  ["lmpop", 1],
  ["zmpop", 1],
  ["sintercard", 1],
  ["zintercard", 1],
  ["zdiff", 1],
  ["zinter", 1],
  ["zunion", 1],
  ["zdiffstore", 2],
  ["zinterstore", 2],
  ["zunionstore", 2],
]);

/** The key positions of every command a Redis server knows, from its `COMMAND` reply. */
export class CommandTable {
  readonly #commands: Map<string, KeyPositions>;

  private constructor(commands: Map<string, KeyPositions>) {
    this.#commands = commands;
  }

  /**
   * Reads a RESP2 `COMMAND` reply: one entry per command, `[name, arity, flags, first, last,
   * step, ...]`, with the subcommands at index 9 on Redis 7 and later. Malformed entries are
   * skipped.
   */
  static parse(reply: unknown): CommandTable {
    return new CommandTable(readEntries(reply));
  }

  /**
   * The keys of `command`, in order: `[]` for a command without keys (or unknown to Redis).
   * Extra keys a movable-keys command may take beyond its fixed ones (`SORT ... STORE dest`,
   * `GEORADIUS ... STORE dest`) are not listed.
   */
  keys(command: Command): string[] {
    const name = (command[0] ?? "").toLowerCase();
    const numkeysAt = NUMKEYS_AT.get(name);
    if (numkeysAt !== undefined) {
      const count = Number(command[numkeysAt]);
      const keys =
        Number.isSafeInteger(count) && count > 0
          ? command.slice(numkeysAt + 1, numkeysAt + 1 + count)
          : [];
      // ZUNIONSTORE and the like: the destination comes first.
      return numkeysAt === 2 && name.endsWith("store") && command[1] !== undefined
        ? [command[1], ...keys]
        : keys;
    }
    if (name === "xread" || name === "xreadgroup") {
      const at = command.findIndex((arg, i) => i > 0 && arg.toLowerCase() === "streams");
      if (at < 0) return [];
      const rest = command.slice(at + 1);
      return rest.slice(0, Math.floor(rest.length / 2));
    }
    let positions = this.#commands.get(name);
    const sub = command[1]?.toLowerCase();
    const subcommand =
      sub === undefined ? undefined : positions?.subcommands?.get(`${name}|${sub}`);
    if (subcommand) positions = subcommand;
    if (!positions || positions.first <= 0 || positions.step <= 0) return [];
    const last = positions.last < 0 ? command.length + positions.last : positions.last;
    const keys: string[] = [];
    for (let i = positions.first; i <= last && i < command.length; i += positions.step) {
      keys.push(command[i] as string);
    }
    return keys;
  }
}

function readEntries(reply: unknown): Map<string, KeyPositions> {
  const commands = new Map<string, KeyPositions>();
  if (!Array.isArray(reply)) return commands;
  for (const entry of reply) {
    if (!Array.isArray(entry) || entry.length < 6) continue;
    const [name, , , first, last, step] = entry as unknown[];
    if (typeof first !== "number" || typeof last !== "number" || typeof step !== "number") {
      continue;
    }
    const positions: KeyPositions = { first, last, step };
    const subcommands = entry[9];
    if (Array.isArray(subcommands) && subcommands.length > 0) {
      positions.subcommands = readEntries(subcommands);
    }
    commands.set(String(name).toLowerCase(), positions);
  }
  return commands;
}
