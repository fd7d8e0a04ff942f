/** Values that `test/global-setup.ts` provides to every test file through `inject()`. */
declare module "vitest" {
  export interface ProvidedContext {
    /** The shared throwaway redis-server, e.g. `redis://127.0.0.1:40123`. */
    redisUrl: string;
    /** The shared bridge in front of it, e.g. `http://127.0.0.1:40124`. */
    bridgeUrl: string;
    /** Bearer token of the shared bridge (and of the fault bridge). */
    bridgeToken: string;
    /** A second bridge on the same Redis, reserved for the Worker tests' fault injection. */
    faultBridgeUrl: string;
  }
}

export {};
