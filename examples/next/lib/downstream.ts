/**
 * The service the routes' work talks to (a fulfilment API, a report builder): `DOWNSTREAM_URL`.
 * Every call carries the lease's signal, so the work stops when the lock is lost.
 */
export async function callDownstream(
  path: string,
  body: unknown,
  signal: AbortSignal,
): Promise<Response> {
  const base = process.env.DOWNSTREAM_URL;
  if (!base) throw new Error("DOWNSTREAM_URL is not set");
  return fetch(new URL(path, base), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
}
