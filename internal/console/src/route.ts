/** Routing by the URL's hash: #/runs (default), #/runs/<runId>, #/approvals. */
import { useEffect, useState } from "preact/hooks";

export type Route = { page: "runs" } | { page: "run"; runId: string } | { page: "approvals" };

export function parseHash(hash: string): Route {
  const path = hash.replace(/^#/, "");
  const run = /^\/runs\/([^/]+)$/.exec(path);
  if (run?.[1]) {
    try {
      return { page: "run", runId: decodeURIComponent(run[1]) };
    } catch {
      return { page: "runs" }; // a malformed link (%E0): the runs list, not a blank page
    }
  }
  if (path === "/approvals") return { page: "approvals" };
  return { page: "runs" };
}

export function runHref(runId: string): string {
  return `#/runs/${encodeURIComponent(runId)}`;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return route;
}
