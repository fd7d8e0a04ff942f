/**
 * Fault injection: rule matching, a seeded PRNG and validation of fault configurations.
 *
 * @module
 */

/**
 * A limit of the service the bridge can answer with, as Upstash does when it is reached:
 * `"requests"` (the plan's request budget), `"connections"` (concurrent connections),
 * `"request-size"`, `"record-size"` (one value), `"key-size"`, `"storage"` (the data size quota).
 */
export type FaultLimit =
  | "requests"
  | "connections"
  | "request-size"
  | "record-size"
  | "key-size"
  | "storage";

/**
 * The service's error text for each limit (Upstash docs, redis/troubleshooting/*; the request
 * budget's as the service words it, with its counts and page).
 */
export const LIMIT_REPLIES: Readonly<Record<FaultLimit, string>> = {
  requests:
    "ERR max requests limit exceeded. Limit: 500000, Usage: 500000. See https://upstash.com/docs/redis/troubleshooting/max_requests_limit for details",
  connections: "ERR max concurrent connections exceeded",
  "request-size": "ERR max request size exceeded",
  "record-size": "ERR max single record size exceeded",
  "key-size": "ERR max key size exceeded",
  storage: "ERR DB capacity quota exceeded",
};

const LIMITS = Object.keys(LIMIT_REPLIES) as FaultLimit[];

/**
 * One fault rule. Rules are checked in order for each data request; the first rule that matches,
 * is not spent and wins its random draw decides the request's fate.
 */
export interface FaultRule {
  /**
   * - `"fail"`: answer without touching Redis (default mode `"503"`: HTTP 503
   *   `{"error":"bridge fault: ..."}`);
   * - `"lose"`: apply the request to Redis, then lose the response (default mode `"close"`).
   */
  action: "fail" | "lose";
  /**
   * How the response is lost:
   * - `"close"`: destroy the socket without a response, so `fetch` throws and `@upstash/redis`
   *   retries (re-sending a request that was already applied, for `"lose"`);
   * - `"503"`: answer HTTP 503 with a JSON error (the client does not retry);
   * - `"hang"`: never answer; the socket is destroyed after {@link FaultRule.hangMs}, or when
   *   the bridge closes;
   * - `"status"`: answer HTTP {@link FaultRule.status} with `{"error":"bridge fault: ..."}`
   *   (e.g. 429, 404, 502);
   * - `"limit"`: answer as the service does when {@link FaultRule.limit} is reached: HTTP 400
   *   (or {@link FaultRule.status}) with the service's error text, e.g.
   *   `{"error":"ERR max requests limit exceeded. Limit: 500000, Usage: 500000. See … for details"}`;
   *   with `action: "fail"` only (the service refuses such a request before running it).
   *
   * Default: `"close"` for `"lose"`, `"503"` for `"fail"`.
   */
  mode?: "close" | "503" | "hang" | "status" | "limit";
  /**
   * For mode `"status"` (required): the HTTP status answered, an integer in [400, 599]. For mode
   * `"limit"`: the status its text comes with. Default: `400`.
   */
  status?: number;
  /** For mode `"limit"` (required): which limit of the service is reached. */
  limit?: FaultLimit;
  /**
   * Only requests containing a command with this name (compared lower-cased, e.g. `"evalsha"`,
   * `"eval"`, `"ping"`), or running the script with this SHA1 (40 hex characters: an EVALSHA of
   * it, or an EVAL of its body), so that one script's requests can be failed while others pass.
   * Default: every data request.
   */
  match?: string;
  /** Affect at most this many requests, then the rule is spent. Default: unlimited. */
  times?: number;
  /**
   * Probability in `[0, 1]` that a matching request is affected, drawn from the seeded PRNG
   * (see {@link FaultConfig.seed}). Default: `1`.
   */
  rate?: number;
  /** For mode `"hang"`: destroy the socket after this many milliseconds. Default: never. */
  hangMs?: number;
}

/** The fault configuration of a bridge. Setting one replaces the previous one entirely. */
export interface FaultConfig {
  /** Rules, checked in order. Default: none. */
  rules?: FaultRule[];
  /** Latency in milliseconds added before each data request is processed. Default: `0`. */
  delayMs?: number;
  /**
   * Seed of the PRNG used for {@link FaultRule.rate} draws; the same seed and the same sequence
   * of requests give the same faults. Default: `1`.
   */
  seed?: number;
  /**
   * Ends every subscription stream opened from now on this many milliseconds after its
   * confirmation, as hosts end long responses (Upstash Realtime renews its own streams every
   * 300 s). Default: never.
   */
  streamLifetimeMs?: number;
  /**
   * How {@link streamLifetimeMs} ends a stream: `"end"` finishes the response, `"cut"` destroys
   * its connection mid-response. Default: `"end"`.
   */
  streamEnd?: "end" | "cut";
}

/** What to do with one request, as decided by {@link FaultInjector.decide}. */
export interface FaultDecision {
  /** Whether Redis sees the request. */
  action: "fail" | "lose";
  /** How the client is answered. */
  mode: "close" | "503" | "hang" | "status" | "limit";
  /** For `"hang"`: milliseconds until the socket is destroyed, `undefined` for never. */
  hangMs: number | undefined;
  /** For `"status"` and `"limit"`: the HTTP status answered. */
  status: number | undefined;
  /** For `"limit"`: the limit whose text is answered. */
  limit: FaultLimit | undefined;
}

/**
 * A 32-bit seeded pseudo-random generator (the "mulberry32" construction). Returns a function
 * yielding floats in `[0, 1)`.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Checks a fault configuration (e.g. a parsed JSON body) and returns a normalised copy.
 *
 * @throws TypeError describing the first invalid field.
 */
export function parseFaultConfig(input: unknown): FaultConfig {
  if (!isRecord(input)) throw new TypeError("fault config must be an object");
  const config: FaultConfig = {};
  if (input.delayMs !== undefined) config.delayMs = nonNegative(input.delayMs, "delayMs");
  if (input.seed !== undefined) {
    if (typeof input.seed !== "number" || !Number.isInteger(input.seed)) {
      throw new TypeError("seed must be an integer");
    }
    config.seed = input.seed;
  }
  if (input.streamLifetimeMs !== undefined) {
    config.streamLifetimeMs = nonNegative(input.streamLifetimeMs, "streamLifetimeMs");
  }
  if (input.streamEnd !== undefined) {
    if (input.streamEnd !== "end" && input.streamEnd !== "cut") {
      throw new TypeError('streamEnd must be "end" or "cut"');
    }
    config.streamEnd = input.streamEnd;
  }
  if (input.rules !== undefined) {
    if (!Array.isArray(input.rules)) throw new TypeError("rules must be an array");
    config.rules = input.rules.map((rule: unknown, index) => parseRule(rule, `rules[${index}]`));
  }
  return config;
}

function parseRule(input: unknown, where: string): FaultRule {
  if (!isRecord(input)) throw new TypeError(`${where} must be an object`);
  const { action, mode, match, times, rate, hangMs, status, limit } = input;
  if (action !== "fail" && action !== "lose") {
    throw new TypeError(`${where}.action must be "fail" or "lose"`);
  }
  const rule: FaultRule = { action };
  if (mode !== undefined) {
    if (!MODES.includes(mode as NonNullable<FaultRule["mode"]>)) {
      throw new TypeError(`${where}.mode must be "close", "503", "hang", "status" or "limit"`);
    }
    rule.mode = mode as NonNullable<FaultRule["mode"]>;
  }
  if (status !== undefined) {
    if (typeof status !== "number" || !Number.isInteger(status) || status < 400 || status > 599) {
      throw new TypeError(`${where}.status must be an integer in [400, 599]`);
    }
    if (rule.mode !== "status" && rule.mode !== "limit") {
      throw new TypeError(`${where}.status goes with mode "status" or "limit"`);
    }
    rule.status = status;
  } else if (rule.mode === "status") {
    throw new TypeError(`${where}.status is required with mode "status"`);
  }
  if (limit !== undefined) {
    if (!LIMITS.includes(limit as FaultLimit)) {
      throw new TypeError(`${where}.limit must be one of ${LIMITS.join(", ")}`);
    }
    if (rule.mode !== "limit") throw new TypeError(`${where}.limit goes with mode "limit"`);
    rule.limit = limit as FaultLimit;
  } else if (rule.mode === "limit") {
    throw new TypeError(`${where}.limit is required with mode "limit"`);
  }
  if (rule.mode === "limit" && action !== "fail") {
    throw new TypeError(`${where}: mode "limit" goes with action "fail" (nothing is applied)`);
  }
  if (match !== undefined) {
    if (typeof match !== "string" || match === "") {
      throw new TypeError(`${where}.match must be a non-empty string`);
    }
    rule.match = match.toLowerCase();
  }
  if (times !== undefined) {
    rule.times = nonNegative(times, `${where}.times`);
    if (!Number.isInteger(rule.times)) throw new TypeError(`${where}.times must be an integer`);
  }
  if (rate !== undefined) {
    rule.rate = nonNegative(rate, `${where}.rate`);
    if (rule.rate > 1) throw new TypeError(`${where}.rate must be between 0 and 1`);
  }
  if (hangMs !== undefined) rule.hangMs = nonNegative(hangMs, `${where}.hangMs`);
  return rule;
}

const MODES: readonly NonNullable<FaultRule["mode"]>[] = [
  "close",
  "503",
  "hang",
  "status",
  "limit",
];

function nonNegative(value: unknown, name: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new TypeError(`${name} must be a finite number >= 0`);
  }
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Holds the active {@link FaultConfig} and decides, request by request, which fault (if any)
 * applies. Replacing the configuration resets the rule counters and re-seeds the PRNG.
 */
export class FaultInjector {
  #config: FaultConfig = {};
  #used: number[] = [];
  #random: () => number = seededRandom(1);
  #injected = 0;

  /** @param config initial configuration, validated with {@link parseFaultConfig}. */
  constructor(config: FaultConfig = {}) {
    this.set(config);
  }

  /** Replaces the configuration (validated with {@link parseFaultConfig}). */
  set(config: FaultConfig): void {
    this.#config = parseFaultConfig(config);
    this.#used = (this.#config.rules ?? []).map(() => 0);
    this.#random = seededRandom(this.#config.seed ?? 1);
  }

  /** Removes every rule and the added latency. */
  clear(): void {
    this.set({});
  }

  /** Latency in milliseconds to add before processing a data request. */
  get delayMs(): number {
    return this.#config.delayMs ?? 0;
  }

  /** How a new subscription stream is ended (see {@link FaultConfig.streamLifetimeMs}). */
  get streamLifetime(): { ms: number; end: "end" | "cut" } | undefined {
    const ms = this.#config.streamLifetimeMs;
    return ms === undefined ? undefined : { ms, end: this.#config.streamEnd ?? "end" };
  }

  /** Number of faults injected since creation or the last {@link FaultInjector.resetCount}. */
  get injected(): number {
    return this.#injected;
  }

  /** Sets the injected-fault counter back to zero. */
  resetCount(): void {
    this.#injected = 0;
  }

  /**
   * Decides the fate of a data request from the lower-cased names of its commands and the SHA1s
   * of the scripts they run. Returns `undefined` when no rule applies. A rule with
   * `0 < rate < 1` consumes one PRNG draw per matching request while it is not spent.
   */
  decide(
    commandNames: readonly string[],
    scripts: readonly string[] = [],
  ): FaultDecision | undefined {
    const rules = this.#config.rules ?? [];
    for (const [index, rule] of rules.entries()) {
      const used = this.#used[index] ?? 0;
      if (rule.times !== undefined && used >= rule.times) continue;
      const { match } = rule;
      if (match !== undefined && !commandNames.includes(match) && !scripts.includes(match)) {
        continue;
      }
      const rate = rule.rate ?? 1;
      if (rate <= 0) continue;
      if (rate < 1 && this.#random() >= rate) continue;
      this.#used[index] = used + 1;
      this.#injected += 1;
      const mode = rule.mode ?? (rule.action === "lose" ? "close" : "503");
      return {
        action: rule.action,
        mode,
        hangMs: rule.hangMs,
        status: mode === "limit" ? (rule.status ?? 400) : rule.status,
        limit: rule.limit,
      };
    }
    return undefined;
  }
}
