/**
 * RedLock quorum campaign (redsync's TestMutexQuorum, over HTTP): 5 bridge + redis-server pairs,
 * one EdgeLock per pair, `new RedLock(locks)` over `getLock(name)` of each. For every one of the
 * 32 subsets of nodes, the nodes of the subset are made unavailable (`down`: the bridge answers
 * every request 503, so nothing applies and nothing lands later), pre-occupied (`taken`: the key
 * is held by a foreign owner), or half and half (`mixed`); then one `tryLock` runs. It must
 * acquire iff at least 3 nodes are free and reachable, and a failed acquire must leave no hold of
 * ours on any node (a successful one: a hold on every free node, none after the release).
 *
 * Negative control: a naive quorum (each node's lock taken independently, success on 1 grant,
 * no rollback) run over the same 32 subsets (`taken`) must disagree with the expectation and
 * leave holds behind, or the checks are blind.
 */
import { EdgeLock, type Lease, RedLock } from "../../src/index.js";
import { type Pair, rawClient, startPair } from "./nodes.js";
import type { QuorumResult, QuorumRow, QuorumTrial } from "./report.js";

const NODES = 5;
const LEASE_MS = 10_000;
const VARIANTS = ["down", "taken", "mixed"] as const;

/** Runs the 32 subsets in each variant, plus the negative control. */
export async function runQuorumCampaign(): Promise<QuorumResult> {
  const started = performance.now();
  const pairs: Pair[] = [];
  try {
    for (let i = 0; i < NODES; i++) pairs.push(await startPair());
    const background: Promise<unknown>[] = [];
    const clients = pairs.map(
      (pair) =>
        new EdgeLock({
          redis: pair.redis(),
          requestTimeout: 1_000,
          waitUntil: (task) => background.push(task),
        }),
    );
    const foreign = pairs.map(
      (pair) => new EdgeLock({ redis: pair.redis(), clientId: "foreign-owner" }),
    );
    const raws = await Promise.all(pairs.map((pair) => rawClient(pair.node.url)));
    const prefix = `f:quorum:${Math.random().toString(36).slice(2, 8)}:`;
    let trialNo = 0;

    /** Our holds on each node of `name` for `owner` (HEXISTS on the lock HASH). */
    const heldBy = async (name: string, owner: string) => {
      let n = 0;
      for (const raw of raws) n += Number(await raw.send(["HEXISTS", name, owner]));
      return n;
    };
    const settle = async () => {
      for (let seen = 0; seen < background.length; ) {
        const batch = background.slice(seen);
        seen = background.length;
        await Promise.allSettled(batch);
      }
    };

    /** Sets up `mask` in `variant`, runs `acquire`, checks what it left, heals. */
    const trial = async (
      mask: number,
      variant: (typeof VARIANTS)[number],
      acquire: (
        name: string,
        owner: string,
      ) => Promise<{ acquired: boolean; release(): Promise<unknown>; votes?: Promise<unknown> }>,
    ): Promise<QuorumTrial> => {
      trialNo += 1;
      const name = `${prefix}t${trialNo}`;
      const owner = `ours-${trialNo}`;
      const occupied: Lease[] = [];
      let affected = 0;
      for (let i = 0; i < NODES; i++) {
        if (!(mask & (1 << i))) continue;
        const down = variant === "down" || (variant === "mixed" && affected % 2 === 0);
        affected += 1;
        if (down) {
          pairs[i]?.bridge.setFaults({ rules: [{ action: "fail", mode: "503" }] });
        } else {
          const lease = await foreign[i]?.getLock(name).tryLock({ leaseTime: 30_000 });
          if (!lease) throw new Error(`could not pre-occupy node ${i + 1}`);
          occupied.push(lease);
        }
      }
      const t0 = performance.now();
      const result = await acquire(name, owner);
      const ms = performance.now() - t0;
      await result.votes;
      // The nodes come back before the background work is awaited: a cancel or release sent to a
      // node that is down resends its own request until that node answers (definiteWithin, then
      // in the background), so it lands once the node is back, and what it left is checked then.
      for (const pair of pairs) pair.bridge.clearFaults();
      await settle();
      const heldOn = result.acquired ? await heldBy(name, owner) : 0;
      if (result.acquired) await result.release();
      await settle();
      const leftover = await heldBy(name, owner);
      for (const lease of occupied) await lease.release();
      return { acquired: result.acquired, heldOn, leftover, ms };
    };

    const redlockAcquire = async (name: string, owner: string) => {
      // RedLock decides once a quorum granted; a vote still on its way then joins the lease when
      // it lands (or is undone after its endpoint's time limit). `votes` settles when every vote
      // has, so that counting "a hold on every free node" does not race the last votes.
      const votes: Promise<unknown>[] = [];
      const locks = clients.map((c) => {
        const lock = c.getLock(name);
        return {
          name: lock.name,
          tryLock: (options?: Parameters<typeof lock.tryLock>[0]) => {
            const vote = lock.tryLock(options);
            votes.push(vote.catch(() => null));
            return vote;
          },
        };
      });
      const redlock = new RedLock(locks, { endpointTimeout: 500 });
      const lease = await redlock.tryLock({ leaseTime: LEASE_MS, owner });
      return {
        acquired: lease !== null,
        release: async () => lease?.release(),
        votes: Promise.all(votes),
      };
    };
    const naiveAcquire = async (name: string, owner: string) => {
      const leases = await Promise.all(
        clients.map((c) =>
          c
            .getLock(name)
            .tryLock({ leaseTime: LEASE_MS, owner })
            .catch(() => null),
        ),
      );
      const granted = leases.filter((l): l is Lease => l !== null);
      // Broken on purpose: all 5 are needed (no quorum), and a failed attempt keeps what it got.
      return {
        acquired: granted.length === NODES,
        release: async () => Promise.all(granted.map((l) => l.release())),
      };
    };

    const problems: string[] = [];
    const rows: QuorumRow[] = [];
    for (let mask = 0; mask < 2 ** NODES; mask++) {
      const free = NODES - popcount(mask);
      const expected = free >= 3;
      const row: QuorumRow = { mask, free, expected, trials: {} };
      for (const variant of VARIANTS) {
        if (mask === 0 && variant !== "down") continue; // no node affected: one trial is enough
        const t = await trial(mask, variant, redlockAcquire);
        row.trials[variant] = t;
        const where = `subset ${mask.toString(2).padStart(5, "0")} (${variant})`;
        if (t.acquired !== expected) {
          problems.push(
            `${where}: ${t.acquired ? "acquired" : "not acquired"}, expected the opposite`,
          );
        }
        if (t.acquired && t.heldOn < free)
          problems.push(`${where}: held on ${t.heldOn} of ${free} free nodes`);
        if (t.leftover > 0) problems.push(`${where}: ${t.leftover} hold(s) of ours left`);
      }
      rows.push(row);
    }

    let mismatches = 0;
    let leftover = 0;
    for (let mask = 0; mask < 2 ** NODES; mask++) {
      const t = await trial(mask, "taken", naiveAcquire);
      if (t.acquired !== NODES - popcount(mask) >= 3) mismatches += 1;
      leftover += t.leftover;
    }
    if (mismatches === 0) problems.push("negative control: the quorum check saw no wrong decision");
    if (leftover === 0) problems.push("negative control: the leftover check saw no hold left");
    for (const raw of raws) await raw.close();
    return {
      rows,
      problems,
      durationMs: performance.now() - started,
      negative: { mismatches, leftover },
    };
  } finally {
    for (const pair of pairs) await pair.close();
  }
}

function popcount(n: number): number {
  let count = 0;
  for (let x = n; x; x >>= 1) count += x & 1;
  return count;
}
