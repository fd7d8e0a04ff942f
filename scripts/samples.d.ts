// The application's own functions that the code samples of README.md and docs/ call, declared
// for scripts/check-samples.mjs. Keep this list short: prefer complete samples.
declare function fulfil(event: unknown, signal: AbortSignal): Promise<void>;
declare function handleEvent(event: unknown, signal: AbortSignal): Promise<void>;
declare function rebuild(id: string, signal: AbortSignal): Promise<void>;
declare function rebuildReport(signal: AbortSignal): Promise<number>;
declare function rebuildSearchIndex(env: unknown, signal: AbortSignal): Promise<void>;
declare function reindex(signal: AbortSignal): Promise<void>;
