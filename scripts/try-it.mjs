// Runs the README's "Try it without an account" as a reader would, while 127.0.0.1:6379 and
// :8079 (Redis's and the bridge's usual ports) are taken: its first ```sh block (start Redis and
// the bridge, export UPSTASH_REDIS_REST_URL / _TOKEN) in bash with job control, as in a terminal,
// then the README's first ts sample saved as app.mts and run with `npx -y tsx app.mts`, then the
// section's last ```sh block (stop everything). scripts/run-samples.mjs calls it.
//
// It fails when a step fails, the sample does not print `release: released`, the bridge listens
// on a taken port, or a port the block used is still open after the stop block (whatever it
// left running is then stopped).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import { extract, root } from "./samples.mjs";

const TIMEOUT_MS = 120_000;
const TAKEN = [6379, 8079];

/** The ```sh blocks of the README's section `heading`, in order. */
export function shellBlocks(heading) {
  const text = readFileSync(join(root, "README.md"), "utf8");
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README.md has no "## ${heading}" section`);
  const end = text.indexOf("\n## ", start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```(?:sh|bash)\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/** Whether something accepts connections on 127.0.0.1:`port`. */
async function open(port) {
  const socket = connect(port, "127.0.0.1");
  try {
    await once(socket, "connect");
    return true;
  } catch {
    return false;
  } finally {
    socket.destroy();
  }
}

/** Takes `port` on 127.0.0.1 unless something has it already; returns a stop function. */
async function take(port) {
  if (await open(port)) return async () => {};
  const server = createServer((socket) => socket.destroy()).listen(port, "127.0.0.1");
  await once(server, "listening");
  return async () => {
    server.close();
    await once(server, "close");
  };
}

/** Runs the check; prints what happened and returns the problems found (none: it works). */
export async function checkTryIt() {
  const blocks = shellBlocks("Try it without an account");
  if (blocks.length < 2) return ['the "Try it" section needs a start and a stop ```sh block'];
  const [startBlock] = blocks;
  const stopBlock = blocks.at(-1);
  const [sample] = extract("README.md");
  const dir = join(root, ".samples-try");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // Inside the package, where `edgelock` resolves to it, as in an app that installed it.
  writeFileSync(join(dir, "app.mts"), `${sample.code}\n`);
  const script = [
    "set -em",
    startBlock,
    // Whatever the stop block leaves running goes when this script ends (reported below).
    "bridge_job=$!; trap 'kill -- -$bridge_job 2>/dev/null; redis-cli -h 127.0.0.1 -p \"$REDIS_PORT\" shutdown nosave 2>/dev/null || true' EXIT",
    // A terminal's reader types the next command a moment later: the bridge listens by then.
    "for _ in $(seq 100); do node -e 'fetch(process.env.UPSTASH_REDIS_REST_URL).then(() => {}, () => process.exit(1))' && break; sleep 0.1; done",
    `ports="$REDIS_PORT $(node -p 'new URL(process.env.UPSTASH_REDIS_REST_URL).port')"`,
    'echo "try-it: ports $ports"',
    "(cd .samples-try && npx -y tsx app.mts)",
    stopBlock,
    "sleep 0.5",
    `for port in $ports; do node -e 'require("node:net").connect(+process.argv[1], "127.0.0.1").on("connect", () => { console.log("try-it: still open: " + process.argv[1]); process.exit() }).on("error", () => {})' "$port"; done`,
  ].join("\n");
  const releases = await Promise.all(TAKEN.map(take));
  const problems = [];
  let output = "";
  try {
    const child = spawn("bash", ["-c", script], {
      cwd: root,
      env: { ...process.env, UPSTASH_REDIS_REST_URL: "", UPSTASH_REDIS_REST_TOKEN: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.on("data", (d) => {
      output += d;
    });
    child.stderr.on("data", (d) => {
      output += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS);
    const [code] = await once(child, "exit");
    clearTimeout(timer);
    if (code !== 0) problems.push(`the steps exited with ${code}`);
    if (!output.includes("release: released")) problems.push("the sample did not print its lock");
    const used = /try-it: ports (\d+) (\d+)/.exec(output);
    if (!used) {
      problems.push("the start block set no Redis port or bridge URL");
    } else {
      const ports = used.slice(1).map(Number);
      if (ports.some((p) => TAKEN.includes(p))) problems.push(`it used a taken port: ${ports}`);
    }
    for (const [, port] of output.matchAll(/try-it: still open: (\d+)/g)) {
      problems.push(`port ${port} was still open after the stop block`);
    }
  } finally {
    await Promise.all(releases.map((release) => release()));
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `\n▶ README.md "Try it without an account", with ports ${TAKEN.join(" and ")} taken${problems.length > 0 ? `  FAILED: ${problems.join("; ")}` : ""}`,
  );
  console.log(output.trimEnd().replace(/^/gm, "  "));
  return problems;
}
