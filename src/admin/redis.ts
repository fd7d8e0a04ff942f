/**
 * The {@link AdminRedis} the CLI and the console read through, made from an `@upstash/redis`
 * client: its failures carry edgelock's hints (a wrong token, a refused connection), never the
 * raw command, and every answered command is counted as Redis counts it (the bill). Replies are
 * taken decoded or not (`automaticDeserialization`), since the console reads through the
 * application's own client. Runtime-neutral.
 * @module
 */

import type { RedisLike } from "../transport/redis.js";
import { toTransportError } from "../transport/scrub.js";
import type { AdminRedis } from "./kinds.js";
import type { SnapshotRead } from "./queues.js";

/**
 * The part of an `@upstash/redis` client (any 1.x: `new Redis(...)`, `Redis.fromEnv()`, the
 * Cloudflare or Fastly build) the CLI and the console use, typed structurally.
 */
export interface UpstashAdminClient extends RedisLike {
  scan(
    cursor: string | number,
    options: { match: string; count: number },
  ): Promise<[string | number, unknown[]]>;
  type(key: string): Promise<string>;
  exists(...keys: string[]): Promise<number>;
  hget(key: string, field: string): Promise<unknown>;
  hmget(key: string, ...fields: string[]): Promise<unknown>;
  pttl(key: string): Promise<number>;
  del(...keys: string[]): Promise<number>;
  get(key: string): Promise<unknown>;
  /** A MULTI/EXEC transaction: the snapshot reads of ./queues.ts. */
  multi(): UpstashTransactionLike;
}

/** The part of an `@upstash/redis` transaction (`redis.multi()`) the snapshot reads use. */
export interface UpstashTransactionLike {
  lrange(key: string, start: number, end: number): unknown;
  llen(key: string): unknown;
  zrange(key: string, min: number, max: number, options: { withScores: true }): unknown;
  zcard(key: string): unknown;
  hgetall(key: string): unknown;
  time(): unknown;
  exec(): Promise<unknown>;
}

/**
 * The admin reads over `client`. `billed` is told the commands of each answered request, as
 * Redis counts them (a transaction's MULTI and EXEC included); edgelock's scripts are not sent
 * through it (they go through `scripts`, the client itself, and their events carry their bill).
 */
export function adminRedis(
  client: UpstashAdminClient,
  billed: (commands: number) => void = () => {},
): AdminRedis {
  const answered = <T>(key: string, commands: number, promise: Promise<T>): Promise<T> =>
    promise.then(
      (reply) => {
        billed(commands);
        return reply;
      },
      (error: unknown) => {
        throw toTransportError(error, key, []);
      },
    );
  return {
    // The scripts go through edgelock's runner, which classifies and scrubs their errors.
    scripts: client,
    eval: (script, keys, args) => client.eval(script, keys, args),
    evalsha: (sha1, keys, args) => client.evalsha(sha1, keys, args),
    scan: (cursor, options) => answered(options.match, 1, client.scan(cursor, options)),
    type: (key) => answered(key, 1, client.type(key)),
    exists: (key) => answered(key, 1, client.exists(key)),
    hget: (key, field) => answered(key, 1, client.hget(key, field)),
    hmget: async (key, fields) => {
      const reply = await answered(key, 1, client.hmget(key, ...fields));
      // Decoded, @upstash/redis answers an object of the fields (null when none is set).
      if (Array.isArray(reply)) return reply;
      const found = (reply ?? {}) as Record<string, unknown>;
      return fields.map((field) => found[field] ?? null);
    },
    pttl: (key) => answered(key, 1, client.pttl(key)),
    del: (key) => answered(key, 1, client.del(key)),
    get: (key) => answered(key, 1, client.get(key)),
    snapshot: async (reads) => {
      const tx = client.multi();
      for (const read of reads) queue(tx, read);
      const key = reads.find((r) => r[0] !== "time")?.[1] ?? "";
      const replies = await answered(key, reads.length + 2, tx.exec());
      return Array.isArray(replies) ? replies : [];
    },
  };
}

function queue(tx: UpstashTransactionLike, read: SnapshotRead): void {
  switch (read[0]) {
    case "lrange":
      tx.lrange(read[1], read[2], read[3]);
      break;
    case "llen":
      tx.llen(read[1]);
      break;
    case "zrange-withscores":
      tx.zrange(read[1], read[2], read[3], { withScores: true });
      break;
    case "zcard":
      tx.zcard(read[1]);
      break;
    case "hgetall":
      tx.hgetall(read[1]);
      break;
    case "time":
      tx.time();
      break;
  }
}
