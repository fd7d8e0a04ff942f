/**
 * Runs the webhook route locally on http://127.0.0.1:3000 (any path):
 *
 *   npm run build
 *   UPSTASH_REDIS_REST_URL=... UPSTASH_REDIS_REST_TOKEN=... \
 *     node --import tsx examples/vercel-webhook/dev.ts
 *   curl -i -X POST localhost:3000 -H 'content-type: application/json' -d '{"id":"evt_1","type":"ping"}'
 *
 * (the second identical curl answers `{"received":true,"duplicate":true,...}`).
 */
import { serve } from "@hono/node-server";
import { POST } from "./route.js";

const port = Number(process.env.PORT ?? 3000);
serve({ fetch: (request) => POST(request), hostname: "127.0.0.1", port }, (info) => {
  console.log(`webhook route on http://127.0.0.1:${info.port}`);
});
