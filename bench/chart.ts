/**
 * `results.svg`: contended throughput and requests per acquisition against client count, one
 * line per library and setting, with the ideal, the two-round-trip limits and the request floor
 * drawn in. Specified in Vega-Lite, rendered to SVG by Vega without a browser or canvas.
 * @module
 */
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import type { BenchResults } from "./results.js";

interface Point {
  clients: number;
  library: string;
  settings: "default" | "same wait budget";
  throughput: number | null;
  requests: number | null;
}

interface Rule {
  y: number;
  label: string;
  /** Put the label under the line (for a line close above another one). */
  below?: boolean;
}

const LABELS: Record<string, string> = {
  edgelock: "edgelock (HTTP)",
  "edgelock-poll": "edgelock, wait: poll (HTTP)",
  "edgelock-fair": "edgelock fair lock (HTTP)",
  "upstash-lock": "@upstash/lock (HTTP)",
  redlock: "redlock (TCP)",
  "redis-semaphore": "redis-semaphore (TCP)",
  "bare-handoff": "bare hand-off, reference (HTTP)",
};

/** Peers whose `sameBudget` run differs from their default (the others are drawn once). */
const BUDGET_DIFFERS = new Set(["upstash-lock", "redlock"]);

/** Renders the chart for `r.contended`; empty panels when the scenario did not run. */
export async function renderChart(r: BenchResults): Promise<string> {
  const points = toPoints(r);
  const hold = r.config.holdMs;
  const ping = r.limit?.pingP50Ms ?? null;
  const pair = r.limit?.pingPairAfterPauseP50Ms ?? null;
  const limits: Rule[] = [{ y: 1000 / hold, label: `ideal: 1 / hold (${hold} ms)` }];
  if (ping !== null) {
    limits.push({
      y: 1000 / (hold + 2 * ping),
      label: `two-RTT limit, HTTP: 1 / (hold + 2 × PING ${ping} ms)`,
    });
  }
  if (pair !== null) {
    limits.push({
      y: 1000 / (hold + pair),
      label: `same, PINGs after a ${hold} ms pause: 1 / (hold + ${pair} ms)`,
      below: true,
    });
  }
  const counts = [...new Set(points.map((p) => p.clients))].sort((a, b) => a - b);
  const first = counts[0] ?? 1;
  const last = counts.at(-1) ?? 64;
  const x = {
    field: "clients",
    type: "quantitative" as const,
    title: "concurrent clients on one lock",
    scale: { type: "log" as const, base: 2, domain: [first, last] },
    axis: { values: counts, format: "d" },
  };
  const legend = { orient: "bottom" as const, symbolType: "stroke", labelLimit: 260 };
  const dashLegend = {
    ...legend,
    symbolSize: 300,
    // The dash legend has no colour channel of its own: draw its strokes explicitly.
    encode: { symbols: { update: { stroke: { value: "#333" }, strokeWidth: { value: 2 } } } },
  };
  const encoding = (field: "throughput" | "requests", title: string, log: boolean) => ({
    x,
    y: {
      field,
      type: "quantitative" as const,
      title,
      scale: log ? { type: "log" as const } : { zero: true },
    },
    color: {
      field: "library",
      type: "nominal" as const,
      title: null,
      scale: { domain: Object.values(LABELS) },
      legend: { ...legend, columns: 2 },
    },
    strokeDash: {
      field: "settings",
      type: "nominal" as const,
      title: null,
      scale: {
        domain: ["default", "same wait budget"],
        range: [
          [1, 0],
          [6, 3],
        ],
      },
      legend: dashLegend,
    },
  });
  const lines = (field: "throughput" | "requests", title: string, log: boolean) => ({
    data: { values: points },
    transform: [{ filter: `datum.${field} != null` }],
    mark: { type: "line" as const, point: true, strokeWidth: 2 },
    encoding: encoding(field, title, log),
  });
  const rules = (rows: Rule[]) => [
    {
      data: { values: rows },
      mark: { type: "rule" as const, color: "#666", strokeDash: [2, 2] },
      encoding: { y: { field: "y", type: "quantitative" as const } },
    },
    ...[false, true].map((below) => ({
      data: { values: rows.filter((row) => (row.below ?? false) === below) },
      mark: {
        type: "text" as const,
        align: "right" as const,
        dx: -2,
        dy: below ? 10 : -5,
        color: "#333",
        fontSize: 10,
      },
      encoding: {
        x: { datum: last, type: "quantitative" as const },
        y: { field: "y", type: "quantitative" as const },
        text: { field: "label" },
      },
    })),
  ];
  const spec = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: {
      text: `Contended lock: clients loop acquire → hold ${hold} ms → release`,
      subtitle: `${r.machine.cpuModel}, ${r.machine.cores} cores, Node ${r.machine.node}, Redis ${r.machine.redis}, loopback; HTTP = @upstash/redis → bridge → Redis, TCP = ioredis → Redis`,
      anchor: "start",
      offset: 12,
    },
    config: { font: "sans-serif", view: { stroke: null } },
    hconcat: [
      {
        width: 380,
        height: 280,
        title: "completed critical sections per second",
        layer: [lines("throughput", "acquisitions / s", false), ...rules(limits)],
      },
      {
        width: 380,
        height: 280,
        title: "requests per acquisition (HTTP requests or TCP commands)",
        layer: [
          lines("requests", "requests / acquisition (log scale)", true),
          ...rules([{ y: 2, label: "floor: 1 acquire + 1 release" }]),
        ],
      },
    ],
    resolve: { scale: { color: "shared", strokeDash: "shared" } },
  } as TopLevelSpec;
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: "none" });
  try {
    return `${await view.toSVG()}\n`;
  } finally {
    view.finalize();
  }
}

function toPoints(r: BenchResults): Point[] {
  const points: Point[] = [];
  for (const [clients, libs] of Object.entries(r.contended ?? {})) {
    for (const [name, entry] of Object.entries(libs)) {
      const library = LABELS[name] ?? name;
      const point = (settings: Point["settings"], e: typeof entry) => ({
        clients: Number(clients),
        library,
        settings,
        throughput: e.throughputPerSec,
        requests: e.requestsPerAcquisition,
      });
      points.push(point("default", entry));
      if (entry.sameBudget && BUDGET_DIFFERS.has(name)) {
        points.push(point("same wait budget", entry.sameBudget));
      }
    }
  }
  return points;
}
