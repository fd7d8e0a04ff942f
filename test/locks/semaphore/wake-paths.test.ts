/**
 * The wake-up path every waiter kind but the reentrant lock's shares (lib/wake.lua `wake_up_to`:
 * semaphores, the latch, the read-write lock), pinned on a semaphore whose first registered
 * waiter is played from the test: its registration made by the real acquire script, its wake
 * channel heard (or not) by a raw subscriber. A woken waiter leaves the registry; a PUBLISH
 * nobody heard (a dead waiter) wakes the next waiter instead; a woken waiter whose call ended
 * before it attempted passes the wake-up on when it leaves.
 */
import { describe, expect, it } from "vitest";
import { randomHex } from "../../../src/ids.js";
import { lockLeave, semaphoreAcquire } from "../../../src/lua.gen.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock, replayKeys } from "../../support/locks.js";
import { waiting, wokenBy } from "../../support/semaphore-waiters.js";

const prefix = keyPrefix();
const raw = useRawRedis();

const waitingKey = (name: string) => `edgelock_waiting:{${name}}`;
const wakeKey = (name: string) => `edgelock_wake:{${name}}`;

/** A semaphore of one permit, taken by a holder whose release the test runs. */
async function heldSemaphore(label: string) {
  const name = `${prefix}${label}`;
  const semaphore = recordingEdgeLock().edgelock.getSemaphore(name);
  expect(await semaphore.trySetPermits(1)).toBe(true);
  const held = await semaphore.tryAcquire();
  if (!held) throw new Error("not acquired");
  return { name, semaphore, held };
}

/**
 * Registers waiter `<client>:w` with a busy attempt of the real acquire script, for 5 s: it
 * lapses before any waiter of an EdgeLock (30 s), so it is first in the registry.
 */
async function registerPlayedWaiter(name: string, client: string): Promise<string> {
  const id = `${client}:w`;
  const reply = await raw.eval(semaphoreAcquire.source, {
    keys: [
      name,
      ...replayKeys(name),
      waitingKey(name),
      wakeKey(name),
      `edgelock_taken:{${name}}`,
      `edgelock_permits:{${name}}`,
    ],
    arguments: ["1", "30000", randomHex(), id, "5000"],
  });
  expect(reply).toEqual([0, 0, 0]);
  return id;
}

/** Messages on `client`'s wake channel, from a SUBSCRIBE confirmed on return. */
async function wakeChannel(name: string, client: string) {
  const sub = raw.duplicate();
  await sub.connect();
  const heard: string[] = [];
  let notify = () => {};
  await sub.subscribe(`${wakeKey(name)}:${client}`, (m) => {
    heard.push(String(m));
    notify();
  });
  return {
    heard,
    /** Resolves once a message arrived. */
    woken: () =>
      new Promise<void>((resolve) => {
        notify = () => heard.length > 0 && resolve();
        notify();
      }),
    close: () => sub.close(),
  };
}

const registered = async (name: string) => (await raw.zRange(waitingKey(name), 0, -1)).map(String);

describe("wake_up_to (semaphore, latch, read-write lock)", () => {
  it("a dead waiter ahead (its PUBLISH reached nobody) does not count: the next waiter is woken", async () => {
    const { name, semaphore, held } = await heldSemaphore("dead-ahead");
    const dead = await registerPlayedWaiter(name, `dead${randomHex().slice(0, 8)}`);
    const { pending } = await waiting((e) => e.getSemaphore(name).tryAcquire({ waitTime: 5_000 }));
    const order = await registered(name);
    expect(order).toHaveLength(2);
    expect(order[0]).toBe(dead);
    const permit = await wokenBy(pending, () => held.release());
    expect(permit).not.toBeNull();
    // Both left the registry: the dead one was tried, the live one woken.
    expect(await registered(name)).toEqual([]);
    await permit?.release();
    await semaphore.delete();
  });

  it("a woken waiter leaves the registry; one whose call ended unused passes the wake-up on", async () => {
    const { name, semaphore, held } = await heldSemaphore("ended-woken");
    const client = `ended${randomHex().slice(0, 8)}`;
    const channel = await wakeChannel(name, client);
    try {
      const ended = await registerPlayedWaiter(name, client);
      const { pending } = await waiting((e) =>
        e.getSemaphore(name).tryAcquire({ waitTime: 5_000 }),
      );
      expect((await registered(name))[0]).toBe(ended);
      await held.release();
      await channel.woken();
      expect(channel.heard).toEqual([ended]);
      // Woken means unregistered: a later release must not spend a wake-up on it again. The
      // live waiter is still registered, so the release did not wake it (a woken waiter is
      // unregistered by the release, and with the permit free it would not register again).
      const left = await registered(name);
      expect(left).toHaveLength(1);
      expect(left).not.toContain(ended);
      // The woken call ends without attempting (aborted, timed out): its leave finds it
      // unregistered and wakes the next live waiter, which takes the permit.
      const leave = () =>
        raw.eval(lockLeave.source, {
          keys: [waitingKey(name), wakeKey(name)],
          arguments: [ended],
        });
      const permit = await wokenBy(pending, async () => expect(await leave()).toBe(0));
      expect(permit).not.toBeNull();
      expect(await registered(name)).toEqual([]);
      await permit?.release();
    } finally {
      await channel.close();
      await semaphore.delete();
    }
  });
});
