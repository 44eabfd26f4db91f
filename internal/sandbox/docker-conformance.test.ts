/** The sandbox port's conformance suite (conformance.ts) on the Docker engine. */
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { sandboxConformance } from "./conformance.ts";
import { containerName, createDockerSandbox } from "./docker-sandbox.ts";

sandboxConformance("docker", async () => {
  const { docker, sandbox, label, cleanup } = await testSandbox();
  return {
    sandbox,
    other: createDockerSandbox({ docker, managedLabel: label }),
    image: sandboxImage("test"),
    removeBehindBack: async (runId) => {
      await docker.getContainer(containerName(label, runId)).remove({ force: true, v: true });
    },
    cleanup,
  };
});
