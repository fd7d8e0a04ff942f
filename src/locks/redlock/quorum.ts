/**
 * The quorum step of RedLock, kept apart from the transport: ask every endpoint at once, each
 * with a time limit of its own (a vote), then decide from the votes alone (aggregation). The
 * constants are the Redis distlock page's (its reference implementation's clock drift factor
 * 0.01 and +2 ms for expiry precision), as node-redlock and redsync keep them.
 * @module
 */

/** Share of the lease time allowed for clock drift between the client and the Redis servers. */
export const CLOCK_DRIFT_FACTOR = 0.01;

/** Votes needed out of `n` endpoints: a majority, N/2 + 1. */
export const quorumOf = (n: number): number => Math.floor(n / 2) + 1;

/** Drift allowance for a lease, in ms: 0.01 × leaseTime + 2 ms (Redis distlock page). */
export const driftOf = (leaseTime: number): number =>
  Math.floor(leaseTime * CLOCK_DRIFT_FACTOR) + 2;

/** One endpoint's answer: granted (its value), refused, failed, or no answer in time. */
export type Vote<T> =
  | { endpoint: number; outcome: "granted"; value: T }
  | { endpoint: number; outcome: "refused" }
  | { endpoint: number; outcome: "failed"; error: unknown }
  | { endpoint: number; outcome: "timeout" };

/** The votes a decision was taken on, and the votes still outstanding then. */
export interface Ballot<T> {
  /** Votes that arrived before the decision (in arrival order). */
  votes: Vote<T>[];
  /** The other votes, once they arrive (each within the time limit). */
  rest: Promise<Vote<T>[]>;
}

/**
 * Asks every endpoint at once, each bounded by `timeout` ms: an endpoint that has not answered
 * by then votes `"timeout"` and its call is aborted (its own clean-up, e.g. cancelling an acquire
 * that may still apply, is the call's business). `ask` resolves to the granted value, or `null`
 * for a refusal. Resolves as soon as `decided(votesSoFar)` says the outcome is known (e.g. a
 * quorum granted), or when every vote is in; the rest arrive in `rest`. When `signal` aborts,
 * every call is aborted with its reason (those votes fail); the caller checks the signal, so it
 * can first give back what was granted.
 */
export function collectVotes<E, T>(
  endpoints: readonly E[],
  ask: (endpoint: E, signal: AbortSignal) => Promise<T | null>,
  timeout: number,
  signal: AbortSignal | undefined,
  decided: (votes: readonly Vote<T>[]) => boolean = () => false,
): Promise<Ballot<T>> {
  return new Promise((resolve) => {
    const arrived: Vote<T>[] = [];
    let taken: Vote<T>[] | undefined;
    const all = endpoints.map(async (endpoint, i): Promise<Vote<T>> => {
      const vote = await voteOf(endpoint, i);
      arrived.push(vote);
      if (!taken && (arrived.length === endpoints.length || decided(arrived))) {
        taken = [...arrived];
        const counted = new Set(taken);
        resolve({
          votes: taken,
          rest: Promise.all(all).then((votes) => votes.filter((v) => !counted.has(v))),
        });
      }
      return vote;
    });
    async function voteOf(endpoint: E, i: number): Promise<Vote<T>> {
      const limit = new AbortController();
      const onAbort = () => limit.abort(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      const timer = setTimeout(() => limit.abort(new VoteTimeout()), timeout);
      try {
        const value = await Promise.race([
          ask(endpoint, limit.signal),
          rejectOnAbort(limit.signal),
        ]);
        return value === null
          ? { endpoint: i, outcome: "refused" }
          : { endpoint: i, outcome: "granted", value };
      } catch (error) {
        if (error instanceof VoteTimeout) return { endpoint: i, outcome: "timeout" };
        return { endpoint: i, outcome: "failed", error };
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      }
    }
  });
}

/** Rejects with the signal's reason once it aborts (a call that ignores its signal still ends). */
function rejectOnAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/** The reason a vote's call is aborted with when its endpoint's time limit passes. */
export class VoteTimeout extends Error {
  override readonly name = "VoteTimeout";
  constructor() {
    super("the endpoint did not answer within its time limit");
  }
}

/**
 * The decision (Redis distlock page, steps 3–4): the lock is held iff a quorum granted it and
 * time is left: validity = leaseTime − elapsed − drift > 0.
 * @param granted votes granted; `n` endpoints; `elapsed` ms since the first request was sent.
 */
export function decide(
  granted: number,
  n: number,
  leaseTime: number,
  elapsed: number,
): { held: boolean; validity: number } {
  const validity = leaseTime - elapsed - driftOf(leaseTime);
  return { held: granted >= quorumOf(n) && validity > 0, validity };
}
