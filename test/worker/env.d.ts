/**
 * Types `env` and `exports` from "cloudflare:workers" in the Worker tests as the reference
 * Worker's.
 */
import type { Env as ReferenceWorkerEnv } from "../../worker/index.js";

declare global {
  namespace Cloudflare {
    interface Env extends ReferenceWorkerEnv {}
    interface GlobalProps {
      mainModule: typeof import("../../worker/index.js");
    }
  }
}
