/**
 * A plain semaphore cannot grow: 8 clients share 3 permits while 20 % of answers are lost after
 * Redis applied the request and 5 % of requests fail before reaching it, in every drop mode.
 * Every caller retries a failed call (a new call, a new request id), and `definiteWithin: 0`
 * hands every lost answer to the caller at once, so retried releases apply twice whenever the
 * first copy had applied. Every release style: the name-level `semaphore.release()` without and
 * with an `idempotencyKey` (one per release, the same for its retries), and the permit handle's
 * `release()`.
 *
 * Checked after every call, from one MGET behind the bridge's back (an atomic snapshot):
 * available + taken (the permits edgelock callers hold, `edgelock_taken`) never exceed the
 * permits set; with handles and keyed releases, the holders the test itself counts never exceed
 * it either (a name-level release without a key cannot tell whose permit it returns: a retried
 * one returns another holder's early, whose own release is then refused). At the end, with every background
 * resend and cancel settled: exactly 3 permits available, none counted as taken.
 *
 * `FAULTS_QUICK=1`: 3 cycles per client and case, else 25.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EdgeLock, OverReleaseError, TransportError } from "../../src/index.js";
import { QUICK } from "./campaigns.js";
import { type Pair, type RawClient, rawClient, startPair } from "./nodes.js";

const CLIENTS = 8;
const PERMITS = 3;
const CYCLES = QUICK ? 3 : 25;
const REQUEST_TIMEOUT = 300;
const MODES = ["close", "503", "hang"] as const;
const STYLES = ["name-level", "keyed", "handle"] as const;
/** The waiter mark kept in the taken count (lua/lib/taken.lua). */
const TAKEN_WAITERS = 1e15;

let pair: Pair | undefined;
let raw: RawClient | undefined;

beforeAll(async () => {
  pair = await startPair();
  raw = await rawClient(pair.node.url);
});

afterAll(async () => {
  await raw?.close();
  await pair?.close();
});

/** Available permits, permits edgelock callers hold, and the permits set, read atomically. */
async function snapshot(name: string) {
  if (!raw) throw new Error("no raw client");
  const [available, taken, set] = (await raw.send([
    "MGET",
    name,
    `edgelock_taken:{${name}}`,
    `edgelock_permits:{${name}}`,
  ])) as (string | null)[];
  return {
    available: Number(available ?? 0),
    taken: Number(taken ?? 0) % TAKEN_WAITERS,
    set: Number(set ?? -1),
  };
}

/** Retries `call` on every TransportError, as the callers of the issue did. */
async function retried<T>(call: () => Promise<T>, failures: { n: number }): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof TransportError)) throw error;
      failures.n += 1;
    }
  }
}

describe("semaphore: retried releases under lost answers never grow it", () => {
  for (const mode of MODES) {
    for (const style of STYLES) {
      it(`${style} release, answers lost in mode ${mode}`, async () => {
        const p = pair;
        if (!p) throw new Error("no redis-server");
        const name = `bound:${mode}:${style}`;
        const background: Promise<unknown>[] = [];
        const clients = Array.from(
          { length: CLIENTS },
          () =>
            new EdgeLock({
              redis: p.redis(),
              requestTimeout: REQUEST_TIMEOUT,
              definiteWithin: 0,
              waitUntil: (p) => background.push(p),
            }),
        );
        // Set up with the defaults: a cold first request may take longer than 300 ms.
        const setup = new EdgeLock({ redis: p.redis() });
        expect(await setup.getSemaphore(name).trySetPermits(PERMITS)).toBe(true);
        p.bridge.resetStats();
        p.bridge.setFaults({
          seed: 29,
          rules: [
            { action: "fail", mode: "503", rate: 0.05 },
            { action: "lose", mode, rate: 0.2, hangMs: 2 * REQUEST_TIMEOUT },
          ],
        });
        const over: string[] = [];
        const check = async (when: string) => {
          const s = await snapshot(name);
          if (s.available + s.taken > s.set || s.available > s.set) {
            over.push(`${when}: ${JSON.stringify(s)}`);
          }
        };
        let holders = 0;
        let most = 0;
        let refused = 0;
        const failures = { n: 0 };
        // Acquires resend their own request while their wait lasts: none should fail.
        const acquires = { n: 0 };
        await Promise.all(
          clients.map(async (edgelock, c) => {
            const s = edgelock.getSemaphore(name);
            for (let i = 0; i < CYCLES; i++) {
              const handle = await retried(() => s.tryAcquire({ waitTime: 10_000 }), acquires);
              if (!handle) throw new Error(`client ${c}: no permit within 10 s`);
              holders += 1;
              most = Math.max(most, holders);
              await check(`client ${c} acquired`);
              holders -= 1;
              try {
                await retried(
                  () =>
                    style === "handle"
                      ? handle.release()
                      : s.release(1, style === "keyed" ? { idempotencyKey: `${c}:${i}` } : {}),
                  failures,
                );
              } catch (error) {
                // A retried name-level release gave another holder's permit back early: this
                // holder's own release is then beyond the permits set.
                if (!(error instanceof OverReleaseError)) throw error;
                refused += 1;
              }
              await check(`client ${c} released`);
            }
          }),
        );
        const injected = p.bridge.stats().faultsInjected;
        p.bridge.clearFaults();
        // Background resends and cancels may start more background work: wait for all of it.
        for (let seen = 0; seen < background.length; ) {
          seen = background.length;
          await Promise.allSettled(background);
        }
        await check("at the end");
        console.log(
          `semaphore bound ${mode}/${style}: ${CLIENTS * CYCLES} cycles, ${injected} faults, ${failures.n} failed releases retried, ${acquires.n} failed acquires, ${refused} releases refused, most holders ${most}`,
        );
        expect(over).toEqual([]);
        expect(acquires.n).toBe(0);
        expect(injected).toBeGreaterThan(0);
        // The faults reached the callers (a failed release, retried): in mode close
        // @upstash/redis resends by itself, so callers rarely see a failure; at CI size (3 cycles
        // per client) a case may see none either, since the transport resends once after a 5xx.
        if (mode !== "close" && !QUICK) expect(failures.n).toBeGreaterThan(0);
        if (style !== "name-level") {
          expect(most).toBeLessThanOrEqual(PERMITS);
          expect(refused).toBe(0);
        }
        expect(await snapshot(name)).toEqual({ available: PERMITS, taken: 0, set: PERMITS });
      });
    }
  }
});
