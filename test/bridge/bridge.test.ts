/**
 * Protocol and fault-injection tests of the Upstash-compatible bridge, driven by the real
 * `@upstash/redis` client and by raw `fetch` for the wire shapes.
 */

import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { createClient } from "@redis/client";
import type { RedisConfigNodejs } from "@upstash/redis";
import { Redis } from "@upstash/redis";
import {
  afterAll,
  afterEach,
  beforeAll,
  beforeEach,
  describe,
  expect,
  inject,
  test,
  vi,
} from "vitest";
import {
  type FaultLimit,
  LIMIT_REPLIES,
  parseFaultConfig,
  seededRandom,
} from "../../src/bridge/faults.js";
import {
  type Bridge,
  DEFAULT_BLOCKING_CONNECTIONS,
  DEFAULT_MAX_SUBSCRIPTIONS,
  RedisUnavailableError,
  type RequestLogEntry,
  startBridge,
} from "../../src/bridge/index.js";
import { runBridgeCli } from "../support/bridge-cli.js";
import type { BridgeEndpoint, PrivateBridge } from "../support/env.js";
import {
  bridgeControl,
  bridgeRedis,
  keyPrefix,
  sharedBridge,
  startPrivateBridge,
  useRawRedis,
} from "../support/env.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";

const P = keyPrefix();
let keyCounter = 0;
/** A key no other test uses. */
const key = (label: string) => `${P}${label}:${++keyCounter}`;

const raw = useRawRedis();

/** The value of `k` as text, read directly from Redis. */
async function rawGet(k: string): Promise<string | null> {
  const value = await raw.get(k);
  return value === null ? null : value.toString("utf8");
}

interface RawResponse {
  status: number;
  body: unknown;
}

/** A raw request to a bridge, as `@upstash/redis` would send it. */
async function post(
  path: string,
  body: unknown,
  options: { base64?: boolean; token?: string | null; endpoint?: BridgeEndpoint } = {},
): Promise<RawResponse> {
  const endpoint = options.endpoint ?? sharedBridge();
  const token = options.token === undefined ? endpoint.token : options.token;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (options.base64) headers["upstash-encoding"] = "base64";
  const response = await fetch(`${endpoint.url}${path}`, {
    method: "POST",
    headers,
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

describe("authentication and routes", () => {
  test("rejects a missing or wrong token with 401", async () => {
    expect(await post("/", ["PING"], { token: null })).toEqual({
      status: 401,
      body: { error: "Unauthorized" },
    });
    expect(await post("/", ["PING"], { token: "wrong" })).toEqual({
      status: 401,
      body: { error: "Unauthorized" },
    });
    const control = await fetch(`${sharedBridge().url}/__bridge/stats`);
    expect(control.status).toBe(401);
  });

  test("accepts the token as ?_token=", async () => {
    const { url, token } = sharedBridge();
    const response = await fetch(`${url}/?_token=${token}`, {
      method: "POST",
      body: JSON.stringify(["PING"]),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ result: "PONG" });
  });

  test("GET / identifies the bridge; unknown paths are 404", async () => {
    const { url } = sharedBridge();
    const root = await fetch(`${url}/`);
    expect(root.status).toBe(200);
    expect(await root.json()).toEqual({ result: "edgelock-bridge" });
    expect((await post("/set/a/b", [])).status).toBe(404);
  });
});

describe("wire format (raw fetch)", () => {
  test("base64-encodes strings at any depth, leaves a top-level OK, numbers and null", async () => {
    expect(await post("/", ["PING"], { base64: true })).toEqual({
      status: 200,
      body: { result: b64("PONG") },
    });
    expect(await post("/", ["SET", key("ok"), "v"], { base64: true })).toEqual({
      status: 200,
      body: { result: "OK" },
    });
    const script = "return {1, 'a', false, {-2, redis.status_reply('OK'), 'é'}}";
    expect(await post("/", ["EVAL", script, 0], { base64: true })).toEqual({
      status: 200,
      body: { result: [1, b64("a"), null, [-2, b64("OK"), b64("é")]] },
    });
    expect(await post("/", ["GET", key("missing")], { base64: true })).toEqual({
      status: 200,
      body: { result: null },
    });
  });

  test("keeps binary values byte for byte in base64; plain mode gives UTF-8 text", async () => {
    const k = key("binary");
    await raw.set(k, Buffer.from([0xff, 0x00, 0xc3]));
    expect(await post("/", ["GET", k], { base64: true })).toEqual({
      status: 200,
      body: { result: "/wDD" },
    });
    expect(await post("/", ["GET", k])).toEqual({
      status: 200,
      body: { result: "\ufffd\u0000\ufffd" },
    });
  });

  test("stringifies number and boolean arguments; rejects objects, arrays and null", async () => {
    const k = key("args");
    expect((await post("/", ["SET", k, 12.5, "PX", 60000])).status).toBe(200);
    expect(await rawGet(k)).toBe("12.5");
    expect((await post("/", ["SET", k, true])).status).toBe(200);
    expect(await rawGet(k)).toBe("true");
    for (const bad of [{ a: 1 }, [1], null]) {
      const response = await post("/", ["SET", k, bad]);
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: expect.stringContaining("argument 2") });
    }
    expect((await post("/", "not json")).status).toBe(400);
    expect((await post("/", [])).status).toBe(400);
    expect((await post("/pipeline", [])).status).toBe(400);
    expect((await post("/pipeline", ["PING"])).status).toBe(400);
  });

  test("a Redis error reply on a single command is 400 with the message intact", async () => {
    expect(await post("/", ["EVALSHA", "0".repeat(40), 0])).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/^NOSCRIPT No matching script/) },
    });
  });

  test("pipeline answers 200 with per-entry results and errors", async () => {
    const k = key("pipe");
    const response = await post(
      "/pipeline",
      [
        ["SET", k, "v"],
        ["HINCRBY", k, "f", 1],
        ["GET", k],
        ["EVAL", "return redis.error_reply('boom')", 0],
      ],
      { base64: true },
    );
    expect(response).toEqual({
      status: 200,
      body: [
        { result: "OK" },
        { error: expect.stringMatching(/^WRONGTYPE/) },
        { result: b64("v") },
        { error: expect.stringContaining("boom") },
      ],
    });
  });

  test("multi-exec applies atomically and reports a WRONGTYPE entry", async () => {
    const k = key("tx");
    const response = await post("/multi-exec", [
      ["SET", k, "1"],
      ["HSET", k, "a", "b"],
      ["INCR", k],
    ]);
    expect(response).toEqual({
      status: 200,
      body: [{ result: "OK" }, { error: expect.stringMatching(/^WRONGTYPE/) }, { result: 2 }],
    });
  });

  test("EXECABORT answers 400 and applies nothing", async () => {
    const k1 = key("abort");
    const k2 = key("abort");
    const response = await post("/multi-exec", [
      ["SET", k1, "1"],
      ["SET", k2],
      ["INCR", k1],
    ]);
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ error: expect.stringMatching(/^EXECABORT/) });
    expect(await raw.exists([k1, k2])).toBe(0);
  });

  test("concurrent transactions never interleave", async () => {
    const k = key("serial");
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        post("/multi-exec", [
          ["INCR", k],
          ["INCR", k],
        ]),
      ),
    );
    const pairs = results.map(({ body }) => (body as { result: number }[]).map((e) => e.result));
    for (const [first, second] of pairs) expect(second).toBe((first ?? 0) + 1);
    expect(await rawGet(k)).toBe("40");
  });

  test("refuses commands that would wedge the shared connection", async () => {
    for (const command of [
      ["SUBSCRIBE", "ch"],
      ["psubscribe", "c*"],
      ["SSUBSCRIBE", "ch"],
      ["MONITOR"],
      ["BLPOP", key("list"), 0],
      ["XREAD", "BLOCK", 0, "STREAMS", key("s"), "$"],
      ["MULTI"],
      ["SELECT", 1],
    ]) {
      const response = await post("/", command);
      expect(response.status, JSON.stringify(command)).toBe(400);
    }
    const pipeline = await post("/pipeline", [["PING"], ["SUBSCRIBE", "ch"]]);
    expect(pipeline.status).toBe(400);
    // A bounded block is refused too, as the Upstash REST API lists blocking commands as not
    // supported (the default `blocking: "refuse"`), and the shared connection still works.
    expect(await post("/", ["BLPOP", key("list"), 0.01])).toEqual({
      status: 400,
      body: { error: "ERR blocking command 'blpop' is not supported over REST" },
    });
    expect(await post("/", ["PING"])).toEqual({ status: 200, body: { result: "PONG" } });
  });
});

const CLIENT_CONFIGS: [string, Partial<RedisConfigNodejs>][] = [
  ["default client (auto-pipelining, base64)", {}],
  ["enableAutoPipelining: false", { enableAutoPipelining: false }],
  ["responseEncoding: false", { responseEncoding: false }],
];

describe.each(CLIENT_CONFIGS)("@upstash/redis with %s", (name, options) => {
  const redis = bridgeRedis(options);

  test("ping, set/get of unicode and JSON strings", async () => {
    expect(await redis.ping()).toBe("PONG");
    const text = "héllo wörld ✓ 🚀 日本語 e\u0301 \u0000 end";
    const k = key("unicode");
    expect(await redis.set(k, text)).toBe("OK");
    expect(await redis.get(k)).toBe(text);
    expect(await rawGet(k)).toBe(text);

    const j = key("json");
    await redis.set(j, { a: 1, nested: { b: "ü" } });
    expect(await rawGet(j)).toBe('{"a":1,"nested":{"b":"ü"}}');
    expect(await redis.get(j)).toEqual({ a: 1, nested: { b: "ü" } });
    expect(await redis.set(j, "OK")).toBe("OK");
    expect(await redis.get(j)).toBe("OK");
  });

  test("numbers and booleans are stored as their text", async () => {
    const k = key("num");
    await redis.set(k, 12345, { px: 60000 });
    expect(await rawGet(k)).toBe("12345");
    expect(await redis.get(k)).toBe(12345);
    expect(await redis.incrby(k, -345)).toBe(12000);
    const h = key("hash");
    expect(await redis.hset(h, { n: 7, flag: true, s: "x" })).toBe(3);
    expect((await raw.hGet(h, "flag"))?.toString()).toBe("true");
    expect(await redis.hgetall(h)).toEqual({ n: 7, flag: true, s: "x" });
  });

  test("eval results: nil, integers, strings, status, nested arrays, errors", async () => {
    const k = key("eval");
    expect(await redis.eval("return nil", [], [])).toBeNull();
    expect(await redis.eval("return 42", [], [])).toBe(42);
    expect(await redis.eval("return -7", [], [])).toBe(-7);
    expect(await redis.eval("return 'hello'", [], [])).toBe("hello");
    expect(await redis.eval("return redis.status_reply('OK')", [], [])).toBe("OK");
    expect(await redis.eval("return redis.status_reply('FINE')", [], [])).toBe("FINE");
    expect(
      await redis.eval(
        "return {1, 'a', false, {2, 'b', redis.status_reply('OK')}, nil, 9}",
        [],
        [],
      ),
    ).toEqual([1, "a", null, [2, "b", "OK"]]);
    expect(
      await redis.eval(
        "redis.call('SET', KEYS[1], ARGV[1]); return {KEYS[1], ARGV[1], ARGV[2]}",
        [k],
        ["v1", 30000],
      ),
    ).toEqual([k, "v1", 30000]);
    expect(await rawGet(k)).toBe("v1");
    // An error nested in a table comes back as its message (documented bridge choice).
    expect(await redis.eval("return {1, redis.error_reply('nested')}", [], [])).toEqual([
      1,
      expect.stringContaining("nested"),
    ]);
    await expect(redis.eval("return redis.error_reply('boom')", [], [])).rejects.toThrow(/boom/);
    await expect(redis.eval("return redis.call('NOPE')", [], [])).rejects.toThrow(/Unknown/i);
  });

  test("evalsha of an unknown script fails with NOSCRIPT; createScript().exec() falls back", async () => {
    const unknown = createHash("sha1").update(`${P}never loaded`).digest("hex");
    await expect(redis.evalsha(unknown, [], [])).rejects.toThrow(/NOSCRIPT/);

    const bridge = await startPrivateBridge();
    try {
      const client = bridge.redis(options);
      // A script no one has loaded yet: unique text, so its SHA-1 is new to Redis.
      const script = client.createScript<string>(`-- ${P}${name}\nreturn ARGV[1]`);
      expect(await script.exec([], ["first"])).toBe("first");
      expect(await script.exec([], ["second"])).toBe("second");
      const { byCommand } = bridge.bridge.stats();
      expect(byCommand).toMatchObject({ evalsha: 2, eval: 1 });
    } finally {
      await bridge.close();
    }
  });

  test("pipeline with keepErrors and multi with a WRONGTYPE entry", async () => {
    const k = key("p");
    const pipeline = redis.pipeline().set(k, "v").hincrby(k, "f", 1).get(k);
    expect(await pipeline.exec({ keepErrors: true })).toEqual([
      { result: "OK", error: undefined },
      { result: undefined, error: expect.stringMatching(/^WRONGTYPE/) },
      { result: "v", error: undefined },
    ]);
    await expect(redis.pipeline().get(k).hincrby(k, "f", 1).exec()).rejects.toThrow(
      /Command 2 \[ hincrby \] failed: WRONGTYPE/,
    );

    const m = key("m");
    const results = await redis.multi().set(m, 1).hset(m, { a: "b" }).incr(m).exec({
      keepErrors: true,
    });
    expect(results).toEqual([
      { result: "OK", error: undefined },
      { result: undefined, error: expect.stringMatching(/^WRONGTYPE/) },
      { result: 2, error: undefined },
    ]);
  });
});

describe("auto-pipelining", () => {
  test("concurrent commands share /pipeline requests", async () => {
    const bridge = await startPrivateBridge();
    try {
      const redis = bridge.redis();
      const k = key("batch");
      const results = await Promise.all(Array.from({ length: 100 }, () => redis.incr(k)));
      expect(new Set(results).size).toBe(100);
      expect(await rawGet(k)).toBe("100");
      const stats = bridge.bridge.stats();
      expect(stats.byCommand.incr).toBe(100);
      expect(stats.byRoute.pipeline).toBeLessThan(20);
    } finally {
      await bridge.close();
    }
  });
});

describe("faults", () => {
  let bridge: PrivateBridge;
  beforeEach(async () => {
    bridge = await startPrivateBridge();
  });
  afterEach(async () => {
    await bridge.close();
  });

  test("fail answers 503 without touching Redis", async () => {
    bridge.bridge.setFaults({ rules: [{ action: "fail" }] });
    const k = key("fail");
    const response = await post("/", ["SET", k, "v"], { endpoint: bridge });
    expect(response).toEqual({
      status: 503,
      body: { error: expect.stringMatching(/^bridge fault: /) },
    });
    await expect(bridge.redis().incr(k)).rejects.toThrow(/bridge fault/);
    expect(await raw.exists(k)).toBe(0);
    expect(bridge.bridge.stats().faultsInjected).toBe(2);
  });

  test("lose/close with retries: 0 applies INCR once and the client throws", async () => {
    bridge.bridge.setFaults({ rules: [{ action: "lose", match: "incr" }] });
    const k = key("close0");
    await expect(bridge.redis({ retry: { retries: 0 } }).incr(k)).rejects.toThrow(/fetch failed/);
    expect(await rawGet(k)).toBe("1");
    expect(bridge.bridge.stats().byCommand.incr).toBe(1);
  });

  test("lose/close with default retries replays INCR: applied twice", async () => {
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "close", match: "incr", times: 1 }],
    });
    const k = key("replay");
    expect(await bridge.redis().incr(k)).toBe(2);
    expect(await rawGet(k)).toBe("2");
    expect(bridge.bridge.stats()).toMatchObject({ faultsInjected: 1, byCommand: { incr: 2 } });
  });

  test("lose/503 applies once and the client throws without retrying", async () => {
    bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "503" }] });
    const k = key("lost503");
    await expect(bridge.redis().incr(k)).rejects.toThrow(/bridge fault: response lost/);
    expect(await rawGet(k)).toBe("1");
    expect(bridge.bridge.stats().byCommand.incr).toBe(1);
  });

  test("lose/hang applies once; the client's signal rejects", async () => {
    bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "hang" }] });
    const k = key("hang");
    const redis = bridge.redis({ signal: () => AbortSignal.timeout(300) });
    await expect(redis.incr(k)).rejects.toThrow(/abort|timeout/i);
    expect(await rawGet(k)).toBe("1");
  });

  test("lose/hang with hangMs drops the socket after the delay", async () => {
    bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "hang", hangMs: 100 }] });
    const k = key("hangms");
    const started = performance.now();
    await expect(bridge.redis({ retry: { retries: 0 } }).incr(k)).rejects.toThrow(/fetch failed/);
    expect(performance.now() - started).toBeGreaterThanOrEqual(90);
    expect(await rawGet(k)).toBe("1");
  });

  test("close() ends a hanging request", async () => {
    bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "hang" }] });
    const k = key("hangclose");
    const pending = bridge.redis({ retry: { retries: 0 } }).incr(k);
    const outcome = pending.then(
      () => "resolved",
      () => "rejected",
    );
    await vi.waitFor(async () => expect(await rawGet(k)).toBe("1"));
    await bridge.close();
    expect(await outcome).toBe("rejected");
  });

  test("match and times target only the named command", async () => {
    bridge.bridge.setFaults({ rules: [{ action: "fail", match: "incr", times: 2 }] });
    const redis = bridge.redis({ enableAutoPipelining: false, retry: { retries: 0 } });
    const k = key("times");
    expect(await redis.ping()).toBe("PONG");
    await expect(redis.incr(k)).rejects.toThrow(/bridge fault/);
    expect(await redis.set(k, 10)).toBe("OK");
    await expect(redis.incr(k)).rejects.toThrow(/bridge fault/);
    expect(await redis.incr(k)).toBe(11);
    expect(bridge.bridge.stats().faultsInjected).toBe(2);
  });

  test("match by a script's SHA1 targets that script only, run by EVALSHA or by EVAL", async () => {
    const target = "return redis.call('incr', KEYS[1])";
    const other = "return redis.call('incrby', KEYS[1], 10)";
    const sha = createHash("sha1").update(target, "utf8").digest("hex");
    bridge.bridge.setFaults({ rules: [{ action: "fail", match: sha }] });
    const redis = bridge.redis({ enableAutoPipelining: false, retry: { retries: 0 } });
    const k = key("script");
    await expect(redis.eval(target, [k], [])).rejects.toThrow(/bridge fault/);
    await expect(redis.evalsha(sha, [k], [])).rejects.toThrow(/bridge fault/);
    expect(await redis.eval(other, [k], [])).toBe(10);
    expect(await redis.incr(k)).toBe(11);
    expect(bridge.bridge.stats().faultsInjected).toBe(2);
    bridge.bridge.setFaults({ rules: [{ action: "fail", match: sha.toUpperCase() }] });
    await expect(redis.evalsha(sha.toUpperCase(), [k], [])).rejects.toThrow(/bridge fault/);
    expect(await rawGet(k)).toBe("11");
  });

  test("rate draws from the seeded PRNG: same seed, same sequence", async () => {
    const config = { seed: 42, rules: [{ action: "fail" as const, rate: 0.3 }] };
    const redis = bridge.redis({ enableAutoPipelining: false, retry: { retries: 0 } });
    const run = async () => {
      bridge.bridge.setFaults(config);
      const outcomes: boolean[] = [];
      for (let i = 0; i < 40; i++) {
        outcomes.push(
          await redis.ping().then(
            () => true,
            () => false,
          ),
        );
      }
      return outcomes;
    };
    const first = await run();
    const second = await run();
    expect(second).toEqual(first);
    const draw = seededRandom(42);
    const expected = first.map(() => draw() >= 0.3);
    expect(first).toEqual(expected);
    const failures = first.filter((ok) => !ok).length;
    expect(failures).toBeGreaterThan(0);
    expect(failures).toBeLessThan(40);
  });

  test("delayMs adds latency before each request", async () => {
    bridge.bridge.setFaults({ delayMs: 150 });
    const redis = bridge.redis({ enableAutoPipelining: false });
    const started = performance.now();
    expect(await redis.ping()).toBe("PONG");
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
    bridge.bridge.clearFaults();
  });

  test("runtime control endpoints set and clear faults and read stats", async () => {
    const control = bridge.control;
    const redis = bridge.redis({ enableAutoPipelining: false, retry: { retries: 0 } });
    await control.setFaults({ rules: [{ action: "fail", match: "ping" }] });
    await expect(redis.ping()).rejects.toThrow(/bridge fault/);
    expect(await control.stats()).toMatchObject({ requests: 1, faultsInjected: 1 });
    await control.clearFaults();
    expect(await redis.ping()).toBe("PONG");
    await control.resetStats();
    expect(await control.stats()).toEqual({
      requests: 0,
      byRoute: { single: 0, pipeline: 0, multiExec: 0, subscribe: 0, psubscribe: 0, publish: 0 },
      commands: 0,
      byCommand: {},
      faultsInjected: 0,
      blocking: { inUse: 0, open: 0, max: DEFAULT_BLOCKING_CONNECTIONS, refused: 0 },
      subscriptions: { open: 0, max: DEFAULT_MAX_SUBSCRIPTIONS },
    });
    await expect(control.setFaults({ rules: [{ action: "explode" }] } as never)).rejects.toThrow(
      /400/,
    );
    await expect(control.setFaults({ rules: [{ action: "fail", rate: 2 }] })).rejects.toThrow(
      /400/,
    );
    await expect(bridgeControl({ url: bridge.url, token: "wrong" }).stats()).rejects.toThrow(/401/);
  });

  test("stats count requests by route and commands by name", async () => {
    const redis = bridge.redis({ enableAutoPipelining: false });
    const k = key("stats");
    await redis.ping();
    await redis.pipeline().set(k, 1).get(k).incr(k).exec();
    await redis.multi().set(k, 5).incr(k).exec();
    await post("/", ["PING"], { endpoint: { url: bridge.url, token: "wrong" } });
    await bridge.control.stats();
    expect(bridge.bridge.stats()).toEqual({
      requests: 3,
      byRoute: { single: 1, pipeline: 1, multiExec: 1, subscribe: 0, psubscribe: 0, publish: 0 },
      commands: 6,
      byCommand: { ping: 1, set: 2, get: 1, incr: 2 },
      faultsInjected: 0,
      blocking: { inUse: 0, open: 0, max: DEFAULT_BLOCKING_CONNECTIONS, refused: 0 },
      subscriptions: { open: 0, max: DEFAULT_MAX_SUBSCRIPTIONS },
    });
    bridge.bridge.resetStats();
    expect(bridge.bridge.stats().requests).toBe(0);
  });

  const limits = Object.keys(LIMIT_REPLIES) as FaultLimit[];

  test.each(limits)(
    "limit %s answers the service's text with 400 on every route, without touching Redis",
    async (limit) => {
      bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "limit", limit }] });
      const k = key(`limit-${limit}`);
      const refused = { status: 400, body: { error: LIMIT_REPLIES[limit] } };
      expect(await post("/", ["SET", k, "v"], { endpoint: bridge })).toEqual(refused);
      expect(await post("/pipeline", [["SET", k, "v"]], { endpoint: bridge })).toEqual(refused);
      expect(await post("/multi-exec", [["SET", k, "v"]], { endpoint: bridge })).toEqual(refused);
      expect(await raw.exists(k)).toBe(0);
      expect(bridge.bridge.stats().faultsInjected).toBe(3);
    },
  );

  test("the service's texts: the request budget's with its counts and page", () => {
    expect(LIMIT_REPLIES).toEqual({
      requests:
        "ERR max requests limit exceeded. Limit: 500000, Usage: 500000. See https://upstash.com/docs/redis/troubleshooting/max_requests_limit for details",
      connections: "ERR max concurrent connections exceeded",
      "request-size": "ERR max request size exceeded",
      "record-size": "ERR max single record size exceeded",
      "key-size": "ERR max key size exceeded",
      storage: "ERR DB capacity quota exceeded",
    });
  });

  test("a limit comes with the rule's status when it names one", async () => {
    bridge.bridge.setFaults({
      rules: [{ action: "fail", mode: "limit", limit: "connections", status: 503 }],
    });
    expect(await post("/", ["PING"], { endpoint: bridge })).toEqual({
      status: 503,
      body: { error: "ERR max concurrent connections exceeded" },
    });
  });

  test("status answers the rule's status: before Redis with fail, after it with lose", async () => {
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "status", status: 429 }] });
    const k = key("status");
    expect(await post("/", ["INCR", k], { endpoint: bridge })).toEqual({
      status: 429,
      body: { error: "bridge fault: injected failure" },
    });
    expect(await raw.exists(k)).toBe(0);
    bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "status", status: 502 }] });
    expect(await post("/", ["INCR", k], { endpoint: bridge })).toEqual({
      status: 502,
      body: { error: "bridge fault: response lost" },
    });
    expect(await rawGet(k)).toBe("1");
  });

  test.each([
    [
      { action: "fail", mode: "teapot" },
      /mode must be "close", "503", "hang", "status" or "limit"/,
    ],
    [{ action: "fail", mode: "status" }, /status is required with mode "status"/],
    [{ action: "fail", mode: "status", status: 200 }, /status must be an integer in \[400, 599\]/],
    [{ action: "fail", mode: "status", status: 4.5e2 + 0.5 }, /status must be an integer/],
    [{ action: "fail", status: 429 }, /status goes with mode "status" or "limit"/],
    [{ action: "fail", mode: "limit" }, /limit is required with mode "limit"/],
    [{ action: "fail", mode: "limit", limit: "bandwidth" }, /limit must be one of requests, /],
    [{ action: "fail", limit: "requests" }, /limit goes with mode "limit"/],
    [{ action: "lose", mode: "limit", limit: "requests" }, /mode "limit" goes with action "fail"/],
  ])("refuses the rule %j", (rule, message) => {
    expect(() => parseFaultConfig({ rules: [rule] })).toThrow(TypeError);
    expect(() => parseFaultConfig({ rules: [rule] })).toThrow(message);
  });

  test("faults from the start option apply immediately", async () => {
    const own = await startPrivateBridge({ rules: [{ action: "fail", times: 1 }] });
    try {
      const redis = own.redis({ enableAutoPipelining: false });
      await expect(redis.ping()).rejects.toThrow(/bridge fault/);
      expect(await redis.ping()).toBe("PONG");
    } finally {
      await own.close();
    }
  });
});

describe("redis availability", () => {
  test("startRedisServer explains how to install a missing redis-server", async () => {
    const path = process.env.PATH;
    process.env.PATH = fileURLToPath(new URL("../support/", import.meta.url));
    try {
      await expect(startRedisServer()).rejects.toThrow(
        "redis-server not found on PATH: install it with `apt-get install -y redis-server`",
      );
    } finally {
      process.env.PATH = path;
    }
  });

  test("startBridge rejects when Redis is unreachable", async () => {
    await expect(
      startBridge({ redisUrl: "redis://127.0.0.1:1", token: "t" }),
    ).rejects.toBeInstanceOf(RedisUnavailableError);
  });

  test.each([
    ["127.0.0.1:6379", /did you mean redis:\/\/127\.0\.0\.1:6379\?/],
    ["localhost", /did you mean redis:\/\/localhost\?/],
    ["http://127.0.0.1:6379", /e\.g\. redis:\/\/127\.0\.0\.1:6379/],
  ])("startBridge refuses redisUrl %s before connecting (TypeError)", async (url, message) => {
    const started = startBridge({ redisUrl: url, token: "t" });
    await expect(started).rejects.toBeInstanceOf(TypeError);
    await expect(started).rejects.toThrow(message);
  });

  test("answers 500 when Redis goes away", async () => {
    const server = await startRedisServer();
    const bridge = await startBridge({ redisUrl: server.url, token: "t" });
    try {
      const endpoint = { url: bridge.url, token: "t" };
      expect(await post("/", ["PING"], { endpoint })).toEqual({
        status: 200,
        body: { result: "PONG" },
      });
      await server.stop();
      expect(await post("/", ["PING"], { endpoint })).toEqual({
        status: 500,
        body: { error: "bridge: redis unavailable" },
      });
      expect(await post("/multi-exec", [["PING"]], { endpoint })).toEqual({
        status: 500,
        body: { error: "bridge: redis unavailable" },
      });
    } finally {
      await bridge.close();
      await server.stop();
    }
  });
});

describe("blocking commands on pooled connections", () => {
  // A redis-server of its own, so that INFO's blocked_clients counts only these tests' waiters.
  const POOL = 4;
  const TOKEN = "blocking-token";
  let server: RedisServer;
  let bridge: Bridge;
  let direct: ReturnType<typeof createClient>;
  const endpoint = () => ({ url: bridge.url, token: TOKEN });

  beforeAll(async () => {
    server = await startRedisServer();
    bridge = await startBridge({
      redisUrl: server.url,
      token: TOKEN,
      blockingConnections: POOL,
      blocking: "block",
    });
    direct = createClient({ url: server.url, RESP: 2, disableClientInfo: true });
    direct.on("error", () => undefined);
    await direct.connect();
  });
  afterAll(async () => {
    await direct?.close();
    await bridge?.close();
    await server?.stop();
  });
  afterEach(() => {
    bridge.clearFaults();
  });

  /** A real client on this block's bridge; `exec` is never auto-pipelined anyway. */
  const client = (options: Partial<RedisConfigNodejs> = {}) =>
    new Redis({ url: bridge.url, token: TOKEN, ...options });

  async function blockedClients(): Promise<number> {
    const info = await direct.info("clients");
    return Number(/blocked_clients:(\d+)/.exec(info)?.[1]);
  }

  /** Resolves once Redis itself counts `n` clients blocked (the commands really are waiting). */
  const untilBlocked = (n: number) =>
    vi.waitFor(async () => expect(await blockedClients()).toBe(n), {
      timeout: 5_000,
      interval: 10,
    });

  /** Times a GET through the bridge on another client: it must not queue behind a block. */
  async function timedGet(): Promise<number> {
    const g = key("get");
    await direct.set(g, "here");
    const started = performance.now();
    expect(await client({ enableAutoPipelining: false }).get(g)).toBe("here");
    return performance.now() - started;
  }

  test("a BLPOP in flight does not delay a concurrent GET; an RPUSH from another client wakes it", async () => {
    const k = key("wake");
    const started = performance.now();
    const popped = client().exec<[string, string]>(["BLPOP", k, 5]);
    await untilBlocked(1);
    expect(await timedGet()).toBeLessThan(300);
    expect(await client().rpush(k, "v1")).toBe(1);
    expect(await popped).toEqual([k, "v1"]);
    // Woken by the push, well before the 5 s block would end.
    expect(performance.now() - started).toBeLessThan(2_500);
    expect(bridge.stats().blocking).toMatchObject({ inUse: 0, open: 1, max: POOL });
  });

  test("a BLPOP that times out answers null after its timeout", async () => {
    const started = performance.now();
    expect(await client().exec(["BLPOP", key("empty"), 0.2])).toBeNull();
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  });

  test("BRPOP, BLMOVE, BZPOPMIN and XREAD BLOCK run on the pool as well", async () => {
    const [list, from, to, zset, stream] = ["brpop", "from", "to", "zset", "stream"].map(key) as [
      string,
      string,
      string,
      string,
      string,
    ];
    const redis = client();
    const pending = Promise.all([
      redis.exec(["BRPOP", list, 5]),
      redis.exec(["BLMOVE", from, to, "LEFT", "RIGHT", 5]),
      redis.exec(["BZPOPMIN", zset, 5]),
      redis.exec(["XREAD", "BLOCK", 5000, "STREAMS", stream, "$"]),
    ]);
    await untilBlocked(4);
    expect(await timedGet()).toBeLessThan(300);
    await direct.rPush(list, "r");
    await direct.rPush(from, "m");
    await direct.zAdd(zset, { score: 7, value: "z" });
    const id = await direct.xAdd(stream, "*", { f: "x" });
    const [brpop, blmove, bzpopmin, xread] = await pending;
    expect(brpop).toEqual([list, "r"]);
    expect(blmove).toBe("m");
    expect(await direct.lRange(to, 0, -1)).toEqual(["m"]);
    expect(bzpopmin).toEqual([zset, "z", 7]);
    expect(xread).toEqual([[stream, [[id, ["f", "x"]]]]]);
  });

  test("as many BLPOPs as the pool holds wait at once; one more is refused with 503", async () => {
    const k = key("many");
    bridge.resetStats();
    const waiters = Array.from({ length: POOL }, () =>
      client().exec<[string, string]>(["BLPOP", k, 5]),
    );
    await untilBlocked(POOL);
    expect(bridge.stats().blocking).toMatchObject({ inUse: POOL, open: POOL, refused: 0 });

    const refused = await fetch(`${bridge.url}/`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(["BLPOP", k, 5]),
    });
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(await refused.json()).toEqual({
      error: `bridge: all ${POOL} connections for blocking commands are busy`,
    });
    await expect(client().exec(["BLPOP", k, 5])).rejects.toThrow(
      /connections for blocking commands are busy/,
    );
    expect(await timedGet()).toBeLessThan(300);

    await direct.rPush(k, ["a", "b", "c", "d"]);
    const values = (await Promise.all(waiters)).map((reply) => reply[1]);
    expect(values.sort()).toEqual(["a", "b", "c", "d"]);
    expect(bridge.stats().blocking).toMatchObject({ inUse: 0, open: POOL, refused: 2 });
    // The connections go back to the pool: the next BLPOP is served.
    await direct.rPush(k, "e");
    expect(await client().exec(["BLPOP", k, 1])).toEqual([k, "e"]);
  });

  test("a client that disconnects mid-BLPOP frees its connection at once; a later push stays", async () => {
    const k = key("gone");
    const aborter = new AbortController();
    const request = fetch(`${bridge.url}/`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(["BLPOP", k, 30]),
      signal: aborter.signal,
    }).then(
      () => "answered",
      () => "aborted",
    );
    await untilBlocked(1);
    const aborted = performance.now();
    aborter.abort();
    expect(await request).toBe("aborted");
    await untilBlocked(0);
    await vi.waitFor(() => expect(bridge.stats().blocking.inUse).toBe(0));
    // Freed long before the 30 s block would have ended.
    expect(performance.now() - aborted).toBeLessThan(2_000);
    await direct.rPush(k, "kept");
    expect(await direct.lRange(k, 0, -1)).toEqual(["kept"]);
    expect(await client().exec(["BLPOP", k, 1])).toEqual([k, "kept"]);
  });

  test("a pipeline holding a blocking command runs on the pool, in order; MULTI never blocks", async () => {
    const k = key("pipe");
    const g = key("pipe-get");
    const pending = post(
      "/pipeline",
      [
        ["SET", g, "1"],
        ["BLPOP", k, 5],
        ["GET", g],
      ],
      { endpoint: endpoint() },
    );
    await untilBlocked(1);
    expect(await timedGet()).toBeLessThan(300);
    await direct.rPush(k, "p");
    expect(await pending).toEqual({
      status: 200,
      body: [{ result: "OK" }, { result: [k, "p"] }, { result: "1" }],
    });

    // Inside MULTI, Redis runs BLPOP as LPOP: the transaction answers at once.
    const started = performance.now();
    expect(
      await post("/multi-exec", [["BLPOP", key("none"), 5], ["PING"]], { endpoint: endpoint() }),
    ).toEqual({ status: 200, body: [{ result: null }, { result: "PONG" }] });
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  test("fault rules apply to blocking commands", async () => {
    const k = key("fault");
    await direct.rPush(k, ["1", "2", "3", "4"]);
    const once = { retry: { retries: 0 } };

    // fail: Redis never sees the BLPOP, the list keeps its values.
    bridge.setFaults({ rules: [{ action: "fail", match: "blpop", times: 1 }] });
    await expect(client(once).exec(["BLPOP", k, 1])).rejects.toThrow(/bridge fault: injected/);
    expect(await direct.lLen(k)).toBe(4);

    // lose/503: the BLPOP pops, then its answer is lost.
    bridge.setFaults({ rules: [{ action: "lose", mode: "503", match: "blpop", times: 1 }] });
    await expect(client(once).exec(["BLPOP", k, 1])).rejects.toThrow(/response lost/);
    expect(await direct.lRange(k, 0, -1)).toEqual(["2", "3", "4"]);

    // lose/close: the client resends, so the retry pops the next value.
    bridge.setFaults({ rules: [{ action: "lose", mode: "close", match: "blpop", times: 1 }] });
    expect(await client().exec(["BLPOP", k, 1])).toEqual([k, 3]);
    expect(await direct.lRange(k, 0, -1)).toEqual(["4"]);

    // lose/hang: applied, then the socket is dropped after hangMs.
    bridge.setFaults({ rules: [{ action: "lose", mode: "hang", hangMs: 100, match: "blpop" }] });
    await expect(client(once).exec(["BLPOP", k, 1])).rejects.toThrow(/fetch failed/);
    expect(await direct.lLen(k)).toBe(0);

    // delayMs: added before a blocking command too.
    bridge.setFaults({ delayMs: 150 });
    await direct.rPush(k, "5");
    const started = performance.now();
    expect(await client().exec(["BLPOP", k, 1])).toEqual([k, 5]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
    expect(bridge.stats().blocking.inUse).toBe(0);
  });

  test("close() ends a request blocked in BLPOP at once", async () => {
    const own = await startBridge({ redisUrl: server.url, token: TOKEN, blocking: "block" });
    const pending = new Redis({ url: own.url, token: TOKEN, retry: { retries: 0 } })
      .exec(["BLPOP", key("closing"), 30])
      .then(
        () => "answered",
        () => "failed",
      );
    await untilBlocked(1);
    const started = performance.now();
    await own.close();
    expect(await pending).toBe("failed");
    await untilBlocked(0);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  test("blockingConnections: 0 refuses blocking commands with 400; MULTI still runs them", async () => {
    const own = await startBridge({
      redisUrl: server.url,
      token: TOKEN,
      blockingConnections: 0,
      blocking: "block",
    });
    try {
      const ownEndpoint = { url: own.url, token: TOKEN };
      expect(await post("/", ["BLPOP", key("off"), 1], { endpoint: ownEndpoint })).toEqual({
        status: 400,
        body: { error: "ERR bridge: blocking commands are disabled (blockingConnections: 0)" },
      });
      expect(
        (await post("/pipeline", [["PING"], ["BRPOP", key("off"), 1]], { endpoint: ownEndpoint }))
          .status,
      ).toBe(400);
      expect(
        await post("/multi-exec", [["BLPOP", key("off"), 1]], { endpoint: ownEndpoint }),
      ).toEqual({ status: 200, body: [{ result: null }] });
      expect(own.stats().blocking).toEqual({ inUse: 0, open: 0, max: 0, refused: 0 });
    } finally {
      await own.close();
    }
  });

  test.each([-1, 1.5, Number.NaN])("startBridge refuses blockingConnections %s", async (n) => {
    await expect(
      startBridge({ redisUrl: server.url, token: TOKEN, blockingConnections: n }),
    ).rejects.toThrow(/blockingConnections/);
  });
});

describe("pub/sub over Server-Sent Events (Upstash's REST format)", () => {
  let bridge: PrivateBridge | undefined;
  afterEach(async () => {
    await bridge?.close();
    bridge = undefined;
  });

  /** Reads an SSE response until `lines` data lines arrived; returns them. */
  async function readLines(response: Response, lines: number): Promise<string[]> {
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    const out: string[] = [];
    while (out.length < lines) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      const parts = text.split("\n\n");
      text = parts.pop() ?? "";
      out.push(...parts);
    }
    await reader.cancel();
    return out;
  }

  test("SUBSCRIBE streams `subscribe,<channel>,1` then `message,<channel>,<message>`; /publish answers the count", async () => {
    bridge = await startPrivateBridge();
    const channel = key("ch {a}:b");
    const response = await fetch(`${bridge.url}/subscribe/${channel}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}`, accept: "text/event-stream" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const lines = readLines(response, 2);
    // The headers come once Redis confirmed the subscription.
    const published = await fetch(`${bridge.url}/publish/${channel}/hello`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
    });
    expect(await published.json()).toEqual({ result: 1 });
    expect(await lines).toEqual([`data: subscribe,${channel},1`, `data: message,${channel},hello`]);
    // The request ended: its subscription and Redis connection went with it.
    await expect.poll(() => bridge?.bridge.stats().subscriptions.open).toBe(0);
    expect(bridge.bridge.stats().byRoute).toMatchObject({ subscribe: 1, publish: 1 });
  });

  test("a subscription's path is percent-decoded strictly: each escape once, a malformed one refused", async () => {
    bridge = await startPrivateBridge();
    const subscribe = (path: string) =>
      fetch(`${bridge?.url}/subscribe/${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${bridge?.token}`, accept: "text/event-stream" },
      });
    const channel = key("esc");
    // `%2541` is an escaped `%` followed by `41`: decoded once, never twice (to `A`).
    expect(await readLines(await subscribe(`${channel}%2541`), 1)).toEqual([
      `data: subscribe,${channel}%41,1`,
    ]);
    expect(await readLines(await subscribe(`${channel}%C3%BC%20x`), 1)).toEqual([
      `data: subscribe,${channel}ü x,1`,
    ]);
    for (const bad of ["50%off", "a%zz", "a%", "a%C3%28"]) {
      const response = await subscribe(`${channel}${bad}`);
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({
        error: "ERR bridge: malformed percent-escape in the request path",
      });
    }
    // A `/` ends the channel's segment: that is no subscription route.
    expect((await subscribe(`${channel}a/b`)).status).toBe(404);
    await expect.poll(() => bridge?.bridge.stats().subscriptions.open).toBe(0);
  });

  test("PSUBSCRIBE streams `pmessage,<pattern>,<channel>,<message>`", async () => {
    bridge = await startPrivateBridge();
    const pattern = `${key("p")}:*`;
    const response = await fetch(`${bridge.url}/psubscribe/${pattern}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}`, accept: "text/event-stream" },
    });
    const lines = readLines(response, 2);
    const channel = pattern.replace("*", "x");
    expect(await raw.publish(channel, "m")).toBe(1);
    expect(await lines).toEqual([
      `data: psubscribe,${pattern},1`,
      `data: pmessage,${pattern},${channel},m`,
    ]);
  });

  test("@upstash/redis's own subscribe() works unchanged: confirmation, messages, unsubscribe closes", async () => {
    bridge = await startPrivateBridge();
    const redis = bridge.redis();
    const channel = key("official");
    const subscriber = redis.subscribe([channel]);
    const confirmed = new Promise((resolve) => subscriber.on("subscribe", resolve));
    const message = new Promise((resolve) => subscriber.on("message", resolve));
    expect(await confirmed).toBe(1);
    expect(await redis.publish(channel, "a|1")).toBe(1);
    expect(await message).toEqual({ channel, message: "a|1" });
    await subscriber.unsubscribe();
    await expect.poll(() => bridge?.bridge.stats().subscriptions.open).toBe(0);
  });

  test("one more subscription than maxSubscriptions gets 503 with a clear message", async () => {
    bridge = await startPrivateBridge(undefined, { maxSubscriptions: 1 });
    const first = await fetch(`${bridge.url}/subscribe/${key("one")}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
    });
    expect(first.status).toBe(200);
    const second = await fetch(`${bridge.url}/subscribe/${key("two")}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
    });
    expect(second.status).toBe(503);
    expect(await second.json()).toEqual({ error: "ERR bridge: all 1 subscriptions are in use" });
    await first.body?.cancel();
  });

  test.each([
    ["end", "the response finishes"],
    ["cut", "the connection is destroyed"],
  ] as const)(
    "streamLifetimeMs with streamEnd %s: each stream ends that long after its confirmation (%s)",
    async (end, _how) => {
      bridge = await startPrivateBridge({ streamLifetimeMs: 300, streamEnd: end });
      const response = await fetch(`${bridge.url}/subscribe/${key("lifetime")}`, {
        method: "POST",
        headers: { authorization: `Bearer ${bridge.token}` },
      });
      const started = Date.now();
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      let ended: "end" | "cut" | undefined;
      while (!ended) {
        try {
          if ((await reader.read()).done) ended = "end";
        } catch {
          ended = "cut";
        }
      }
      expect(ended).toBe(end);
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      await expect.poll(() => bridge?.bridge.stats().subscriptions.open).toBe(0);
      // A config that a JSON body could carry, which the type does not allow.
      const bad = JSON.parse('{"streamEnd":"close"}') as Parameters<
        typeof bridge.bridge.setFaults
      >[0];
      await expect(bridge.control.setFaults(bad)).rejects.toThrow(/400.*streamEnd must be/);
    },
  );

  test("dropSubscriptions ends every stream, as a lost connection would", async () => {
    bridge = await startPrivateBridge();
    const response = await fetch(`${bridge.url}/subscribe/${key("drop")}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
    });
    const lines = readLines(response, 5);
    await expect.poll(() => bridge?.bridge.stats().subscriptions.open).toBe(1);
    bridge.bridge.dropSubscriptions();
    expect(await lines).toHaveLength(1);
    expect(bridge.bridge.stats().subscriptions.open).toBe(0);
  });

  test.each([
    ["refuse", 400],
    ["instant", 200],
    ["block", 200],
  ] as const)("blocking %s: a 2 s BLPOP on an empty list answers %i", async (mode, status) => {
    bridge = await startPrivateBridge(undefined, { blocking: mode });
    const started = Date.now();
    const response = await fetch(bridge.url, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
      body: JSON.stringify(["BLPOP", key("empty"), 2]),
    });
    expect(response.status).toBe(status);
    const elapsed = Date.now() - started;
    if (mode === "block") expect(elapsed).toBeGreaterThanOrEqual(1_900);
    else expect(elapsed).toBeLessThan(1_000);
  });

  test("the blocking mode can be changed at run time", async () => {
    bridge = await startPrivateBridge();
    const blpop = () =>
      fetch(bridge?.url as string, {
        method: "POST",
        headers: { authorization: `Bearer ${bridge?.token}` },
        body: JSON.stringify(["BLPOP", key("rt"), 1]),
      });
    expect((await blpop()).status).toBe(400);
    const set = await fetch(`${bridge.url}/__bridge/blocking`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
      body: JSON.stringify({ mode: "instant" }),
    });
    expect(set.status).toBe(200);
    expect((await blpop()).status).toBe(200);
    const bad = await fetch(`${bridge.url}/__bridge/blocking`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
      body: JSON.stringify({ mode: "maybe" }),
    });
    expect(bad.status).toBe(400);
    expect(() => bridge?.bridge.setBlocking("maybe" as never)).toThrow(TypeError);
    await expect(
      startBridge({ redisUrl: inject("redisUrl"), token: "t", blocking: "x" as never }),
    ).rejects.toThrow(TypeError);
    await expect(
      startBridge({ redisUrl: inject("redisUrl"), token: "t", maxSubscriptions: -1 }),
    ).rejects.toThrow(TypeError);
  });
});

describe("request log", () => {
  test("one entry per request: route, status, duration and command names, nothing else", async () => {
    const token = "log-secret-token-0c9a";
    const entries: RequestLogEntry[] = [];
    const bridge = await startBridge({
      redisUrl: inject("redisUrl"),
      token,
      log: (entry) => entries.push(entry),
    });
    try {
      const endpoint = { url: bridge.url, token };
      const value = `value-${P}`;
      await post("/", ["SET", key("logged"), value], { endpoint });
      await post(
        "/pipeline",
        [
          ["GET", key("logged")],
          ["ECHO", value],
        ],
        { endpoint },
      );
      await post("/", ["GET", "x"], { endpoint, token: "wrong-token" });
      // The token in the query string and arguments in the path never reach the log.
      await fetch(`${bridge.url}/set/${value}/${value}?_token=${token}`, { method: "POST" });
      await post("/", [`${value} not a command`], { endpoint });
      const lines = JSON.stringify(entries);
      expect(lines).not.toContain(token);
      expect(lines).not.toContain(value);
      expect(entries.map(({ durationMs: _, ...rest }) => rest)).toEqual([
        { method: "POST", route: "/", status: 200, commands: ["set"] },
        { method: "POST", route: "/pipeline", status: 200, commands: ["get", "echo"] },
        { method: "POST", route: "/", status: 401, commands: [] },
        { method: "POST", route: "(other)", status: 404, commands: [] },
        { method: "POST", route: "/", status: 400, commands: ["?"] },
      ]);
      for (const e of entries) expect(e.durationMs).toBeGreaterThanOrEqual(0);
    } finally {
      await bridge.close();
    }
  });
});

describe("edgelock-bridge CLI", () => {
  const SECRET = "cli-secret-token-5f1e";
  test("exits 2 with a usage line when no token is given", async () => {
    const { code, stderr } = await runBridgeCli([]).exited;
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).toMatch(/usage: edgelock-bridge --token/);
  });

  test.each([
    [["--redis-url", "127.0.0.1:6379"], {}, "--redis-url", "redis://127.0.0.1:6379"],
    [[], { REDIS_URL: "localhost:6379" }, "REDIS_URL", "redis://localhost:6379"],
  ])(
    "exits 2 for a Redis URL without a scheme, suggesting redis:// (%j %j)",
    async (args, env, what, url) => {
      const { code, stderr } = await runBridgeCli(["--token", SECRET, ...args], env).exited;
      expect(code).toBe(2);
      expect(stderr).toContain(`${what} must be a redis:// or rediss:// URL: did you mean ${url}?`);
      expect(stderr).not.toContain(SECRET);
    },
  );

  test("exits 2 for an invalid --blocking-connections", async () => {
    const { code, stderr } = await runBridgeCli([
      "--token",
      SECRET,
      "--blocking-connections",
      "many",
    ]).exited;
    expect(code).toBe(2);
    expect(stderr).toContain('invalid --blocking-connections "many"');
  });

  test("exits 1 with a message when Redis is unreachable, never printing the token", async () => {
    const { code, stdout, stderr } = await runBridgeCli([
      "--token",
      SECRET,
      "--redis-url",
      "redis://127.0.0.1:1",
      "--port",
      "0",
    ]).exited;
    expect(code).toBe(1);
    expect(stderr).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
    expect(stdout + stderr).not.toContain(SECRET);
  });

  test("serves after printing the listening line and exits 0 on SIGTERM", async () => {
    const cli = runBridgeCli([], {
      EDGELOCK_BRIDGE_TOKEN: SECRET,
      REDIS_URL: inject("redisUrl"),
      PORT: "0",
    });
    const line = await cli.listening();
    const pong = await post("/", ["PING"], { endpoint: { url: line, token: SECRET } });
    expect(pong).toEqual({ status: 200, body: { result: "PONG" } });
    cli.child.kill("SIGTERM");
    const { code, stdout, stderr } = await cli.exited;
    expect(code).toBe(0);
    expect(stdout + stderr).not.toContain(SECRET);
    expect(stdout.trim().split("\n")).toHaveLength(1); // no request log without --log
  });

  test("--log prints one line per request without the token or arguments", async () => {
    const cli = runBridgeCli(["--log", "--port", "0"], {
      EDGELOCK_BRIDGE_TOKEN: SECRET,
      REDIS_URL: inject("redisUrl"),
    });
    const url = await cli.listening();
    const argument = `argument-${P}`;
    await post("/", ["ECHO", argument], { endpoint: { url, token: SECRET } });
    await cli.printed(/ECHO|echo/);
    cli.child.kill("SIGTERM");
    const { code, stdout, stderr } = await cli.exited;
    expect(code).toBe(0);
    const lines = stdout.trim().split("\n");
    expect(lines[1]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z POST \/ 200 \d+\.\dms echo$/);
    expect(stdout + stderr).not.toContain(SECRET);
    expect(stdout + stderr).not.toContain(argument);
  });
});
