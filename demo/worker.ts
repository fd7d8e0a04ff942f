/**
 * Runs the reference Worker (`wrangler.toml` → `worker/index.ts`) in local workerd through the
 * Miniflare API: bundles it with esbuild the way wrangler would for workerd, reads its bindings,
 * Durable Objects and compatibility date from `wrangler.toml`, and listens on 127.0.0.1.
 */

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";

/** A running reference Worker. */
export interface LocalWorker {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** Fires the Worker's `scheduled` handler as a Cron Trigger would. */
  scheduled(cron: string, scheduledTime: number): Promise<{ outcome: string }>;
  /** Stops workerd and removes the bundle. Idempotent. */
  dispose(): Promise<void>;
}

/**
 * Bundles and starts the Worker of `configPath` with `bindings` added to (and overriding) its
 * `[vars]`.
 */
export async function startLocalWorker(
  configPath: string,
  bindings: Record<string, string>,
): Promise<LocalWorker> {
  const { workerOptions, main } = unstable_getMiniflareWorkerOptions(configPath);
  if (!main) throw new Error(`${configPath} has no \`main\``);
  const dir = await mkdtemp(join(tmpdir(), "edgelock-demo-"));
  let mf: Miniflare | undefined;
  try {
    const scriptPath = join(dir, "worker.mjs");
    await build({
      entryPoints: [main],
      outfile: scriptPath,
      bundle: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      conditions: ["workerd", "worker", "browser"],
      mainFields: ["module", "main"],
      external: ["cloudflare:*"],
      logLevel: "warning",
    });
    mf = new Miniflare({
      ...workerOptions,
      modules: true,
      modulesRoot: dir,
      scriptPath,
      bindings: { ...workerOptions.bindings, ...bindings },
      host: "127.0.0.1",
      port: 0,
      cf: false,
      durableObjectsPersist: false,
      verbose: false,
    } as ConstructorParameters<typeof Miniflare>[0]);
    const url = (await mf.ready).origin;
    const running = mf;
    let disposed: Promise<void> | undefined;
    return {
      url,
      async scheduled(cron, scheduledTime) {
        const worker = await running.getWorker();
        const result = await worker.scheduled({ cron, scheduledTime: new Date(scheduledTime) });
        return { outcome: result.outcome };
      },
      dispose() {
        disposed ??= running.dispose().finally(() => rm(dir, { recursive: true, force: true }));
        return disposed;
      },
    };
  } catch (error) {
    await mf?.dispose().catch(() => {});
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}
