/** No owner id, request id, token, URL or script text in errors or events; strong random ids. */
import { describe, expect, it } from "vitest";
import { TransportError } from "../../src/index.js";
import { keyPrefix, startPrivateBridge, usePrivateBridge, useRawRedis } from "../support/env.js";
import { recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();

function assertClean(text: string, secrets: string[]) {
  for (const s of secrets) expect(text).not.toContain(s);
  expect(text).not.toMatch(/redis\.call|KEYS\[1\]/);
  // 32 hex characters = a random id (script SHA1s have 40 and are public).
  expect(text).not.toMatch(/(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])/);
}

describe("secrets stay out of errors and events", () => {
  it("a Redis error reply (WRONGTYPE) is a non-ambiguous TransportError with a scrubbed message", async () => {
    const rec = recordingEdgeLock({ clientId: "client-secret-id" }, bridge.redis());
    const name = `${prefix}wrongtype`;
    await raw.set(name, "a string, not a hash");
    const error = await rec.edgelock
      .getLock(name)
      .tryLock({ leaseTime: 1_000, owner: "owner-secret-value" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransportError);
    const t = error as TransportError;
    expect(t.code).toBe("TRANSPORT");
    expect(t.ambiguous).toBe(false);
    expect(t.message).toMatch(/WRONGTYPE/);
    const all = `${t.message}\n${String((t.cause as Error).message)}\n${t.stack ?? ""}\n${JSON.stringify(rec.events)}`;
    assertClean(all, [
      "owner-secret-value",
      "client-secret-id",
      bridge.token,
      bridge.url,
      "edgelock_replay",
    ]);
    await raw.del(name);
  });

  it("a refused connection is a definite TransportError naming neither the URL nor the token", async () => {
    const dead = await startPrivateBridge();
    const url = dead.url;
    const redis = dead.redis({ retry: { retries: 0 } });
    await dead.close();
    const rec = recordingEdgeLock({}, redis);
    const error = await rec.edgelock
      .getLock(`${prefix}down`)
      .tryLock({ leaseTime: 1_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).ambiguous).toBe(false);
    const text = `${(error as Error).message}\n${String(((error as Error).cause as Error).message)}`;
    assertClean(text, [url, dead.token, "127.0.0.1"]);
  });

  it("events carry no owner, client id or request id", async () => {
    const rec = recordingEdgeLock({ clientId: "events-client-id", watchdogTimeout: 150 });
    const lease = await rec.edgelock.getLock(`${prefix}events`).tryLock();
    if (!lease) throw new Error("not acquired");
    await rec.until((e) => e.type === "renew");
    await lease.release();
    await rec.edgelock
      .getLock(`${prefix}events`)
      .tryLock({ leaseTime: 100, owner: "custom-owner" });
    const text = JSON.stringify(rec.events);
    expect(rec.events.map((e) => e.type)).toEqual(
      expect.arrayContaining(["acquire", "renew", "release"]),
    );
    assertClean(text, [lease.owner, lease.id, "events-client-id", "custom-owner"]);
  });

  it("client and task ids carry 128 random bits from Web Crypto", async () => {
    const rec = recordingEdgeLock();
    const lock = rec.edgelock.getLock(`${prefix}ids`);
    const owners = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const lease = await lock.tryLock({ leaseTime: 1_000 });
      if (!lease) throw new Error("not acquired");
      expect(lease.owner).toMatch(/^[0-9a-f]{32}:[0-9a-f]{32}$/);
      expect(lease.id).toMatch(/^[0-9a-f]{32}$/);
      owners.add(lease.owner);
      await lease.release();
    }
    expect(owners.size).toBe(20);
  });
});
