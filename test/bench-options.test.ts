/** `npm run bench` options (bench/options.ts), parsed without running anything. */
import { describe, expect, it } from "vitest";
import { parseOptions } from "../bench/options.js";

describe("bench options", () => {
  it("--long-measure sets the long-hold window; the default stays 20 s", () => {
    const set = parseOptions(["--only", "long-hold", "--long-measure", "70000"], "/bench");
    expect(set).toMatchObject({ scenarios: ["long-hold"], longHoldMeasureMs: 70_000 });
    expect(parseOptions([], "/bench")).toMatchObject({ longHoldMeasureMs: 20_000 });
  });

  it("a window that is no positive integer, or an unknown scenario, is refused with the usage", () => {
    for (const bad of ["0", "1.5", "soon"]) {
      const r = parseOptions(["--long-measure", bad], "/bench");
      expect(r).toEqual({
        exit: expect.stringMatching(/^--long-measure must be an integer ≥ 1\nusage:/),
      });
    }
    // A value that reads as an option is refused by node:util's parser, with the usage too.
    expect(parseOptions(["--long-measure", "-5"], "/bench")).toEqual({
      exit: expect.stringMatching(/^Option '--long-measure' argument is ambiguous[\s\S]*\nusage:/),
    });
    expect(parseOptions(["--only", "nope"], "/bench")).toEqual({
      exit: expect.stringMatching(/^--only: unknown scenario "nope"/),
    });
  });
});
