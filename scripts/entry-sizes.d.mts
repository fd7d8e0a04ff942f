// Types of what the bench imports from entry-sizes.mjs.
/** One scenario's measure: gzip bytes over its base Worker, of which Lua; null when not built. */
export interface EntrySize {
  name: string;
  bytes: number | null;
  lua: number | null;
  /** kB (1 kB = 1000 bytes). */
  budget: number;
  /** kB; absent where the issue set none. */
  target?: number;
  passed: boolean | null;
}
/** Minified bytes of one module of a scenario's bundle; `lua`: a generated script module. */
export interface ModuleSize {
  module: string;
  bytes: number;
  lua: boolean;
}
/** Every scenario of scripts/entry-sizes.mjs, measured (needs `npm run build`). */
export function measure(): Promise<EntrySize[]>;
/** Minified bytes per module of the scenario `name`, largest first. */
export function modules(name: string): Promise<ModuleSize[]>;
