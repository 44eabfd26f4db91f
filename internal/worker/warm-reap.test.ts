/**
 * A dead worker's warm sandboxes are reaped by the workers that survive it: two real
 * `agentd worker` processes (one warm sandbox each, the default), one SIGKILLed. Its warm
 * container must go (it stays running otherwise: nobody hands it out, and it has not
 * exited) once its presence beats stop; the survivor's own warm container must stay.
 * Asserted as facts, with a generous cap (lease ttl + the reaper's minute + slack for a
 * loaded machine), never as a duration.
 */
import assert from "node:assert/strict";
import { hostname } from "node:os";
import { after, before, it } from "node:test";
import { LABEL_POOL } from "../sandbox/docker-sandbox.ts";
import { RedisWorkerPresence } from "../scheduler/redis-presence.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { textReply } from "../testing/openai-stub.ts";
import { createRunWatch, type RunWatch } from "../testing/run-watch.ts";

const LEASE_TTL_MS = 3000;
/** ttl + one reaper period (60 s) + a loaded machine's slack. */
const CAP_MS = 240_000;

let c: Cluster;
let w: RunWatch;
before(async () => {
  c = await startCluster({
    workers: 2,
    leaseTtlMs: LEASE_TTL_MS,
    script: () => ({ chunks: textReply(["done"]) }),
  });
  w = createRunWatch(c);
});
after(async () => {
  await c?.stop();
});

/** The running warm containers kept by the worker with this pid. */
async function warmOf(pid: number): Promise<{ id: string; state: string }[]> {
  const list = await c.docker.listContainers({
    all: true,
    filters: { label: [`${LABEL_POOL}=${hostname()}:${pid}`] },
  });
  return list.map((x) => ({ id: x.Id, state: x.State }));
}

it("a SIGKILLed worker's warm sandbox is removed by the surviving worker; the survivor's stays", {
  timeout: CAP_MS + 120_000,
}, async () => {
  const [dead, alive] = c.workers as [(typeof c.workers)[0], (typeof c.workers)[0]];
  const deadWarm = await w.until("the first worker's warm sandbox to run", async () => {
    const ws = (await warmOf(dead.pid)).filter((x) => x.state === "running");
    return ws.length > 0 ? ws : undefined;
  });
  await w.until("the second worker's warm sandbox to run", async () => {
    const ws = (await warmOf(alive.pid)).filter((x) => x.state === "running");
    return ws.length > 0 ? ws : undefined;
  });
  const presence = new RedisWorkerPresence({ client: c.redis.client() });
  assert.equal(await presence.stateOf(`${hostname()}:${dead.pid}`), "alive");
  await dead.kill();
  await w.until("the killed worker to be seen dead", async () =>
    (await presence.stateOf(`${hostname()}:${dead.pid}`)) === "dead" ? true : undefined,
  );
  // Its keeper is gone but its warm container still runs: only the reaper removes it.
  const still = (await warmOf(dead.pid)).filter((x) => x.state === "running");
  assert.ok(
    still.length > 0,
    "the dead worker's warm container is still running when it is seen dead",
  );
  await w.until(
    "the dead worker's warm containers to be removed",
    async () => ((await warmOf(dead.pid)).length === 0 ? true : undefined),
    CAP_MS,
  );
  assert.ok(deadWarm.length > 0);
  assert.equal(await presence.stateOf(`${hostname()}:${alive.pid}`), "alive");
  assert.ok(
    (await warmOf(alive.pid)).some((x) => x.state === "running"),
    "the surviving worker's own warm container is left alone",
  );
});
