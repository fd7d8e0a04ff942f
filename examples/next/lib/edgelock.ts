import { Redis } from "@upstash/redis";
import { EdgeLock } from "edgelock";

/** One client per function instance, shared by its routes (UPSTASH_REDIS_REST_URL/_TOKEN). */
export const edgelock = new EdgeLock({ redis: Redis.fromEnv() });
