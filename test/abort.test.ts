/**
 * A call's deadline (src/abort.ts, Deadline): its time limit and its caller's signal, raced
 * against the call's requests and sleeps without an AbortController.
 */
import { describe, expect, it } from "vitest";
import { Deadline } from "../src/abort.js";

const never = () => new Promise<never>(() => {});

describe("Deadline", () => {
  it("settles like the raced promise while time is left", async () => {
    const deadline = new Deadline(5_000, () => new Error("late"));
    await expect(deadline.race(Promise.resolve(7))).resolves.toBe(7);
    await expect(deadline.race(Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    expect(deadline.ended).toBe(false);
    expect(deadline.reason).toBeUndefined();
    deadline.clear();
  });

  it("rejects a pending race with the timeout's reason when the time is up, and every later one at once", async () => {
    const late = new Error("late");
    const deadline = new Deadline(30, () => late);
    await expect(deadline.race(never())).rejects.toBe(late);
    expect(deadline.ended).toBe(true);
    expect(deadline.reason).toBe(late);
    // A promise raced after the end is observed, so its own rejection is never unhandled.
    await expect(deadline.race(Promise.reject(new Error("after")))).rejects.toBe(late);
  });

  it("rejects with the signal's reason when the caller aborts, before the time is up", async () => {
    const controller = new AbortController();
    const deadline = new Deadline(5_000, () => new Error("late"), controller.signal);
    const raced = deadline.race(never());
    const slept = deadline.sleep(5_000);
    const stop = new Error("stop");
    controller.abort(stop);
    await expect(raced).rejects.toBe(stop);
    await expect(slept).rejects.toBe(stop);
    expect(deadline.reason).toBe(stop);
  });

  it("ends at once when the signal had aborted before it began", async () => {
    const stop = new Error("stop");
    const deadline = new Deadline(5_000, () => new Error("late"), AbortSignal.abort(stop));
    expect(deadline.ended).toBe(true);
    await expect(deadline.race(never())).rejects.toBe(stop);
  });

  it("sleeps the given time while it lasts", async () => {
    const deadline = new Deadline(5_000, () => new Error("late"));
    const started = performance.now();
    await deadline.sleep(40);
    expect(performance.now() - started).toBeGreaterThanOrEqual(35);
    deadline.clear();
  });

  it("ends a sleep at the time limit", async () => {
    const late = new Error("late");
    const deadline = new Deadline(30, () => late);
    await expect(deadline.sleep(5_000)).rejects.toBe(late);
  });

  it("once cleared, neither its timer nor the signal ends it", async () => {
    const controller = new AbortController();
    const deadline = new Deadline(20, () => new Error("late"), controller.signal);
    deadline.clear();
    controller.abort(new Error("stop"));
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(deadline.ended).toBe(false);
  });

  it("rings an alarm due before the time limit, then still ends at the limit", async () => {
    const late = new Error("late");
    const started = performance.now();
    const rang: number[] = [];
    const deadline = new Deadline(150, () => late, undefined, {
      after: 30,
      ring: () => {
        rang.push(performance.now() - started);
        return undefined;
      },
    });
    const raced = deadline.race(never());
    await expect(raced).rejects.toBe(late);
    expect(rang).toHaveLength(1);
    expect(rang[0]).toBeGreaterThanOrEqual(25);
    expect(rang[0]).toBeLessThan(140);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
  });

  it("rings again after the ms its alarm returns, never past the time limit", async () => {
    const late = new Error("late");
    let rings = 0;
    const deadline = new Deadline(200, () => late, undefined, {
      after: 20,
      ring: () => {
        rings += 1;
        return 40;
      },
    });
    await expect(deadline.race(never())).rejects.toBe(late);
    // At about 20, 60, 100, 140 and 180 ms (timers may fire late, never early): never after 200.
    expect(rings).toBeGreaterThanOrEqual(2);
    expect(rings).toBeLessThanOrEqual(5);
  });

  it("never rings an alarm due after the time limit, nor one of a call that settled", async () => {
    let rings = 0;
    const ring = () => {
      rings += 1;
      return undefined;
    };
    const late = new Error("late");
    const short = new Deadline(30, () => late, undefined, { after: 60, ring });
    await expect(short.race(never())).rejects.toBe(late);
    const settled = new Deadline(5_000, () => late, undefined, { after: 20, ring });
    await expect(settled.race(Promise.resolve(1))).resolves.toBe(1);
    settled.clear();
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(rings).toBe(0);
    expect(settled.ended).toBe(false);
  });
});
