/** The webhook route of ../webhook, run as an Edge Function. */
export { POST } from "../webhook/route";
export const runtime = "edge";
