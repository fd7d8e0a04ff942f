/**
 * Replay of the read-write lock's scripts, run as copies of one request would reach Redis: the
 * acquire that creates a lock writes no record (the epoch key `edgelock_epoch:{<name>}` names it,
 * lua/lib/rw.lua), so every way its incarnation can end before its lease does must still turn a
 * late copy into a no-op; and the '+' on the epoch key that lets a release skip the waiter
 * registry must be there whenever a waiter is registered.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  readWriteLockAcquire,
  readWriteLockCancel,
  readWriteLockForceUnlock,
  readWriteLockRelease,
} from "../../../src/lua/read-write-lock.gen.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { isReplayRecord, replayKeys, replayRecords } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const WINDOW = 2_000;

type Side = "read" | "write";
const newId = () => randomBytes(16).toString("hex");
const epochOf = (id: string) => Number.parseInt(id.slice(0, 13), 16) + 1;

/** The scripts of one name, called with the keys and arguments the client sends. */
function scripts(name: string) {
  const waiting = `edgelock_waiting:{${name}}`;
  const wake = `edgelock_wake:{${name}}`;
  const channel = `redisson_rwlock:{${name}}`;
  const tprefix = `{${name}}`;
  const run = async (source: string, keys: string[], args: (string | number)[]) =>
    raw.eval(source, { keys, arguments: args.map(String) });
  return {
    epochKey: `edgelock_epoch:{${name}}`,
    waiting,
    acquire: async (
      side: Side,
      owner: string,
      id: string,
      o: { leaseTime?: number; waiter?: string } = {},
    ) =>
      (await run(
        readWriteLockAcquire.source,
        [name, ...replayKeys(name), waiting, wake, tprefix],
        [side, o.leaseTime ?? 10_000, owner, WINDOW, id, o.waiter ?? "", 30_000, "1"],
      )) as number[],
    release: async (side: Side, owner: string, id: string, epoch: number | string) =>
      Number(
        await run(
          readWriteLockRelease.source,
          [name, ...replayKeys(name), channel, waiting, wake, tprefix],
          [side, owner, 0, WINDOW, id, String(epoch)],
        ),
      ),
    cancel: async (side: Side, owner: string, id: string) =>
      Number(
        await run(
          readWriteLockCancel.source,
          [name, ...replayKeys(name), channel, waiting, wake, tprefix],
          [side, owner, WINDOW, id],
        ),
      ),
    forceUnlock: async (side: Side) =>
      Number(
        await run(
          readWriteLockForceUnlock.source,
          [name, channel, waiting, wake, tprefix, replayKeys(name)[0] as string],
          [side, WINDOW],
        ),
      ),
  };
}

/** Keys of `name` other than its replay records, sorted. */
const keysOf = async (name: string) =>
  (await raw.keys(`*${name}*`))
    .map(String)
    .filter((k) => !isReplayRecord(name, k))
    .sort();

const count = async (name: string, field: string) => Number((await raw.hGet(name, field)) ?? 0);

describe("read-write lock replay", () => {
  it("the creating acquire writes no record: the epoch key names it, and a copy adds nothing", async () => {
    const name = `${prefix}creator`;
    const s = scripts(name);
    const id = newId();
    expect(await s.acquire("read", "A", id)).toEqual([1, 1, epochOf(id)]);
    expect(String(await raw.get(s.epochKey))).toBe(id);
    expect(await replayRecords(raw, name)).toEqual({});
    // The copy: same answer, one hold, one timeout key.
    expect(await s.acquire("read", "A", id)).toEqual([1, 1, epochOf(id)]);
    expect(await count(name, "A")).toBe(1);
    expect(await raw.exists(`{${name}}:A:rwlock_timeout:2`)).toBe(0);
    // A lease shorter than the window may lapse, epoch key and all, with a copy in flight.
    const short = `${prefix}brief`;
    const sid = newId();
    expect(await scripts(short).acquire("write", "B", sid, { leaseTime: 500 })).toEqual([
      1,
      1,
      epochOf(sid),
    ]);
    expect(await replayRecords(raw, short)).toEqual({ [sid]: `A${epochOf(sid)}` });
    // The release records its answer under the lease id: a copy of either request finds it.
    expect(await s.release("read", "A", id, epochOf(id))).toBe(1);
    expect(await keysOf(name)).toEqual([]);
    expect(await s.release("read", "A", id, epochOf(id))).toBe(1);
    expect((await s.acquire("read", "A", id))[0]).toBe(-1);
    expect(await keysOf(name)).toEqual([]);
    await raw.del(short);
  });

  it("a creator whose hold went by another request, and whose lock then lapsed, finds its epoch key and takes nothing", async () => {
    const name = `${prefix}lapsed`;
    const s = scripts(name);
    const a = newId();
    const e = epochOf(a);
    expect((await s.acquire("read", "A", a))[0]).toBe(1);
    expect((await s.acquire("read", "B", newId(), { leaseTime: 300 }))[0]).toBe(1);
    // unlock(owner): a fresh request id, any epoch. The hash shrinks to B's short hold.
    expect(await s.release("read", "A", newId(), 0)).toBe(1);
    await expect.poll(() => raw.exists(name), { timeout: 3_000, interval: 20 }).toBe(0);
    expect(String(await raw.get(s.epochKey))).toBe(a);
    expect(await s.acquire("read", "A", a)).toEqual([-1, 0, 0]);
    expect(await raw.exists(name)).toBe(0);
    // A new incarnation replaces the lingering key: the creator it stood for gets "G".
    const c = newId();
    expect(await s.acquire("write", "C", c)).toEqual([1, 1, epochOf(c)]);
    expect((await replayRecords(raw, name))[a]).toBe("G");
    expect(await s.acquire("read", "A", a)).toEqual([-1, 0, 0]);
    expect(await count(name, "A")).toBe(0);
    // A stale lease of the first incarnation never touches the new one.
    expect(await s.release("write", "C", newId(), e)).toBe(0);
    expect(await s.release("write", "C", c, epochOf(c))).toBe(1);
    expect(await keysOf(name)).toEqual([]);
  });

  it("a release by another request that frees the lock records its creator as gone", async () => {
    const name = `${prefix}gone`;
    const s = scripts(name);
    const a = newId();
    const b = newId();
    expect((await s.acquire("read", "A", a))[0]).toBe(1);
    expect((await s.acquire("read", "B", b))[0]).toBe(1);
    expect(await s.release("read", "A", a, epochOf(a))).toBe(1);
    expect(await s.release("read", "B", b, epochOf(a))).toBe(1);
    // A's record is its own release's, kept (SET NX): a copy of that release answers it.
    expect((await replayRecords(raw, name))[a]).toBe("R1");
    expect(await s.release("read", "A", a, epochOf(a))).toBe(1);
    const w = newId();
    expect((await s.acquire("write", "W", w))[0]).toBe(1);
    expect(await s.release("write", "W", newId(), 0)).toBe(1);
    expect((await replayRecords(raw, name))[w]).toBe("G");
    expect(await s.acquire("write", "W", w)).toEqual([-1, 0, 0]);
    expect(await keysOf(name)).toEqual([]);
  });

  it("forceUnlock and a cancel of the creating acquire leave its late copy nothing to take", async () => {
    const name = `${prefix}force`;
    const s = scripts(name);
    const a = newId();
    expect((await s.acquire("write", "A", a))[0]).toBe(1);
    expect(await s.forceUnlock("read")).toBe(0);
    expect(await s.forceUnlock("write")).toBe(1);
    expect(await keysOf(name)).toEqual([]);
    expect(await s.acquire("write", "A", a)).toEqual([-1, 0, 0]);
    expect(await raw.exists(name)).toBe(0);
    // Cancelled after it applied: undone by its epoch key, recorded "U".
    const c = newId();
    expect((await s.acquire("read", "C", c))[0]).toBe(1);
    expect(await s.cancel("read", "C", c)).toBe(1);
    expect(await keysOf(name)).toEqual([]);
    expect((await replayRecords(raw, name))[c]).toBe("U");
    expect(await s.acquire("read", "C", c)).toEqual([-1, 0, 0]);
    expect(await s.cancel("read", "C", c)).toBe(2);
    // Cancelled before it applied: the tombstone makes the late acquire a no-op.
    const d = newId();
    expect(await s.cancel("read", "D", d)).toBe(0);
    expect(await s.acquire("read", "D", d)).toEqual([-1, 0, 0]);
    expect(await keysOf(name)).toEqual([]);
  });

  it("a registered waiter marks the epoch key, and a lock created while one is registered starts marked", async () => {
    const name = `${prefix}marked`;
    const s = scripts(name);
    const w = newId();
    expect((await s.acquire("write", "W", w))[0]).toBe(1);
    expect(String(await raw.get(s.epochKey))).toBe(w);
    // Two waiters, one per read attempt: the first marks the key.
    expect((await s.acquire("read", "R1", newId(), { waiter: "c1:r1" }))[0]).toBe(0);
    expect((await s.acquire("read", "R2", newId(), { waiter: "c2:r2" }))[0]).toBe(0);
    expect(String(await raw.get(s.epochKey))).toBe(`${w}+`);
    expect(await raw.pTTL(s.epochKey)).toBeGreaterThan(8_000);
    // The write release wakes (and unregisters) both; nobody is left registered.
    expect(await s.release("write", "W", w, epochOf(w))).toBe(1);
    expect(await raw.exists(s.waiting)).toBe(0);
    // A lock created while a registration is left (not yet woken) starts marked, so that its
    // release wakes it.
    await raw.zAdd(s.waiting, { score: Date.now() + 30_000, value: "c3:left" });
    const n = newId();
    expect((await s.acquire("write", "N", n))[0]).toBe(1);
    expect(String(await raw.get(s.epochKey))).toBe(`${n}+`);
    expect(await s.release("write", "N", n, epochOf(n))).toBe(1);
    expect(await raw.exists(s.waiting)).toBe(0);
    expect(await keysOf(name)).toEqual([]);
  });
});
