/**
 * Random ids (src/ids.ts): drawn from a pool of random bytes, each byte handed out once, across
 * the pool's refills.
 */
import { describe, expect, it } from "vitest";
import { randomHex } from "../src/ids.js";

describe("randomHex", () => {
  it("gives distinct lowercase hex ids of the asked size, across many refills of its pool", () => {
    const ids = Array.from({ length: 5_000 }, () => randomHex());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(randomHex(11)).toMatch(/^[0-9a-f]{22}$/);
    expect(randomHex(3)).toMatch(/^[0-9a-f]{6}$/);
  });

  it("serves a size larger than its pool directly", () => {
    const big = randomHex(2_048);
    expect(big).toMatch(/^[0-9a-f]{4096}$/);
    expect(big.slice(0, 2_048)).not.toBe(big.slice(2_048));
  });
});
