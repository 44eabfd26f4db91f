/** The sandbox port's conformance suite (conformance.ts) on the test cluster. */
import { ulid } from "ulid";
import { sandboxImage } from "../../testing/docker.ts";
import { loadImages, testNamespace } from "../../testing/kubernetes.ts";
import { sandboxConformance } from "../conformance.ts";
import { createKubernetesSandbox } from "./kubernetes-sandbox.ts";
import { podOfRun } from "./pod-claim.ts";

sandboxConformance("kubernetes", async () => {
  const ns = await testNamespace("baseline");
  const image = sandboxImage("test");
  await loadImages(image);
  const managed = `c${ulid().toLowerCase().slice(-8)}`;
  const make = () =>
    createKubernetesSandbox({
      kc: ns.kc,
      namespace: ns.namespace,
      managed,
      imagePullPolicy: "Never",
    });
  return {
    sandbox: make(),
    other: make(),
    image,
    removeBehindBack: async (runId) => {
      const pod = await podOfRun(ns.core, ns.namespace, managed, runId);
      await ns.core.deleteNamespacedPod({
        namespace: ns.namespace,
        name: pod?.metadata?.name ?? "",
        gracePeriodSeconds: 0,
      });
    },
    cleanup: () => ns.cleanup(),
  };
});
