#!/usr/bin/env node
/**
 * Upload throughput: `node bench/upload.ts [--mib 200] [--runs 3]` (what `make bench`
 * runs; never run by the tests). A workspace tar of --mib MiB of incompressible files is
 * written once to a temp file, then sent, alternately:
 *   - raw: the same bytes in 1 MiB writes as one HTTP/2 (h2c) POST to a sink in another
 *     process that only counts them (`cat > /dev/null` over the same connection kind);
 *   - agentd: UploadWorkspace (gRPC client stream, 1 MiB messages) to `agentd dev` on the
 *     embedded log: unpacked, checked, re-packed, hashed and stored as it streams.
 * Reported: MiB/s of each (median of --runs), agentd as a ratio of raw, and the agentd
 * process's RSS growth at peak during its uploads. The last line is JSON.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as tarStream from "tar-stream";
import { startAgentd } from "../internal/testing/agentd-process.ts";
import { GrpcRunClient } from "../internal/testing/grpc-run-client.ts";

const { values } = parseArgs({
  options: { mib: { type: "string", default: "200" }, runs: { type: "string", default: "3" } },
});
const MIB = Number(values.mib);
const RUNS = Number(values.runs);
const CHUNK = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "agentd-bench-upload-"));
const tarPath = join(dir, "ws.tar");

async function writeTar(): Promise<number> {
  const pack = tarStream.pack();
  const out = createWriteStream(tarPath);
  pack.pipe(out);
  for (let i = 0; i < MIB / 4; i++)
    pack.entry({ name: `data/f${i}.bin`, mode: 0o644 }, randomBytes(4 * CHUNK));
  pack.finalize();
  await new Promise<void>((r) => out.on("close", () => r()));
  return readFileSync(tarPath).byteLength;
}

async function* chunks(): AsyncGenerator<Uint8Array> {
  for await (const c of createReadStream(tarPath, { highWaterMark: CHUNK })) yield c as Buffer;
}

/** An h2c sink in another process: counts the bytes of each POST, answers the count. */
async function startSink(): Promise<{ port: number; stop: () => void }> {
  const code = `const h=require("node:http2");const s=h.createServer();s.on("stream",(st)=>{let n=0;st.on("data",(c)=>{n+=c.length});st.on("end",()=>{st.respond({":status":200});st.end(String(n))})});s.listen(0,"127.0.0.1",()=>console.log(s.address().port));`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((r) =>
    child.stdout.once("data", (d) => r(Number(String(d).trim()))),
  );
  return { port, stop: () => child.kill() };
}

async function rawUpload(port: number): Promise<number> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  const t0 = performance.now();
  const req = session.request({ ":method": "POST", ":path": "/" });
  for await (const c of chunks()) if (!req.write(c)) await new Promise((r) => req.once("drain", r));
  req.end();
  let body = "";
  req.on("data", (d) => (body += d));
  await new Promise((r) => req.on("end", r));
  const ms = performance.now() - t0;
  session.close();
  if (Number(body) === 0) throw new Error("the sink got nothing");
  return ms;
}

const rssOf = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

const bytes = await writeTar();
const sink = await startSink();
const dev = await startAgentd("dev", ["--data-dir", join(dir, "dev")]);
const client = new GrpcRunClient(dev.addr);
try {
  const base = rssOf(dev.pid);
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(dev.pid))), 50);
  const raw: number[] = [];
  const agentd: number[] = [];
  let digest = "";
  for (let i = 0; i < RUNS; i++) {
    raw.push(await rawUpload(sink.port));
    const t0 = performance.now();
    digest = (await client.uploadWorkspace(chunks())).digest;
    agentd.push(performance.now() - t0);
  }
  clearInterval(sampler);
  const mibs = (ms: number) => bytes / CHUNK / (ms / 1000);
  const r = {
    bench: "upload",
    mib: Number((bytes / CHUNK).toFixed(1)),
    runs: RUNS,
    rawMiBs: Number(mibs(median(raw)).toFixed(1)),
    agentdMiBs: Number(mibs(median(agentd)).toFixed(1)),
    ratio: Number((mibs(median(agentd)) / mibs(median(raw))).toFixed(3)),
    serverRssGrowthMiB: Number(((peak - base) / CHUNK).toFixed(1)),
    digest,
  };
  console.log(`bench/upload: a ${r.mib} MiB workspace tar, median of ${RUNS} run(s) each`);
  console.log(`  raw h2c POST to a sink      ${r.rawMiBs} MiB/s`);
  console.log(
    `  agentd UploadWorkspace      ${r.agentdMiBs} MiB/s  (${r.ratio}x raw: unpacked, checked, re-packed, hashed, stored)`,
  );
  console.log(`  agentd RSS growth at peak   ${r.serverRssGrowthMiB} MiB`);
  console.log(JSON.stringify(r));
} finally {
  client.close();
  await dev.stop();
  sink.stop();
  rmSync(dir, { recursive: true, force: true });
}
