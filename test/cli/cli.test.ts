/**
 * The `edgelock` admin CLI (inspect, unlock, list) against the test bridge and Redis, through
 * the real `@upstash/redis` client the bin uses; plus the bin itself in a child process.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { runCli } from "../../src/cli/main.js";
import type { LockInspection } from "../../src/index.js";
import { keyPrefix, sharedBridge, useRawRedis } from "../support/env.js";
import { recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

/** Runs the CLI in-process with the shared bridge's URL and token (or `env`). */
async function cli(argv: string[], env?: Record<string, string | undefined>) {
  const { url, token } = sharedBridge();
  let stdout = "";
  let stderr = "";
  const code = await runCli(argv, {
    env: env ?? { UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: token },
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
  });
  return { code, stdout, stderr };
}

async function held(name: string, holds = 1) {
  const { edgelock } = recordingEdgeLock();
  const lock = edgelock.getLock(name);
  const lease = await lock.tryLock({ leaseTime: 30_000 });
  if (!lease) throw new Error(`${name} is busy`);
  for (let i = 1; i < holds; i++) await lock.tryLock({ leaseTime: 30_000, owner: lease.owner });
  return { lock, lease };
}

describe("edgelock inspect", () => {
  it("prints the holder, its hold count and the TTL; --json prints lock.inspect()", async () => {
    const name = `${prefix}inspect`;
    const { lock, lease } = await held(name, 2);
    const text = await cli(["inspect", name]);
    expect(text.code).toBe(0);
    expect(text.stderr).toBe("");
    expect(text.stdout).toMatch(new RegExp(`^"${name}" is locked, expires in \\d+ ms\\n`));
    expect(text.stdout).toContain(`owner ${lease.owner}  holds 2 times`);

    const json = await cli(["inspect", name, "--json"]);
    expect(json.code).toBe(0);
    const parsed = JSON.parse(json.stdout) as LockInspection;
    expect(parsed).toMatchObject({ kind: "lock", name, locked: true });
    expect(parsed.holders).toEqual((await lock.inspect()).holders);
    expect(parsed.ttl).toBeGreaterThan(0);
    await lock.forceUnlock();
  });

  it("says when a lock is free", async () => {
    const result = await cli(["inspect", `${prefix}nobody`]);
    expect(result).toEqual({ code: 0, stdout: `"${prefix}nobody" is free\n`, stderr: "" });
  });
});

describe("edgelock unlock", () => {
  it("refuses without --yes, and leaves the lock alone", async () => {
    const name = `${prefix}guarded`;
    const { lock } = await held(name);
    const result = await cli(["unlock", name]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("without --yes");
    expect(await lock.isLocked()).toBe(true);
    await lock.forceUnlock();
  });

  it("with --yes deletes the lock whoever holds it (forceUnlock)", async () => {
    const name = `${prefix}forced`;
    const { lock, lease } = await held(name, 3);
    expect(await cli(["unlock", name, "--yes"])).toEqual({
      code: 0,
      stdout: `unlocked "${name}"\n`,
      stderr: "",
    });
    expect(await lock.isLocked()).toBe(false);
    expect(await lease.release()).toBe("expired");
    const again = await cli(["unlock", "--yes", name, "--json"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ name, unlocked: false });
  });
});

describe("edgelock list", () => {
  it("lists lock names only: no helper keys, no other hashes", async () => {
    const names = [`${prefix}list:a`, `${prefix}list:b`, `${prefix}list:c`];
    const leases = await Promise.all(names.map((n) => held(n)));
    // Look-alikes that are not locks: helper keys with the lock's name in braces (a Redisson
    // one as a HASH), a hash without hold counts, a string.
    await raw.hSet(`redisson_lock_timeout:{${prefix}list:a}`, { x: "1" });
    await raw.hSet(`${prefix}list:profile`, { name: "ada" });
    await raw.set(`${prefix}list:string`, "1");
    const result = await cli(["list", `*${prefix}list:*`, "--json"]);
    expect(result.code).toBe(0);
    const found = JSON.parse(result.stdout) as { locks: LockInspection[]; truncated: boolean };
    expect(found.truncated).toBe(false);
    expect(found.locks.map((l) => l.name).sort()).toEqual(names);
    for (const l of found.locks) expect(l.holders).toHaveLength(1);

    const text = await cli(["list", `${prefix}list:*`]);
    expect(text.stdout.trim().split("\n").sort()).toEqual(
      names.map((n) => expect.stringMatching(new RegExp(`^${n}  expires in \\d+ ms  1 holder$`))),
    );
    for (const { lock } of leases) await lock.forceUnlock();
    await raw.del([
      `redisson_lock_timeout:{${prefix}list:a}`,
      `${prefix}list:profile`,
      `${prefix}list:string`,
    ]);
  });

  it("stops at --limit and says more may match", async () => {
    const names = Array.from({ length: 4 }, (_, i) => `${prefix}limit:${i}`);
    const leases = await Promise.all(names.map((n) => held(n)));
    const json = await cli(["list", `${prefix}limit:*`, "--limit", "2", "--json"]);
    const found = JSON.parse(json.stdout) as { locks: LockInspection[]; truncated: boolean };
    expect(found.locks).toHaveLength(2);
    expect(found.truncated).toBe(true);
    const text = await cli(["list", `${prefix}limit:*`, "--limit", "2"]);
    expect(text.stdout).toContain("(stopped after 2 names: more may match)");
    expect(await cli(["list", `${prefix}nothing:*`])).toMatchObject({
      code: 0,
      stdout: "no locks found\n",
    });
    for (const { lock } of leases) await lock.forceUnlock();
  });
});

describe("edgelock usage and configuration", () => {
  it("names the missing environment variables", async () => {
    const none = await cli(["inspect", "x"], {});
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("set UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN");
    const noToken = await cli(["inspect", "x"], { UPSTASH_REDIS_REST_URL: "http://127.0.0.1:1" });
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toContain("set UPSTASH_REDIS_REST_TOKEN (");
  });

  it.each([
    [[], /a command is required/],
    [["lock", "x"], /unknown command "lock"/],
    [["inspect"], /the lock name is required/],
    [["inspect", "a", "b"], /unexpected argument "b"/],
    [["inspect", "a{b}"], /name/],
    [["list", "--limit", "0"], /--limit must be an integer from 1 to 10000/],
    [["inspect", "a", "--limit", "3"], /--limit only applies to list/],
    [["inspect", "a", "--force"], /Unknown option '--force'/],
  ])("exits 2 with the usage for %j", async (argv, message) => {
    const result = await cli(argv);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).toContain("usage: edgelock inspect <name>");
  });

  it("exits 1 when Redis cannot be reached or refuses the token, without printing the token", async () => {
    const token = "secret-token-6f1d";
    const down = await cli(["inspect", "x"], {
      UPSTASH_REDIS_REST_URL: "http://127.0.0.1:1",
      UPSTASH_REDIS_REST_TOKEN: token,
    });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^edgelock: /);
    const refused = await cli(["list"], {
      UPSTASH_REDIS_REST_URL: sharedBridge().url,
      UPSTASH_REDIS_REST_TOKEN: token,
    });
    expect(refused.code).toBe(1);
    for (const r of [down, refused]) expect(r.stderr + r.stdout).not.toContain(token);
  });

  it("the bin runs as a process: --help, and exit code 2 without configuration", async () => {
    const run = promisify(execFile);
    const bin = ["--import", "tsx", "src/cli/edgelock.ts"];
    const help = await run(process.execPath, [...bin, "--help"]);
    expect(help.stdout).toContain("usage: edgelock inspect <name> [--json]");
    const env = { ...process.env };
    delete env.UPSTASH_REDIS_REST_URL;
    delete env.UPSTASH_REDIS_REST_TOKEN;
    const failed = await run(process.execPath, [...bin, "inspect", "x"], { env }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toContain("UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN");
  });
});
