/**
 * `lock.inspect()`: holders, hold counts and TTL in one read-only request, through the real
 * `@upstash/redis` client (whose reply decoding would turn an owner "123" into a number).
 */
import { describe, expect, it } from "vitest";
import {
  type Inspectable,
  type LockInspection,
  MAX_INSPECT_HOLDERS,
  TransportError,
} from "../../../src/index.js";
import { lockHolders } from "../../../src/lua.gen.js";
import { bridgeRedis, keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();

describe("lock.inspect()", () => {
  it("reports a free lock", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}free`;
    expect(await edgelock.getLock(name).inspect()).toEqual({
      kind: "lock",
      name,
      locked: false,
      ttl: -2,
      holders: [],
    });
  });

  it("reports the holder, its hold count and the remaining lease", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}held`);
    const first = await lock.tryLock({ leaseTime: 10_000 });
    if (!first) throw new Error("not acquired");
    const second = await lock.tryLock({ leaseTime: 10_000, owner: first.owner });
    if (!second) throw new Error("re-entry refused");
    const seen = await lock.inspect();
    expect(seen).toMatchObject({ kind: "lock", name: lock.name, locked: true });
    expect(seen.holders).toEqual([{ owner: first.owner, holdCount: 2 }]);
    expect(seen.ttl).toBeGreaterThan(0);
    expect(seen.ttl).toBeLessThanOrEqual(10_000);
    expect(seen.ttl).toBeGreaterThanOrEqual(await raw.pTTL(lock.name)); // read later: smaller
    await second.release();
    expect((await lock.inspect()).holders).toEqual([{ owner: first.owner, holdCount: 1 }]);
    await first.release();
    expect(await lock.inspect()).toMatchObject({ locked: false, ttl: -2, holders: [] });
  });

  it("makes one HTTP request on a warm client, and changes nothing", async () => {
    const redis = bridge.redis();
    const { edgelock } = recordingEdgeLock({}, redis);
    const lock = edgelock.getLock(`${prefix}one-request`);
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    await lock.inspect(); // loads the script into Redis's cache
    bridge.bridge.resetStats();
    const before = await raw.hGetAll(lock.name);
    await lock.inspect();
    const stats = bridge.bridge.stats();
    expect(stats.requests).toBe(1);
    expect(stats.byCommand).toEqual({ evalsha: 1 });
    expect(await raw.hGetAll(lock.name)).toEqual(before);
    await lease.release();
  });

  it("returns owners byte for byte, also ones a JSON decoder would change", async () => {
    // @upstash/redis JSON-parses reply strings by default: "123" → 123, "\"q\"" → "q".
    const owners = ["123", "true", "null", '"quoted"', '{"a":1}', "[1]", " 7 ", "=x", "é:ü"];
    const name = `${prefix}json-like`;
    await raw.hSet(name, Object.fromEntries(owners.map((owner, i) => [owner, String(i + 1)])));
    await raw.pExpire(name, 30_000);
    for (const redis of [bridgeRedis(), bridgeRedis({ automaticDeserialization: false })]) {
      const { edgelock } = recordingEdgeLock({}, redis);
      const seen = await edgelock.getLock(name).inspect();
      expect(seen.holders).toEqual(owners.map((owner, i) => ({ owner, holdCount: i + 1 })));
    }
    await raw.del(name);
  });

  it("sees a lock held by Redisson (same layout) and leaves out fields that are no hold count", async () => {
    const name = `${prefix}redisson`;
    const owner = "7f3e2a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b:57";
    await raw.hSet(name, { [owner]: "3", mode: "write" });
    const { edgelock } = recordingEdgeLock();
    const seen = await edgelock.getLock(name).inspect();
    expect(seen).toEqual({
      kind: "lock",
      name,
      locked: true,
      ttl: -1,
      holders: [{ owner, holdCount: 3 }],
    });
    await raw.del(name);
  });

  it(`returns at most ${MAX_INSPECT_HOLDERS} holders of a key that is not a real lock`, async () => {
    const name = `${prefix}many`;
    await raw.hSet(
      name,
      Object.fromEntries(Array.from({ length: 250 }, (_, i) => [`owner-${i}`, "1"])),
    );
    const { edgelock } = recordingEdgeLock();
    const seen = await edgelock.getLock(name).inspect();
    expect(seen.holders).toHaveLength(MAX_INSPECT_HOLDERS);
    expect(new Set(seen.holders.map((h) => h.owner)).size).toBe(MAX_INSPECT_HOLDERS);
    await raw.del(name);
  });

  it("rejects with TransportError when the key is not a HASH", async () => {
    const name = `${prefix}string`;
    await raw.set(name, "v");
    const { edgelock } = recordingEdgeLock();
    await expect(edgelock.getLock(name).inspect()).rejects.toBeInstanceOf(TransportError);
    await raw.del(name);
  });

  it("is the Inspectable interface later primitives implement", async () => {
    const { edgelock } = recordingEdgeLock();
    const inspectable: Inspectable<LockInspection> = edgelock.getLock(`${prefix}iface`);
    const { kind } = await inspectable.inspect();
    expect(kind).toBe("lock");
    expect(lockHolders.source).not.toMatch(/\b(hset|hincrby|del|pexpire|set)\b/);
  });
});
