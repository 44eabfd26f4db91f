/**
 * The SDK's event follow survives its server dying: `agentd dev` is SIGKILLed while a
 * client follows a run, started again on the same port and data directory, and the
 * follower gets every later event exactly once, up to the run's end.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { AgentdClient } from "../../clients/typescript/src/index.ts";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-sdk-resume-"));
const procs: AgentdProcess[] = [];
after(async () => {
  await Promise.allSettled(procs.map((p) => p.stop("SIGKILL")));
  rmSync(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe("AgentdClient.events", { timeout: 90_000 }, () => {
  it("resumes after the server is killed and comes back, each event once", async () => {
    const port = await freePort();
    const start = async () => {
      const p = await startAgentd("dev", ["--data-dir", dir, "--listen", `127.0.0.1:${port}`]);
      procs.push(p);
      return p;
    };
    let dev = await start();
    const agentd = new AgentdClient({ address: `127.0.0.1:${port}` });
    const run = await agentd.createRun({ prompt: "wait in the queue" });
    const seen: string[] = [];
    let first: () => void = () => undefined;
    const gotFirst = new Promise<void>((r) => {
      first = r;
    });
    const following = (async () => {
      for await (const ev of agentd.events(run.runId)) {
        seen.push(`${ev.seq}:${ev.type}`);
        first();
      }
    })();
    await gotFirst;
    await dev.stop("SIGKILL");
    dev = await start();
    await new AgentdClient({ address: `127.0.0.1:${port}` }).cancel(run.runId, "enough");
    await following;
    assert.deepEqual(seen, ["1:run.queued", "2:run.cancelled"]);
  });
});
