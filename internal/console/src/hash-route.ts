/**
 * Routing by the URL's hash, without the UI library: #/runs (default), #/runs/<runId>,
 * #/approvals. Must never touch the DOM itself (the caller passes what to listen on), so
 * the server's tests can import it under Node's types.
 */

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

/**
 * Calls `set` with the route now and on every later hash change. The hash is read again after
 * subscribing: a change between the first render and this effect (a link followed while the
 * page was still starting) fires no event anyone hears, and would leave the old page shown.
 */
export function watchRoute(
  target: EventTarget,
  read: () => string,
  set: (r: Route) => void,
): () => void {
  const on = () => set(parseHash(read()));
  target.addEventListener("hashchange", on);
  on();
  return () => target.removeEventListener("hashchange", on);
}
