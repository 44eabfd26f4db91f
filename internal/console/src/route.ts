/** The current route as a hook (hash-route.ts holds the parsing and the subscription). */
import { useEffect, useState } from "preact/hooks";
import { parseHash, type Route, watchRoute } from "./hash-route.ts";

export { parseHash, type Route, runHref } from "./hash-route.ts";

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => watchRoute(window, () => location.hash, setRoute), []);
  return route;
}
