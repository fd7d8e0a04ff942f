/**
 * The explorer's teeth (issue 51, item 4): each defect of mutants.ts, put into a copy of the
 * source (never the checkout), is found from its seeds of the committed seed set within 5
 * minutes, by the property it breaks. `npm run explore:teeth` (about 3 minutes on 2 cores: not
 * part of `npm test`); a defect the explorer cannot reach is listed as skipped, with why.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { realNow } from "./clock.js";
import { type ExploreFailure, type ExploreStats, explore } from "./explore.js";
import { loadMutant, MUTATIONS } from "./mutants.js";
import { type Session, startSession } from "./world.js";

/** Issue 51: each defect found within 5 minutes. */
const LIMIT_MS = 5 * 60_000;

let session: Session;
beforeAll(async () => {
  session = await startSession();
});
afterAll(async () => {
  await session?.close();
});

describe("explorer teeth: every defect is found from its seeds", () => {
  for (const mutation of MUTATIONS) {
    if (mutation.notFound !== undefined) {
      it.skip(`${mutation.id}: ${mutation.what} (not reached: ${mutation.notFound})`, () => {});
      continue;
    }
    it(
      `${mutation.id}: ${mutation.what}`,
      async () => {
        const started = realNow();
        const mutant = await loadMutant(mutation);
        const stats: ExploreStats = { runs: 0, steps: 0, violations: 0 };
        let found: ExploreFailure | undefined;
        try {
          for (const { kind, seed } of mutation.seeds) {
            const left = LIMIT_MS - (realNow() - started);
            if (left <= 0) break;
            found = await explore({
              kind,
              session,
              seed: seed.seed,
              numRuns: seed.runs,
              timeLimitMs: left,
              shrink: false,
              lib: mutant.lib,
              scripts: mutant.scripts,
              stats,
            });
            if (found) break;
          }
        } finally {
          mutant.remove();
        }
        const took = realNow() - started;
        console.log(
          `${mutation.id}: ${found ? `found in ${(took / 1000).toFixed(1)} s, ${stats.runs} runs (${found.kind}, seed ${found.seed}, path ${found.path})\n  ${found.message.split("\n")[0]}` : `not found in ${stats.runs} runs`}`,
        );
        expect(found, `${mutation.id} not found in ${stats.runs} runs`).toBeDefined();
        expect(found?.message.split("\n")[0]).toMatch(mutation.finds);
        expect(took).toBeLessThan(LIMIT_MS);
      },
      LIMIT_MS + 60_000,
    );
  }
});
