/**
 * `edgelock inspect` shows who waits: the fair lock's queue in order (Redisson's LIST and ZSET,
 * edgelock's registry of its queued owners) and the registered waiters of the other locks
 * (`edgelock_waiting:{<name>}`), in text and `--json`, against the test bridge and Redis.
 */
import { describe, expect, it } from "vitest";
import { MAX_LISTED_WAITERS, parseRegistration } from "../../src/admin/queues.js";
import type { Found } from "../../src/cli/main.js";
import { runCli } from "../../src/cli/main.js";
import type { Lease } from "../../src/index.js";
import { keyPrefix, sharedBridge, usePrivateBridge, useRawRedis } from "../support/env.js";
import { recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();

async function cli(argv: string[], { url, token } = sharedBridge()) {
  let stdout = "";
  let stderr = "";
  const code = await runCli(argv, {
    env: { UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: token },
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
  });
  return { code, stdout, stderr };
}

async function inspected(name: string, ...flags: string[]): Promise<Found> {
  const result = await cli(["inspect", name, ...flags, "--json"]);
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as Found;
}

/** Polls `check` until it is true (what the waiters wrote has landed). */
async function until(check: () => Promise<boolean>, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const queueKey = (name: string) => `redisson_lock_queue:{${name}}`;
const slotsKey = (name: string) => `redisson_lock_timeout:{${name}}`;
const oursKey = (name: string) => `edgelock_waiters:{${name}}`;
const waitingKey = (name: string) => `edgelock_waiting:{${name}}`;

describe("inspect: a fair lock's queue", () => {
  it("lists the queued owners in order, edgelock's with their wait, a Redisson client's apart", async () => {
    const name = `${prefix}fair`;
    const rec = recordingEdgeLock();
    const fair = rec.edgelock.getFairLock(name);
    const holder = await fair.tryLock({ leaseTime: 30_000, owner: "holder:1" });
    if (!holder) throw new Error("not acquired");
    // Queued one after the other, so that the order is known.
    const first = fair.tryLock({ leaseTime: 1_000, waitTime: 15_000, owner: "first:1" });
    await until(async () => (await raw.lLen(queueKey(name))) === 1);
    const second = fair.tryLock({ leaseTime: 1_000, waitTime: 15_000, owner: "second:1" });
    await until(async () => (await raw.lLen(queueKey(name))) === 2);
    // A Redisson client queued behind them: in the LIST and the ZSET, not in our registry.
    const jvmSlot = Date.now() + 600_000;
    await raw.rPush(queueKey(name), "8c1f-jvm:41");
    await raw.zAdd(slotsKey(name), { score: jvmSlot, value: "8c1f-jvm:41" });
    try {
      const seen = await inspected(name);
      expect(seen).toMatchObject({ kind: "fair-lock", name, locked: true });
      expect(seen.holders).toEqual([{ owner: "holder:1", holdCount: 1 }]);
      const queue = seen.queue;
      expect(queue?.count).toBe(3);
      expect(queue?.entries.map((q) => q.owner)).toEqual(["first:1", "second:1", "8c1f-jvm:41"]);
      const ours = await raw.hGetAll(oursKey(name));
      for (const q of queue?.entries.slice(0, 2) ?? []) {
        expect(q.redisson).toBe(false);
        // The wait its registry entry names, without the time recorded after it.
        expect(String(ours[q.owner])).toMatch(new RegExp(`^${q.waiter}:\\d+$`));
        expect(q.ttl).toBeGreaterThan(0);
      }
      const jvm = queue?.entries[2];
      expect(jvm).toMatchObject({ waiter: null, redisson: true });
      // Redisson's own score, read on the server's clock.
      expect(jvm?.ttl).toBeGreaterThan(590_000);
      expect(jvm?.ttl).toBeLessThanOrEqual(600_000 + 1_000);

      const text = await cli(["inspect", name]);
      expect(text.code).toBe(0);
      const lines = text.stdout.trimEnd().split("\n");
      expect(lines).toEqual([
        expect.stringMatching(/^".*" \(fair lock\) is locked, expires in \d+ ms$/),
        "  owner holder:1  holds 1 time",
        "  queue: 3 owners waiting, served in this order",
        expect.stringMatching(
          /^ {2}1\. owner first:1 {2}waiter \S+:\S+ {2}place lapses in \d+ ms$/,
        ),
        expect.stringMatching(/^ {2}2\. owner second:1 {2}waiter \S+ {2}place lapses in \d+ ms$/),
        expect.stringMatching(
          /^ {2}3\. owner 8c1f-jvm:41 {2}\(a Redisson client\) {2}place lapses in \d+ ms$/,
        ),
      ]);
    } finally {
      await raw.lRem(queueKey(name), 0, "8c1f-jvm:41");
      await raw.zRem(slotsKey(name), "8c1f-jvm:41");
      await fair.forceUnlock();
      // Each served in turn: the next one's hand-off waits for this release.
      await (await first)?.release();
      await (await second)?.release();
      await holder.release();
    }
  });

  it("a slot kept only in Redisson's ZSET, a lapsed one, and one with no time at all", async () => {
    const name = `${prefix}fair-odd`;
    const { edgelock } = recordingEdgeLock();
    const fair = edgelock.getFairLock(name);
    const holder = await fair.tryLock({ leaseTime: 30_000 });
    if (!holder) throw new Error("not acquired");
    // Written as the scripts (or an older version of them) may have left them.
    await raw.rPush(queueKey(name), ["bare:1", "lapsed:1", "timeless:1"]);
    await raw.zAdd(slotsKey(name), [
      { score: Date.now() + 60_000, value: "bare:1" },
      { score: 1, value: "lapsed:1" },
    ]);
    // A waiter id without the time after it: its slot is its ZSET score.
    await raw.hSet(oursKey(name), { "bare:1": "c0ffee:a7", "lapsed:1": "c0ffee:b8:1" });
    try {
      const queue = (await inspected(name, "--kind", "fair-lock")).queue;
      expect(queue?.entries).toEqual([
        { owner: "bare:1", waiter: "c0ffee:a7", redisson: false, ttl: expect.any(Number) },
        { owner: "lapsed:1", waiter: "c0ffee:b8", redisson: false, ttl: expect.any(Number) },
        { owner: "timeless:1", waiter: null, redisson: true, ttl: null },
      ]);
      expect(queue?.entries[0]?.ttl).toBeGreaterThan(50_000);
      expect(queue?.entries[1]?.ttl).toBeLessThan(0);
      const text = (await cli(["inspect", name, "--kind", "fair-lock"])).stdout;
      expect(text).toContain("1. owner bare:1  waiter c0ffee:a7  place lapses in ");
      expect(text).toContain("2. owner lapsed:1  waiter c0ffee:b8  place lapsed\n");
      expect(text).toContain("3. owner timeless:1  (a Redisson client)  place: no time recorded\n");
    } finally {
      await raw.del([queueKey(name), slotsKey(name), oursKey(name)]);
      await holder.release();
    }
  });

  it(`lists the first ${MAX_LISTED_WAITERS} and says how many more wait`, async () => {
    const name = `${prefix}fair-long`;
    const { edgelock } = recordingEdgeLock();
    const fair = edgelock.getFairLock(name);
    const holder = await fair.tryLock({ leaseTime: 30_000 });
    if (!holder) throw new Error("not acquired");
    const owners = Array.from({ length: MAX_LISTED_WAITERS + 3 }, (_, i) => `jvm:${i}`);
    await raw.rPush(queueKey(name), owners);
    await raw.zAdd(
      slotsKey(name),
      owners.map((value) => ({ score: Date.now() + 60_000, value })),
    );
    try {
      const queue = (await inspected(name)).queue;
      expect(queue?.count).toBe(MAX_LISTED_WAITERS + 3);
      expect(queue?.entries.map((q) => q.owner)).toEqual(owners.slice(0, MAX_LISTED_WAITERS));
      const text = (await cli(["inspect", name])).stdout;
      expect(text).toContain(`  queue: ${MAX_LISTED_WAITERS + 3} owners waiting`);
      expect(text).toContain(`  ${MAX_LISTED_WAITERS}. owner jvm:${MAX_LISTED_WAITERS - 1}  `);
      expect(text.endsWith("  (and 3 more)\n")).toBe(true);
    } finally {
      await raw.del([queueKey(name), slotsKey(name)]);
      await holder.release();
    }
  });
});

describe("inspect: a lock's registered waiters", () => {
  it("lists the waiters of a held lock in the order releases serve them", async () => {
    const name = `${prefix}lock`;
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(name);
    const holder = await lock.tryLock({ leaseTime: 30_000 });
    if (!holder) throw new Error("not acquired");
    const waits: Promise<Lease | null>[] = [];
    for (const owner of ["w1:1", "w2:1"]) {
      waits.push(lock.tryLock({ leaseTime: 1_000, waitTime: 15_000, owner }));
      const n = waits.length;
      await until(async () => (await raw.zCard(waitingKey(name))) === n);
    }
    try {
      const seen = await inspected(name);
      expect(seen).toMatchObject({ kind: "lock", name, locked: true });
      const stored = await raw.zRangeWithScores(waitingKey(name), 0, -1);
      expect(seen.waiting?.count).toBe(2);
      // Registration order; each entry as the scripts wrote it, read by the one parser.
      expect(seen.waiting?.entries.map((w) => w.waiter)).toEqual(
        stored.map((s) => String(s.value).split("|")[0]),
      );
      for (const [i, w] of (seen.waiting?.entries ?? []).entries()) {
        expect(w.entry).toBeUndefined();
        expect(w.ttl).toBeGreaterThan(0);
        if (w.owner !== null) expect(w.owner).toBe(["w1:1", "w2:1"][i]);
      }
      const text = (await cli(["inspect", name])).stdout;
      expect(text).toMatch(
        /\n {2}waiters: 2 registered, woken in this order\n {2}1\. waiter \S+.* {2}registration lapses in \d+ ms\n {2}2\. waiter /,
      );
    } finally {
      await lock.forceUnlock();
      for (const wait of waits) await (await wait)?.release();
    }
  });

  it("reads every entry format, keeps one it does not know whole, and bounds the list", async () => {
    const name = `${prefix}lock-formats`;
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getFencedLock(name);
    const holder = await lock.tryLock({ leaseTime: 30_000 });
    if (!holder) throw new Error("not acquired");
    const at = Date.now();
    await raw.zAdd(waitingKey(name), [
      { score: at + 10_000, value: "c1:w1" },
      { score: at + 20_000, value: "c2:w2|5000|c2:t|x" },
      { score: at + 30_000, value: "c3:w3|soon" },
      { score: 1, value: "c4:w4" },
      ...Array.from({ length: MAX_LISTED_WAITERS }, (_, i) => ({
        score: at + 40_000 + i,
        value: `filler:${i}`,
      })),
    ]);
    try {
      const seen = await inspected(name);
      expect(seen.kind).toBe("fenced-lock");
      expect(seen.waiting?.count).toBe(MAX_LISTED_WAITERS + 4);
      expect(seen.waiting?.entries).toHaveLength(MAX_LISTED_WAITERS);
      // By the time each registration lapses: the lapsed one first.
      expect(seen.waiting?.entries.slice(0, 4)).toEqual([
        { waiter: "c4:w4", owner: null, leaseTime: null, ttl: expect.any(Number) },
        { waiter: "c1:w1", owner: null, leaseTime: null, ttl: expect.any(Number) },
        { waiter: "c2:w2", owner: "c2:t|x", leaseTime: 5000, ttl: expect.any(Number) },
        {
          waiter: "c3:w3",
          owner: null,
          leaseTime: null,
          ttl: expect.any(Number),
          entry: "c3:w3|soon",
        },
      ]);
      const text = (await cli(["inspect", name])).stdout;
      expect(text).toContain(
        `  waiters: ${MAX_LISTED_WAITERS + 4} registered, woken in this order`,
      );
      expect(text).toMatch(/\n {2}2\. waiter c1:w1 {2}registration lapses in \d+ ms\n/);
      expect(text).toMatch(
        /\n {2}3\. waiter c2:w2 {2}hand-off to owner c2:t\|x for 5000 ms {2}registration lapses in \d+ ms\n/,
      );
      expect(text).toMatch(
        /\n {2}4\. waiter c3:w3 {2}registration lapses in \d+ ms {2}\(entry "c3:w3\|soon"\)\n/,
      );
      expect(text).toContain("\n  1. waiter c4:w4  registration lapsed\n");
      expect(text.endsWith("  (and 4 more)\n")).toBe(true);
    } finally {
      await raw.del(waitingKey(name));
      await lock.forceUnlock();
    }
  });

  it("a lock nobody waits on prints no waiter line; --json says none", async () => {
    const name = `${prefix}alone`;
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(name);
    const holder = await lock.tryLock({ leaseTime: 30_000 });
    if (!holder) throw new Error("not acquired");
    try {
      expect((await inspected(name)).waiting).toEqual({ count: 0, entries: [] });
      expect((await cli(["inspect", name])).stdout).toMatch(/ holds 1 time\n$/);
      // A fair lock nobody queues for, inspected as one: an empty queue, no queue line.
      expect((await inspected(name, "--kind", "fair-lock")).queue).toEqual({
        count: 0,
        entries: [],
      });
      expect((await cli(["inspect", name, "--kind", "fair-lock"])).stdout).toMatch(
        / holds 1 time\n$/,
      );
    } finally {
      await holder.release();
    }
  });

  it("a failed read of the waiters exits 1 with the library's error, its code in --json", async () => {
    const name = `${prefix}unread`;
    const { edgelock } = recordingEdgeLock();
    const holder = await edgelock.getLock(name).tryLock({ leaseTime: 30_000 });
    if (!holder) throw new Error("not acquired");
    // Only the waiters' read (its ZCARD) fails; the kind and the holders are read.
    await bridge.control.setFaults({ rules: [{ action: "fail", match: "zcard" }] });
    try {
      const { code, stdout } = await cli(["inspect", name, "--json"], bridge);
      expect(code).toBe(1);
      const { error } = JSON.parse(stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ exit: 1, reason: "redis", code: "TRANSPORT" });
      expect(String(error.message)).not.toContain("command was");
    } finally {
      await bridge.control.clearFaults();
      await holder.release();
    }
  });
});

describe("parseRegistration", () => {
  it.each([
    ["c:w", { waiter: "c:w", owner: null, leaseTime: null, ttl: 500 }],
    ["c:w|30000|c:t", { waiter: "c:w", owner: "c:t", leaseTime: 30_000, ttl: 500 }],
    ["c:w|30000|a|b", { waiter: "c:w", owner: "a|b", leaseTime: 30_000, ttl: 500 }],
    ["c:w|30000|", { waiter: "c:w", owner: null, leaseTime: null, ttl: 500, entry: "c:w|30000|" }],
    ["|30000|c:t", { waiter: "", owner: null, leaseTime: null, ttl: 500, entry: "|30000|c:t" }],
    ["", { waiter: "", owner: null, leaseTime: null, ttl: 500, entry: "" }],
  ])("%j", (member, expected) => {
    expect(parseRegistration(member, "1500", 1_000)).toEqual(expected);
  });

  it("a score that is not a number gives no time", () => {
    expect(parseRegistration("c:w", "inf", 1_000).ttl).toBeNull();
  });
});
