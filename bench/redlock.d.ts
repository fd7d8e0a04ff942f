/**
 * The part of redlock 5.0.0-beta.2 the benchmark uses. The published package's `exports` map
 * has no `types` condition, so TypeScript with NodeNext resolution cannot find its declarations
 * (node-redlock issues #173, #290, #307); this declares what `bench/libraries.ts` calls.
 */
declare module "redlock" {
  import { EventEmitter } from "node:events";
  import type { Redis } from "ioredis";

  /** Retry settings; defaults: driftFactor 0.01, retryCount 10, retryDelay 200, retryJitter 100. */
  export interface Settings {
    readonly driftFactor: number;
    readonly retryCount: number;
    readonly retryDelay: number;
    readonly retryJitter: number;
    readonly automaticExtensionThreshold: number;
  }

  export class Lock {
    readonly resources: string[];
    readonly value: string;
    expiration: number;
    release(): Promise<unknown>;
  }

  export class ExecutionError extends Error {}
  export class ResourceLockedError extends Error {}

  export default class Redlock extends EventEmitter {
    constructor(clients: Iterable<Redis>, settings?: Partial<Settings>);
    acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock>;
    release(lock: Lock, settings?: Partial<Settings>): Promise<unknown>;
  }
}
