/**
 * The bridge's command line (src/bridge/cli.ts) run from source in a child process, for the tests
 * of its flags, exit codes and output.
 */
import { type ChildProcessByStdio, spawn } from "node:child_process";
import { once } from "node:events";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** How the CLI ended, with everything it printed. */
export interface CliExit {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A running CLI. */
export interface BridgeCli {
  child: ChildProcessByStdio<null, Readable, Readable>;
  /** Resolves once the process exited. */
  exited: Promise<CliExit>;
  /** Resolves with the first match of `pattern` in standard output; rejects if it exits first. */
  printed(pattern: RegExp): Promise<RegExpExecArray>;
  /** Resolves with the URL of the `edgelock-bridge listening on …` line. */
  listening(): Promise<string>;
}

/**
 * Starts the CLI with `args`, in an environment without the variables it reads
 * (`EDGELOCK_BRIDGE_TOKEN`, `REDIS_URL`, `PORT`) except those given in `env`.
 */
export function runBridgeCli(args: string[], env: Record<string, string> = {}): BridgeCli {
  const clean = { ...process.env };
  delete clean.EDGELOCK_BRIDGE_TOKEN;
  delete clean.REDIS_URL;
  delete clean.PORT;
  const child = spawn(process.execPath, ["--import", "tsx", "src/bridge/cli.ts", ...args], {
    cwd: root,
    env: { ...clean, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const exited = once(child, "exit").then(([code]) => ({
    code: code as number | null,
    stdout,
    stderr,
  }));
  const printed = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const onData = () => {
        const match = pattern.exec(stdout);
        if (!match) return;
        child.stdout.off("data", onData);
        resolve(match);
      };
      child.stdout.on("data", onData);
      onData();
      exited.then((r) => reject(new Error(`CLI exited early: ${JSON.stringify(r)}`)), reject);
    });
  return {
    child,
    exited,
    printed,
    listening: async () =>
      (await printed(/edgelock-bridge listening on (http:\/\/127\.0\.0\.1:\d+)/))[1] as string,
  };
}
