import { readFile, writeFile } from "node:fs/promises";
import { renderChart } from "./chart.js";

const r = JSON.parse(await readFile("bench/.tmp/results.json", "utf8"));
await writeFile("bench/.tmp/results.svg", await renderChart(r));
