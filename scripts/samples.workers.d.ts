// Worker samples (scripts/check-samples.mjs): the global `Env` that `wrangler types` generates
// from the wrangler.toml of docs/cloudflare.md.
interface Env {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  LEASE_KEEPER: DurableObjectNamespace<import("edgelock/cloudflare").LeaseKeeper>;
}
