/**
 * The fault suite (`npm run test:faults`; `FAULTS_QUICK=1` for the CI sizes): every campaign of
 * campaigns.ts with its negative and positive controls, then the RedLock quorum campaign.
 * Writes test/faults/RESULTS.md (a complete full-size run) or node_modules/.vitest/faults-quick.md
 * (CI sizes; faults-partial.md for a filtered run).
 * Not part of `npm test` (its file name does not end in .test.ts): see vitest.faults.config.ts.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CampaignResult, campaigns, QUICK, runCampaign } from "./campaigns.js";
import { type RawClient, RedisNode, rawClient } from "./nodes.js";
import { runQuorumCampaign } from "./redlock.js";
import { type QuorumResult, renderReport } from "./report.js";
import { runSetCampaign, type SetCampaignResult, setCampaigns } from "./set-campaign.js";

const here = dirname(fileURLToPath(import.meta.url));
const scratch = `${here}/../../node_modules/.vitest`;

const results: CampaignResult[] = [];
let quorum: QuorumResult | undefined;
const setResults: SetCampaignResult[] = [];
const started = performance.now();
// The unguarded counter lives on a redis-server no nemesis touches.
let resourceNode: RedisNode | undefined;
let resource: RawClient | undefined;

beforeAll(async () => {
  resourceNode = await RedisNode.start();
  resource = await rawClient(resourceNode.url);
});

afterAll(async () => {
  await resource?.close();
  await resourceNode?.stop();
  const report = renderReport(
    results,
    quorum,
    {
      quick: QUICK,
      totalMs: performance.now() - started,
      date: new Date().toISOString().slice(0, 10),
      node: process.version,
    },
    setResults,
  );
  // Only a complete full-size run replaces RESULTS.md (not a -t filtered or CI-sized one).
  const complete =
    results.length === campaigns.length &&
    quorum !== undefined &&
    setResults.length === setCampaigns.length;
  const output =
    complete && !QUICK
      ? `${here}/RESULTS.md`
      : `${scratch}/faults-${QUICK ? "quick" : "partial"}.md`;
  await mkdir(dirname(output), { recursive: true });
  await writeFile(output, report);
  console.log(`fault suite: wrote ${output}`);
});

describe("fault campaigns", () => {
  for (const campaign of campaigns) {
    it(campaign.title, async () => {
      if (!resource) throw new Error("resource redis-server not started");
      const result = await runCampaign(campaign, resource);
      results.push(result);
      expect(result.problems).toEqual([]);
    });
  }

  it("RedLock over 5 bridge + redis-server pairs: acquires iff >= 3 nodes are free, leaves nothing", async () => {
    quorum = await runQuorumCampaign();
    expect(quorum.problems).toEqual([]);
  });
});

describe("lock workloads as Jepsen runs them on etcd (lock-protected set)", () => {
  for (const campaign of setCampaigns) {
    it(campaign.title, async () => {
      if (!resource || !resourceNode) throw new Error("resource redis-server not started");
      const result = await runSetCampaign(campaign, { raw: resource, url: resourceNode.url });
      setResults.push(result);
      expect(result.problems).toEqual([]);
    });
  }
});
