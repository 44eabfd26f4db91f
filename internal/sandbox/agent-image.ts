/**
 * Whether a sandbox image carries the agent (sandbox-images/agent), and where: the image's
 * label org.agentd.sandbox.agent, written by scripts/build-images.sh. One image inspect per
 * image and minute; an image without the label gets agentd's agent injected
 * (agent-bundle.ts), else runs through `docker exec`.
 *
 * Must never: trust a path that is not absolute (the label is the image author's), or be
 * asked about a run's own image (its author could name any binary, to run as root).
 */
import type Docker from "dockerode";

export const AGENT_LABEL = "org.agentd.sandbox.agent";
const TTL_MS = 60_000;

export type AgentImageLookup = (image: string) => Promise<string | undefined>;

export function agentImageLookup(docker: Docker, now: () => number = Date.now): AgentImageLookup {
  const cache = new Map<string, { at: number; path: Promise<string | undefined> }>();
  return (image) => {
    const hit = cache.get(image);
    if (hit !== undefined && now() - hit.at < TTL_MS) return hit.path;
    const path = docker
      .getImage(image)
      .inspect()
      .then((info) => agentPathOf(info.Config?.Labels))
      .catch(() => {
        cache.delete(image); // unknown image: createContainer names the problem
        return undefined;
      });
    cache.set(image, { at: now(), path });
    return path;
  };
}

/** The agent's path from an image's (or its container's) labels, if it is a plain absolute path. */
export function agentPathOf(labels: Record<string, string> | undefined): string | undefined {
  const p = labels?.[AGENT_LABEL];
  return typeof p === "string" && /^\/[\w./-]+$/.test(p) && !p.includes("..") ? p : undefined;
}
