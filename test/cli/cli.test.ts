/**
 * The `edgelock` admin CLI (inspect, unlock, list) against the test bridge and Redis, through
 * the real `@upstash/redis` client the bin uses; plus the bin itself in a child process.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { KIND_LABEL, KINDS, type Kind } from "../../src/admin/kinds.js";
import { type Found, runCli } from "../../src/cli/main.js";
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
    expect(text.stdout).toMatch(
      new RegExp(`^"${name}" \\(lock\\) is locked, expires in \\d+ ms\\n`),
    );
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
    expect(result).toEqual({
      code: 0,
      stdout: `"${prefix}nobody" is free (nothing stored)\n`,
      stderr: "",
    });
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
      stdout: `deleted lock "${name}"\n`,
      stderr: "",
    });
    expect(await lock.isLocked()).toBe(false);
    expect(await lease.release()).toBe("expired");
    const again = await cli(["unlock", "--yes", name, "--json"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ name, kind: null, deleted: false });
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
    await raw.set(`${prefix}list:string`, "ada");
    const result = await cli(["list", `*${prefix}list:*`, "--json"]);
    expect(result.code).toBe(0);
    const found = JSON.parse(result.stdout) as { entries: LockInspection[]; truncated: boolean };
    expect(found.truncated).toBe(false);
    expect(found.entries.map((l) => l.name).sort()).toEqual(names);
    for (const l of found.entries) expect(l.holders).toHaveLength(1);

    const text = await cli(["list", `${prefix}list:*`]);
    expect(text.stdout.trim().split("\n").sort()).toEqual(
      names.map((n) =>
        expect.stringMatching(new RegExp(`^${n}  lock  expires in \\d+ ms  1 holder$`)),
      ),
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
    const found = JSON.parse(json.stdout) as { entries: LockInspection[]; truncated: boolean };
    expect(found.entries).toHaveLength(2);
    expect(found.truncated).toBe(true);
    const text = await cli(["list", `${prefix}limit:*`, "--limit", "2"]);
    expect(text.stdout).toContain("(stopped after 2 names: more may match)");
    expect(await cli(["list", `${prefix}nothing:*`])).toMatchObject({
      code: 0,
      stdout: "nothing found\n",
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
    [["inspect"], /the name is required/],
    [["inspect", "a", "b"], /unexpected argument "b"/],
    [["inspect", "a{b}"], /name/],
    [["list", "--limit", "0"], /--limit must be an integer from 1 to 10000/],
    [["inspect", "a", "--limit", "3"], /--limit only applies to list/],
    [["inspect", "a", "--force"], /Unknown option '--force'/],
    [["inspect", "a", "--kind", "mutex"], /--kind must be one of lock, fair-lock, fenced-lock/],
    [["inspect", "a", "--kind", "fair"], /--kind must be one of lock, fair-lock/],
    [["list", "--kind", "lock"], /--kind only applies to inspect and unlock/],
    [["inspect", "a", "--all"], /--all only applies to list/],
  ])("exits 2 with the usage for %j", async (argv, message) => {
    const result = await cli(argv);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).toContain("usage: edgelock inspect <name>");
  });

  it("--json: every error is a JSON document on stdout, with the exit code, nothing on stderr", async () => {
    const usage = await cli(["inspect", "a{b}", "--json"]);
    const unknown = await cli(["inspect", "a", "--force", "--json"]);
    const name = `${prefix}json-refused`;
    await setUp("semaphore", name);
    const refused = await cli(["unlock", name, "--yes", "--json"]);
    const down = await cli(["inspect", "x", "--json"], {
      UPSTASH_REDIS_REST_URL: "http://127.0.0.1:1",
      UPSTASH_REDIS_REST_TOKEN: "t0ken",
    });
    for (const [result, exit, reason] of [
      [usage, 2, "usage"],
      [unknown, 2, "usage"],
      [refused, 3, "refused"],
      [down, 1, "redis"],
    ] as const) {
      expect(result.code).toBe(exit);
      expect(result.stderr).toBe("");
      const { error } = JSON.parse(result.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ exit, reason });
      expect(typeof error.message).toBe("string");
    }
    expect(JSON.parse(refused.stdout).error.message).toContain("--kind semaphore");
    expect(JSON.parse(down.stdout).error.code).toBe("TRANSPORT");
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
    // The library's hint, not the client's raw "Unauthorized, command was: [...]".
    expect(refused.stderr).toMatch(/Unauthorized \(HTTP 401\/403: check the REST token/);
    expect(refused.stderr).not.toContain("command was");
    const inspected = await cli(["inspect", "x"], {
      UPSTASH_REDIS_REST_URL: sharedBridge().url,
      UPSTASH_REDIS_REST_TOKEN: token,
    });
    expect(inspected.code).toBe(1);
    expect(inspected.stderr).toMatch(/UPSTASH_REDIS_REST_TOKEN/);
    expect(inspected.stderr).not.toContain("command was");
    for (const r of [down, refused, inspected]) expect(r.stderr + r.stdout).not.toContain(token);
  });

  it("the bin runs as a process: --help, and exit code 2 without configuration", async () => {
    const run = promisify(execFile);
    const bin = ["--import", "tsx", "src/cli/edgelock.ts"];
    const help = await run(process.execPath, [...bin, "--help"]);
    expect(help.stdout).toContain("usage: edgelock inspect <name> [--kind <kind>] [--json]");
    expect(help.stdout).toContain("3 refused");
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

/** One primitive of each kind the CLI tells apart, set up through the library. */
async function setUp(kind: Kind, name: string): Promise<() => Promise<unknown>> {
  const rec = recordingEdgeLock();
  const { edgelock } = rec;
  switch (kind) {
    case "lock":
    case "cron-mark": {
      const lock = edgelock.getLock(name);
      await lock.tryLock({ leaseTime: 30_000 });
      return () => lock.forceUnlock();
    }
    case "fair-lock": {
      // A fair lock is told apart by its queue: hold it and queue a second owner behind it.
      const lock = edgelock.getFairLock(name);
      await lock.tryLock({ leaseTime: 30_000 });
      const waiting = lock.tryLock({ leaseTime: 1_000, waitTime: 20_000 });
      await rec.until((e) => e.type === "waiting" && e.name === name);
      return async () => {
        await lock.forceUnlock();
        const lease = await waiting;
        await lease?.release();
      };
    }
    case "fenced-lock": {
      const lock = edgelock.getFencedLock(name);
      await lock.tryLock({ leaseTime: 30_000 });
      return () => lock.forceUnlock();
    }
    case "read-write-lock": {
      const rw = edgelock.getReadWriteLock(name);
      await rw.readLock().tryLock({ leaseTime: 30_000 });
      return () => rw.readLock().forceUnlock();
    }
    case "semaphore": {
      const semaphore = edgelock.getSemaphore(name);
      await semaphore.trySetPermits(3);
      await semaphore.tryAcquire();
      return () => semaphore.delete();
    }
    case "permit-expirable-semaphore": {
      const semaphore = edgelock.getPermitExpirableSemaphore(name);
      await semaphore.trySetPermits(2);
      await semaphore.tryAcquire({ leaseTime: 30_000 });
      return () => semaphore.delete();
    }
    case "count-down-latch": {
      const latch = edgelock.getCountDownLatch(name);
      await latch.trySetCount(2);
      return () => latch.delete();
    }
    case "webhook-mark": {
      const key = edgelock.getIdempotencyKey(name);
      const claim = await key.claim({ leaseTime: 30_000 });
      if (claim.status !== "acquired") throw new Error("not claimed");
      await key.complete(claim.lease, 60_000);
      return () => raw.del(`edgelock_done:{${name}}`);
    }
  }
}

/** What `inspect` prints for each kind, after the quoted name. */
const INSPECT_TEXT: Record<Kind, RegExp> = {
  lock: /^ \(lock\) is locked, expires in \d+ ms\n {2}owner \S+ {2}holds 1 time\n$/,
  "cron-mark": /^ \(cron mark\) is locked, expires in \d+ ms\n/,
  "fair-lock": /^ \(fair lock\) is locked, expires in \d+ ms\n/,
  "fenced-lock": /^ \(fenced lock\) is locked, expires in \d+ ms\n/,
  "read-write-lock": /^ \(read-write lock\) is locked for read, expires in \d+ ms\n/,
  semaphore: /^ \(semaphore\): 2 of 3 permits available, 0 waiters, no expiry\n$/,
  "permit-expirable-semaphore":
    /^ \(permit-expirable semaphore\): 1 of 2 permits available, 1 acquired, 0 waiters, no expiry\n {2}permit [0-9a-f]+ {2}expires in \d+ ms\n$/,
  "count-down-latch": /^ \(count-down latch\): count 2, 0 waiters, no expiry\n$/,
  "webhook-mark": /^ \(webhook mark\): delivery completed, expires in \d+ ms\n$/,
};

const nameOf = (kind: Kind) =>
  kind === "cron-mark" ? `${prefix}kind:${kind}#1764000000000` : `${prefix}kind:${kind}`;

describe("every kind", () => {
  it.each(KINDS)("inspect tells a %s by its keys, in text and --json", async (kind) => {
    const name = nameOf(kind);
    const cleanUp = await setUp(kind, name);
    try {
      const text = await cli(["inspect", name]);
      expect(text.stderr).toBe("");
      expect(text.code).toBe(0);
      expect(text.stdout.startsWith(`"${name}"`)).toBe(true);
      expect(text.stdout.slice(name.length + 2)).toMatch(INSPECT_TEXT[kind]);
      const json = await cli(["inspect", name, "--json"]);
      const parsed = JSON.parse(json.stdout) as Found;
      expect(parsed).toMatchObject({ kind, name });
      // Who waits: the fair lock's queue, the other locks' registry (test/cli/queues.test.ts).
      expect("queue" in parsed).toBe(kind === "fair-lock");
      expect("waiting" in parsed).toBe(
        ["lock", "fenced-lock", "read-write-lock", "cron-mark"].includes(kind),
      );
      // Told the right kind, the same; told another, refused with 3.
      expect((await cli(["inspect", name, "--kind", kind])).code).toBe(0);
      // A count-down latch's keys are never another kind's, nor a lock's a latch's.
      const other = kind === "count-down-latch" ? "lock" : "count-down-latch";
      const wrong = await cli(["inspect", name, "--kind", other]);
      expect(wrong.code).toBe(3);
      expect(wrong.stderr).toContain(`not a ${KIND_LABEL[other]}: nothing was changed`);
    } finally {
      await cleanUp();
    }
  });

  it.each(KINDS)("unlock deletes a %s only when it is a lock or told the kind", async (kind) => {
    const name = nameOf(kind);
    const cleanUp = await setUp(kind, name);
    try {
      const isLock = ["lock", "fair-lock", "fenced-lock", "read-write-lock", "cron-mark"].includes(
        kind,
      );
      if (!isLock) {
        const refused = await cli(["unlock", name, "--yes"]);
        expect(refused.code).toBe(3);
        expect(refused.stdout).toBe("");
        expect(refused.stderr).toContain(`not a lock: pass --kind ${kind} to delete it`);
        // Nothing changed.
        expect(JSON.parse((await cli(["inspect", name, "--json"])).stdout)).toMatchObject({ kind });
      }
      const wrongKind = kind === "count-down-latch" ? "lock" : "count-down-latch";
      expect((await cli(["unlock", name, "--yes", "--kind", wrongKind])).code).toBe(3);
      const args = isLock ? ["unlock", name, "--yes"] : ["unlock", name, "--yes", "--kind", kind];
      const done = await cli([...args, "--json"]);
      expect(done.code).toBe(0);
      expect(JSON.parse(done.stdout)).toEqual({ name, kind, deleted: true });
      // Gone (a fenced lock keeps its token key, so it reads as a free fenced lock); a fair
      // lock's queued waiter takes it at once.
      const after = JSON.parse((await cli(["inspect", name, "--json"])).stdout) as Found;
      if (kind !== "fair-lock") expect(after.holders).toEqual([]);
      if (kind !== "fair-lock" && kind !== "fenced-lock") expect(after.ttl).toBe(-2);
    } finally {
      await cleanUp();
    }
  });

  it("unlock says in text which kind it deleted", async () => {
    const name = `${prefix}text:latch`;
    await setUp("count-down-latch", name);
    expect(await cli(["unlock", name, "--yes", "--kind", "count-down-latch"])).toEqual({
      code: 0,
      stdout: `deleted count-down latch "${name}"\n`,
      stderr: "",
    });
  });

  it("--kind names a kind whose keys look like another's: a fair lock nobody waits on", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}quiet-fair`;
    const fair = edgelock.getFairLock(name);
    const lease = await fair.tryLock({ leaseTime: 30_000 });
    if (!lease) throw new Error("not acquired");
    // Stored exactly as a lock: told without --kind, it reads as one.
    expect(JSON.parse((await cli(["inspect", name, "--json"])).stdout)).toMatchObject({
      kind: "lock",
    });
    const seen = await cli(["inspect", name, "--kind", "fair-lock", "--json"]);
    expect(JSON.parse(seen.stdout)).toMatchObject({ kind: "fair-lock", name, locked: true });
    const done = await cli(["unlock", name, "--yes", "--kind", "fair-lock", "--json"]);
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toEqual({ name, kind: "fair-lock", deleted: true });
    expect(await fair.isLocked()).toBe(false);
  });

  it("an empty name: the same kind (null) from inspect and unlock", async () => {
    const name = `${prefix}empty`;
    const seen = JSON.parse((await cli(["inspect", name, "--json"])).stdout) as unknown;
    expect(seen).toEqual({ name, kind: null, ttl: -2, holders: [] });
    const done = JSON.parse((await cli(["unlock", name, "--yes", "--json"])).stdout) as unknown;
    expect(done).toEqual({ name, kind: null, deleted: false });
  });

  it("list shows every kind with a kind column; cron and webhook marks only with --all", async () => {
    const cleanUps = await Promise.all(
      KINDS.map((kind) => setUp(kind, nameOf(kind).replace(":kind:", ":mix:"))),
    );
    try {
      const json = await cli(["list", `${prefix}mix:*`, "--json"]);
      expect(json.code).toBe(0);
      const found = JSON.parse(json.stdout) as { entries: { kind: Kind }[] };
      const shown = found.entries.map((e) => e.kind).sort();
      // A fair lock with a queued waiter; the others as set up.
      expect(shown).toEqual(KINDS.filter((k) => k !== "cron-mark" && k !== "webhook-mark").sort());
      const all = JSON.parse((await cli(["list", `${prefix}mix:*`, "--all", "--json"])).stdout) as {
        entries: Found[];
      };
      expect(all.entries.map((e) => e.kind).sort()).toEqual([...KINDS].sort());
      // One request per name: list leaves who waits to inspect.
      for (const e of all.entries) expect(e.queue ?? e.waiting).toBeUndefined();
      const text = await cli(["list", `${prefix}mix:*`]);
      expect(text.stdout).toMatch(
        /mix:semaphore {2}semaphore {2}no expiry {2}2 of 3 permits available/,
      );
      expect(text.stdout).toMatch(
        /mix:count-down-latch {2}count-down-latch {2}no expiry {2}count 2/,
      );
      expect(text.stdout).not.toContain("cron-mark");
    } finally {
      for (const cleanUp of cleanUps) await cleanUp();
    }
  });

  it("a name holding a Redis type no primitive uses is refused with 3, and left out of list", async () => {
    const name = `${prefix}foreign`;
    await raw.rPush(name, "x");
    const result = await cli(["inspect", name]);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain("holds a Redis list, which no edgelock primitive uses");
    const listed = await cli(["list", `${prefix}foreign*`]);
    expect(listed.stdout).toBe("nothing found\n");
    await raw.del(name);
  });
});
