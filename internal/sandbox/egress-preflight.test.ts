/**
 * The start check of allowlist workers, on the real engine: here (the engine's host) its
 * bridges are found and iptables answers; names that are not interfaces, or not safe to
 * look up, are not here. scripts/agentd-image.test.ts runs the other side: a worker in a
 * container of its own network, and one without NET_ADMIN, refusing to start.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { requireDocker } from "../testing/docker.ts";
import { bridgeIsHere, egressProblem, engineBridges } from "./egress-preflight.ts";

describe("egress preflight", () => {
  it("finds the engine's bridges in this namespace and nothing wrong on the engine's host", async () => {
    const docker = await requireDocker();
    const bridges = await engineBridges(docker);
    assert.ok(bridges.includes("docker0"), `the default bridge: ${bridges.join(", ")}`);
    assert.ok(bridges.some(bridgeIsHere), "one of them is an interface here");
    assert.equal(await egressProblem(docker), undefined);
  });

  it("takes only interface names: no path, nothing longer than 15 characters", () => {
    assert.equal(bridgeIsHere("lo"), true);
    for (const bad of ["", "../lo", "lo/..", ".", "..", "a".repeat(16), "agd000000000000", "lo\n"])
      assert.equal(bridgeIsHere(bad), false, JSON.stringify(bad));
  });
});
