/**
 * The worker side of hard-cap.ts: imports the module it was given, calls the named export
 * with the given arguments and posts the result back. Must never: catch what the function
 * throws (the parent reports it), or do anything else.
 */
import { parentPort, workerData } from "node:worker_threads";

const job = workerData as { module: string; fn: string; args: unknown[] };
const mod = (await import(job.module)) as Record<string, unknown>;
const fn = mod[job.fn];
if (typeof fn !== "function") throw new Error(`${job.module} exports no function ${job.fn}`);
parentPort?.postMessage(await fn(...job.args));
