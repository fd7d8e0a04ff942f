/**
 * The bridge's opt-in request log (`--log`, `startBridge({ log })`).
 *
 * @module
 */

/**
 * One line of the request log. It never carries the token, the query string or any command
 * argument: only the route, the status, the time taken and the command names.
 */
export interface RequestLogEntry {
  /** HTTP method, e.g. `POST`. */
  method: string;
  /** One of the bridge's routes (`/`, `/pipeline`, `/multi-exec`, `/__bridge/...`), else `(other)`. */
  route: string;
  /** HTTP status answered (503 for a faulted request whose answer was never sent). */
  status: number;
  /** Time from the request's arrival to the answer, in ms. */
  durationMs: number;
  /** Lower-cased command names of a data request, e.g. `["evalsha"]`; `?` for a name that is not one. */
  commands: string[];
}
