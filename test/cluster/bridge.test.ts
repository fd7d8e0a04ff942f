/**
 * The bridge in front of a local 3-master Redis Cluster (`startBridge({ cluster })`,
 * `edgelock-bridge --cluster-node`): routing by key, pipelines in order, transactions on one
 * slot, blocking commands on pooled connections to the key's node, scripts and NOSCRIPT per node,
 * redirections while a slot moves, faults and stats, and the CLI.
 */

import { createHash, randomBytes } from "node:crypto";
import { createClient } from "@redis/client";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOCKING_ACROSS_NODES, CROSSSLOT_TRANSACTION } from "../../src/bridge/cluster.js";
import { type Bridge, RedisUnavailableError, startBridge } from "../../src/bridge/index.js";
import { CommandTable } from "../../src/bridge/keys.js";
import { keySlot } from "../../src/slot.js";
import { runBridgeCli } from "../support/bridge-cli.js";
import { type RedisCluster, startRedisCluster } from "../support/redis-cluster.js";

const TOKEN = randomBytes(16).toString("hex");
const P = `t:${randomBytes(4).toString("hex")}:`;

/** A direct RESP2 client on one node (bulk strings as text). */
async function connectNode(url: string) {
  const client = createClient({ url, RESP: 2, disableClientInfo: true });
  client.on("error", () => undefined);
  await client.connect();
  return client;
}
type NodeClient = Awaited<ReturnType<typeof connectNode>>;

let cluster: RedisCluster;
let bridge: Bridge;
const nodes = new Map<string, NodeClient>();

beforeAll(async () => {
  cluster = await startRedisCluster();
  bridge = await startBridge({ cluster: { rootNodes: [cluster.urls[0] as string] }, token: TOKEN });
  for (const url of cluster.urls) nodes.set(url, await connectNode(url));
}, 60_000);

afterAll(async () => {
  for (const node of nodes.values()) node.destroy();
  await bridge?.close();
  await cluster?.stop();
});

/** The direct client of the master owning `key`. */
const nodeOf = (key: string) => nodes.get(cluster.masterOf(key)) as NodeClient;

/** One key owned by each master, in the order of `cluster.urls`. */
function keysOnEveryNode(label: string): string[] {
  const found = new Map<string, string>();
  for (let i = 0; found.size < cluster.urls.length; i++) {
    const key = `${P}${label}:${i}`;
    if (!found.has(cluster.masterOf(key))) found.set(cluster.masterOf(key), key);
  }
  return cluster.urls.map((url) => found.get(url) as string);
}

/** Two keys in different slots of different nodes. */
const apart = (label: string) => keysOnEveryNode(label).slice(0, 2) as [string, string];

/** A raw request to the cluster bridge (or `endpoint`), as `@upstash/redis` sends it. */
async function post(
  path: string,
  body: unknown,
  options: { base64?: boolean; url?: string; signal?: AbortSignal } = {},
): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${TOKEN}`,
    "content-type": "application/json",
  };
  if (options.base64) headers["upstash-encoding"] = "base64";
  const response = await fetch(`${options.url ?? bridge.url}${path}`, {
    method: "POST",
    headers,
    body: JSON.stringify(body),
    signal: options.signal,
  });
  return { status: response.status, body: await response.json() };
}

const redis = () => new Redis({ url: bridge.url, token: TOKEN });
const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

describe("pub/sub on a cluster", () => {
  it("a subscription on one node hears a PUBLISH of a script on any node's slot", async () => {
    const redis = new Redis({ url: bridge.url, token: TOKEN });
    const channel = `${P}wake`;
    const subscriber = redis.subscribe([channel]);
    const confirmed = new Promise((resolve) => subscriber.on("subscribe", resolve));
    const heard: unknown[] = [];
    subscriber.on("message", (m) => heard.push((m as { message: unknown }).message));
    await confirmed;
    for (const key of keysOnEveryNode("pub")) {
      await redis.eval("return redis.call('publish', ARGV[1], KEYS[1])", [key], [channel]);
    }
    await expect.poll(() => heard.length).toBe(3);
    await subscriber.unsubscribe();
  });
});

describe("startBridge({ cluster })", () => {
  it.each([
    [{}, /`redisUrl` or `cluster` is required/],
    [
      { redisUrl: "redis://127.0.0.1:1", cluster: { rootNodes: ["redis://127.0.0.1:2"] } },
      /not both/,
    ],
    [{ cluster: { rootNodes: [] } }, /`cluster.rootNodes` must be a non-empty array/],
    [{ cluster: {} }, /`cluster.rootNodes` must be a non-empty array/],
    [
      { cluster: { rootNodes: ["127.0.0.1:7000"] } },
      /cluster.rootNodes\[0\] must be a redis:\/\/ .*did you mean redis:\/\/127\.0\.0\.1:7000/,
    ],
  ])("refuses bad options with a TypeError (%j)", async (options, message) => {
    const started = startBridge({ token: TOKEN, ...(options as object) });
    await expect(started).rejects.toBeInstanceOf(TypeError);
    await expect(started).rejects.toThrow(message);
  });

  it("rejects with RedisUnavailableError when no root node answers", async () => {
    await expect(
      startBridge({ cluster: { rootNodes: ["redis://127.0.0.1:1"] }, token: TOKEN }),
    ).rejects.toBeInstanceOf(RedisUnavailableError);
  });
});

describe("routing", () => {
  it("each command reaches the master owning its key; values stay byte for byte", async () => {
    const client = redis();
    for (const key of keysOnEveryNode("route")) {
      await client.set(key, `value of ${key}`);
      expect(await client.get(key)).toBe(`value of ${key}`);
      expect(String(await nodeOf(key).get(key))).toBe(`value of ${key}`);
    }
    const [key] = keysOnEveryNode("binary");
    const bytes = Buffer.from([0xff, 0x00, 0xc3, 0x28, 0x41]);
    await nodeOf(key as string).set(key as string, bytes);
    const answer = await post("/", ["GET", key], { base64: true });
    expect(answer).toEqual({ status: 200, body: { result: bytes.toString("base64") } });
  });

  it("EVAL and EVALSHA go to their first key's node", async () => {
    const script = "return redis.call('get', KEYS[1])";
    for (const key of keysOnEveryNode("eval")) {
      await nodeOf(key).set(key, key);
      expect(await post("/", ["EVAL", script, 1, key])).toEqual({
        status: 200,
        body: { result: key },
      });
    }
  });

  it("a command whose keys span slots gets Redis's CROSSSLOT answer", async () => {
    const [a, b] = apart("cross");
    const answer = await post("/", ["MSET", a, "1", b, "2"]);
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: expect.stringMatching(/^CROSSSLOT/) });
  });

  it("commands without keys go to every master where Redis Cluster clients send them", async () => {
    const client = redis();
    for (const key of keysOnEveryNode("keyless")) await client.set(key, "1");
    expect(await post("/", ["PING"])).toEqual({ status: 200, body: { result: "PONG" } });
    const sizes = await Promise.all([...nodes.values()].map((node) => node.dbSize()));
    expect(await post("/", ["DBSIZE"])).toEqual({
      status: 200,
      body: { result: sizes.reduce((a, b) => a + b, 0) },
    });
    const keys = (await post("/", ["KEYS", `${P}keyless:*`])).body as { result: string[] };
    expect(keys.result.sort()).toEqual(keysOnEveryNode("keyless").sort());
  });

  it("a pipeline keeps its order on every node, around commands without keys", async () => {
    const [a, b, c] = keysOnEveryNode("order");
    const answer = await post("/pipeline", [
      ["SET", a, "1"],
      ["SET", b, "1"],
      ["DEL", a],
      ["INCR", b],
      ["PING"],
      ["SET", a, "2"],
      ["GET", a],
      ["GET", b],
      ["RPUSH", c, "x"],
      ["GET", c],
      ["ECHO", "done"],
      ["DEL", a, b],
    ]);
    expect(answer).toEqual({
      status: 200,
      body: [
        { result: "OK" },
        { result: "OK" },
        { result: 1 },
        { result: 2 },
        { result: "PONG" },
        { result: "OK" },
        { result: "2" },
        { result: "2" },
        { result: 1 },
        { error: expect.stringMatching(/^WRONGTYPE/) },
        { result: "done" },
        { error: expect.stringMatching(/^CROSSSLOT/) },
      ],
    });
  });

  it("concurrent commands of an @upstash/redis client share /pipeline requests across nodes", async () => {
    const client = redis();
    const keys = keysOnEveryNode("auto");
    const before = bridge.stats().byRoute.pipeline;
    await Promise.all(keys.map((key) => client.set(key, key)));
    expect(await Promise.all(keys.map((key) => client.get(key)))).toEqual(keys);
    expect(bridge.stats().byRoute.pipeline - before).toBe(2);
  });
});

describe("transactions", () => {
  it("keys sharing a hash tag run atomically on their node, binary-safe in base64", async () => {
    const tag = `{${P}tx}`;
    const answer = await post(
      "/multi-exec",
      [
        ["SET", `${tag}:a`, "é"],
        ["GET", `${tag}:a`],
        ["LPUSH", `${tag}:a`, "x"],
        ["INCR", `${tag}:n`],
      ],
      { base64: true },
    );
    expect(answer).toEqual({
      status: 200,
      body: [
        { result: "OK" },
        { result: b64("é") },
        { error: expect.stringMatching(/^WRONGTYPE/) },
        { result: 1 },
      ],
    });
  });

  it("binary values stay byte for byte in pipelines and transactions", async () => {
    const key = `{${P}bytes}:k`;
    const bytes = Buffer.from([0xff, 0x00, 0xc3, 0x28]);
    await nodeOf(key).set(key, bytes);
    const expected = { result: bytes.toString("base64") };
    expect(await post("/pipeline", [["GET", key]], { base64: true })).toEqual({
      status: 200,
      body: [expected],
    });
    expect(await post("/multi-exec", [["GET", key]], { base64: true })).toEqual({
      status: 200,
      body: [expected],
    });
  });

  it("keys in several slots: 400 CROSSSLOT, nothing applied", async () => {
    const [a, b] = apart("tx-cross");
    const answer = await post("/multi-exec", [
      ["SET", a, "1"],
      ["SET", b, "1"],
    ]);
    expect(answer).toEqual({ status: 400, body: { error: CROSSSLOT_TRANSACTION } });
    expect(await nodeOf(a).exists(a)).toBe(0);
    expect(await nodeOf(b).exists(b)).toBe(0);
  });

  it("a command refused while queueing discards the transaction (EXECABORT)", async () => {
    const key = `{${P}abort}:k`;
    const answer = await post("/multi-exec", [["SET", key, "1"], ["NOSUCHCOMMAND"]]);
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      error: expect.stringMatching(/^EXECABORT .*First error: ERR unknown command/),
    });
    expect(await nodeOf(key).exists(key)).toBe(0);
  });

  it("a transaction without keys runs on some master", async () => {
    expect(await post("/multi-exec", [["PING"], ["ECHO", "x"]])).toEqual({
      status: 200,
      body: [{ result: "PONG" }, { result: "x" }],
    });
  });
});

describe("scripts: one cache per node", () => {
  it("SCRIPT LOAD loads on every master; SCRIPT FLUSH empties every cache", async () => {
    const client = redis();
    const sha = await client.scriptLoad("return redis.call('exists', KEYS[1])");
    for (const key of keysOnEveryNode("loaded"))
      expect(await client.evalsha(sha, [key], [])).toBe(0);
    await client.scriptFlush();
    for (const key of keysOnEveryNode("loaded")) {
      await expect(client.evalsha(sha, [key], [])).rejects.toThrow(/NOSCRIPT/);
    }
  });

  it("EVALSHA answers NOSCRIPT on a node that never ran a script another node ran", async () => {
    const [a, b] = apart("noscript");
    const source = `return '${P}'`;
    const sha = createHash("sha1").update(source).digest("hex");
    const client = redis();
    expect(await client.eval(source, [a], [])).toBe(P);
    expect(await client.evalsha(sha, [a], [])).toBe(P);
    await expect(client.evalsha(sha, [b], [])).rejects.toThrow(/NOSCRIPT/);
  });
});

describe('blocking commands (blocking: "block")', () => {
  beforeAll(() => bridge.setBlocking("block"));
  afterAll(() => bridge.setBlocking("refuse"));

  it("a BLPOP on every node's key is woken by an RPUSH from another client", async () => {
    for (const key of keysOnEveryNode("blpop")) {
      const waiting = post("/", ["BLPOP", key, 5]);
      await expect.poll(() => bridge.stats().blocking.inUse, { interval: 5 }).toBe(1);
      // The waiter's connection is blocked in Redis on the key's node, not on the shared one.
      await expect
        .poll(async () => Number(await nodeOf(key).sendCommand(["INFO", "clients"]).then(blocked)))
        .toBe(1);
      expect(await redis().rpush(key, "token")).toBe(1);
      expect(await waiting).toEqual({ status: 200, body: { result: [key, "token"] } });
    }
    expect(bridge.stats().blocking.inUse).toBe(0);
  });

  it("a pipeline holding a blocking command runs in order on one pooled connection", async () => {
    const tag = `{${P}bpipe}`;
    expect(
      await post("/pipeline", [
        ["RPUSH", `${tag}:q`, "a"],
        ["BLPOP", `${tag}:q`, 1],
        ["GET", `${tag}:missing`],
        ["PING"],
      ]),
    ).toEqual({
      status: 200,
      body: [{ result: 1 }, { result: [`${tag}:q`, "a"] }, { result: null }, { result: "PONG" }],
    });
  });

  it("a blocking pipeline whose keys live on several nodes is refused with 400", async () => {
    const [a, b] = apart("bcross");
    const answer = await post("/pipeline", [
      ["BLPOP", a, 1],
      ["RPUSH", b, "x"],
    ]);
    expect(answer).toEqual({ status: 400, body: { error: BLOCKING_ACROSS_NODES } });
    expect(await nodeOf(b).exists(b)).toBe(0);
  });

  it("the pool's size counts connections to every node: one more is refused with 503", async () => {
    const small = await startBridge({
      cluster: { rootNodes: cluster.urls },
      token: TOKEN,
      blockingConnections: 1,
      blocking: "block",
    });
    try {
      const [a, b] = apart("busy");
      const waiting = post("/", ["BLPOP", a, 5], { url: small.url });
      await expect.poll(() => small.stats().blocking.inUse, { interval: 5 }).toBe(1);
      const refused = await post("/", ["BLPOP", b, 1], { url: small.url });
      expect(refused.status).toBe(503);
      expect(small.stats().blocking.refused).toBe(1);
      await redis().rpush(a, "v");
      expect((await waiting).status).toBe(200);
      expect(small.stats().blocking).toMatchObject({ inUse: 0, open: 1, max: 1 });
    } finally {
      await small.close();
    }
  });
});

describe("faults and stats in cluster mode", () => {
  it("fail answers 503 without touching Redis; lose/close is applied and replayed by the client", async () => {
    const [key] = keysOnEveryNode("fault");
    bridge.setFaults({ rules: [{ action: "fail", match: "incr", times: 1 }] });
    expect(await post("/", ["INCR", key])).toEqual({
      status: 503,
      body: { error: "bridge fault: injected failure" },
    });
    expect(await nodeOf(key as string).exists(key as string)).toBe(0);
    bridge.setFaults({ rules: [{ action: "lose", mode: "close", match: "incr", times: 1 }] });
    // The default client retries after the lost answer: INCR applied twice.
    expect(await redis().incr(key as string)).toBe(2);
    bridge.clearFaults();
  });

  it("stats count requests and commands", async () => {
    bridge.resetStats();
    await post("/pipeline", [["PING"], ["ECHO", "x"]]);
    expect(bridge.stats()).toMatchObject({
      requests: 1,
      byRoute: { single: 0, pipeline: 1, multiExec: 0 },
      commands: 2,
      byCommand: { ping: 1, echo: 1 },
      faultsInjected: 0,
    });
  });
});

describe("command table", () => {
  it("finds the keys of fixed-position, numkeys, STREAMS and subcommand forms", async () => {
    const node = nodes.get(cluster.urls[0] as string) as NodeClient;
    const table = CommandTable.parse(await node.sendCommand(["COMMAND"]));
    const cases: [string[], string[]][] = [
      [["GET", "k"], ["k"]],
      [
        ["MSET", "a", "1", "b", "2"],
        ["a", "b"],
      ],
      [
        ["BLPOP", "a", "b", "5"],
        ["a", "b"],
      ],
      [
        ["EVAL", "s", "2", "k1", "k2", "arg"],
        ["k1", "k2"],
      ],
      [["evalsha", "0", "0", "arg"], []],
      [["EVAL", "s", "x", "k1"], []],
      [["FCALL", "f", "1", "k"], ["k"]],
      [
        ["ZUNIONSTORE", "dst", "2", "s1", "s2", "WEIGHTS", "1", "2"],
        ["dst", "s1", "s2"],
      ],
      [
        ["ZINTER", "2", "s1", "s2"],
        ["s1", "s2"],
      ],
      [
        ["BLMPOP", "1", "2", "l1", "l2", "LEFT"],
        ["l1", "l2"],
      ],
      [
        ["XREAD", "COUNT", "1", "STREAMS", "s1", "s2", "0", "0"],
        ["s1", "s2"],
      ],
      [["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", ">"], ["s1"]],
      [["XREAD", "COUNT", "1"], []],
      [["OBJECT", "ENCODING", "k"], ["k"]],
      [["PING"], []],
      [["SCRIPT", "LOAD", "return 1"], []],
      [["NOSUCHCOMMAND", "k"], []],
    ];
    for (const [command, keys] of cases)
      expect({ command, keys: table.keys(command) }).toEqual({ command, keys });
  });

  it("reads a table without subcommands or with malformed entries", () => {
    const table = CommandTable.parse([
      ["get", 2, [], 1, 1, 1],
      ["bad", 2],
      "garbage",
      ["also-bad", 2, [], "1", 1, 1],
    ]);
    expect(table.keys(["GET", "k"])).toEqual(["k"]);
    expect(table.keys(["BAD", "k"])).toEqual([]);
    expect(CommandTable.parse(null).keys(["GET", "k"])).toEqual([]);
  });
});

describe("a slot that moves", () => {
  it("MOVED and ASK are followed by the bridge, never answered", async () => {
    const tag = `${P}moving`;
    const slot = keySlot(tag);
    const key = `{${tag}}:k`;
    const client = redis();
    await client.set(key, "before");
    const from = cluster.masterOf(key);
    const to = cluster.urls.find((url) => url !== from) as string;
    const source = nodes.get(from) as NodeClient;
    const target = nodes.get(to) as NodeClient;
    const sourceId = String(await source.sendCommand(["CLUSTER", "MYID"]));
    const targetId = String(await target.sendCommand(["CLUSTER", "MYID"]));
    await target.sendCommand(["CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceId]);
    await source.sendCommand(["CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetId]);
    // Mid-migration: a key not on the source yet gets ASK there; the bridge follows it.
    const fresh = `{${tag}}:new`;
    expect(await client.set(fresh, "asked")).toBe("OK");
    expect(String(await target.sendCommand(["ASKING"]).then(() => target.get(fresh)))).toBe(
      "asked",
    );
    const [host, port] = to.replace("redis://", "").split(":") as [string, string];
    await source.sendCommand(["MIGRATE", host, port, "", "0", "5000", "KEYS", key]);
    for (const node of nodes.values()) {
      await node.sendCommand(["CLUSTER", "SETSLOT", String(slot), "NODE", targetId]);
    }
    // The bridge still believes the source owns the slot: MOVED, followed (a transaction is
    // run again on the new owner).
    expect(
      await post("/multi-exec", [
        ["GET", key],
        ["APPEND", key, "+tx"],
      ]),
    ).toEqual({
      status: 200,
      body: [{ result: "before" }, { result: 9 }],
    });
    expect(await client.get(key)).toBe("before+tx");
    expect(
      await post("/pipeline", [
        ["GET", key],
        ["SET", key, "after"],
        ["GET", key],
      ]),
    ).toEqual({
      status: 200,
      body: [{ result: "before+tx" }, { result: "OK" }, { result: "after" }],
    });
    expect(String(await target.get(key))).toBe("after");
  });
});

describe("edgelock-bridge --cluster-node", () => {
  it.each([
    [
      ["--cluster-node", "redis://127.0.0.1:7000", "--redis-url", "redis://127.0.0.1:6379"],
      /--redis-url and --cluster-node exclude each other/,
    ],
    [
      ["--cluster-node", "127.0.0.1:7000"],
      /--cluster-node must be a redis:\/\/ or rediss:\/\/ URL: did you mean redis:\/\/127\.0\.0\.1:7000\?/,
    ],
  ])("exits 2 on a usage error (%j)", async (args, message) => {
    const { code, stderr } = await runBridgeCli(["--token", TOKEN, ...args]).exited;
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr).not.toContain(TOKEN);
  });

  it("exits 1 when no node of the cluster answers", async () => {
    const { code, stderr } = await runBridgeCli([
      "--token",
      TOKEN,
      "--port",
      "0",
      "--cluster-node",
      "redis://:secret@127.0.0.1:1",
    ]).exited;
    expect(code).toBe(1);
    expect(stderr).toMatch(/cannot reach the Redis Cluster at redis:\/\/:\*\*\*@127\.0\.0\.1:1/);
    expect(stderr).not.toContain("secret");
  });

  it("serves the cluster from repeated --cluster-node flags and exits 0 on SIGTERM", async () => {
    const cli = runBridgeCli([
      "--token",
      TOKEN,
      "--port",
      "0",
      ...cluster.urls.flatMap((url) => ["--cluster-node", url]),
    ]);
    const url = await cli.listening();
    for (const key of keysOnEveryNode("cli")) {
      expect(await post("/", ["SET", key, "v"], { url })).toEqual({
        status: 200,
        body: { result: "OK" },
      });
    }
    cli.child.kill("SIGTERM");
    expect((await cli.exited).code).toBe(0);
  });
});

describe("a node that goes away", () => {
  it("requests for its slots answer 500; the other nodes' keys still work", async () => {
    const [lost, kept] = apart("down");
    await cluster.nodes.find((n) => n.url === cluster.masterOf(lost))?.stop();
    expect(await post("/", ["SET", lost, "1"])).toEqual({
      status: 500,
      body: { error: "bridge: redis unavailable" },
    });
    expect(await post("/", ["SET", kept, "1"])).toEqual({ status: 200, body: { result: "OK" } });
  });
});

/** `blocked_clients` from an `INFO clients` reply. */
function blocked(info: unknown): number {
  return Number(/blocked_clients:(\d+)/.exec(String(info))?.[1] ?? -1);
}
