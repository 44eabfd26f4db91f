/** The shell: the token gate, the navigation and the page of the current route. */
import { useCallback, useMemo, useState } from "preact/hooks";
import { createApi } from "./api.ts";
import { ApprovalsPage } from "./approvals-page.tsx";
import { useFeed } from "./feed.ts";
import { useRoute } from "./route.ts";
import { RunPage } from "./run-page.tsx";
import { RunsPage } from "./runs-page.tsx";
import { type Session, SessionContext } from "./session.ts";
import { clearToken, loadToken } from "./token.ts";
import { TokenForm, type Who } from "./token-form.tsx";
import { WhoAmIGate } from "./whoami-gate.tsx";

export function App() {
  const [who, setWho] = useState<Who | null>(null);
  const [message, setMessage] = useState<string | undefined>(undefined);
  const signOut = useCallback((why?: string) => {
    clearToken();
    setWho(null);
    setMessage(why);
  }, []);
  if (who === null) {
    const stored = loadToken();
    if (stored !== "") return <WhoAmIGate token={stored} onSignedIn={setWho} onRefused={signOut} />;
    return <TokenForm message={message} onSignedIn={setWho} />;
  }
  return <Shell who={who} signOut={signOut} />;
}

function Shell(props: { who: Who; signOut: (why?: string) => void }) {
  const { who, signOut } = props;
  const session = useMemo<Session>(
    () => ({
      api: createApi(who.token),
      tenantId: who.tenantId,
      principal: who.principal,
      roles: who.roles,
      signOut,
    }),
    [who, signOut],
  );
  const route = useRoute();
  const [pending, setPending] = useState<number | undefined>(undefined);
  const countPending = useCallback(async () => {
    try {
      const res = await session.api.listApprovals({ pageSize: 500 });
      setPending(res.approvals.length);
    } catch {
      // The pages show errors; the count keeps its last value.
    }
  }, [session]);
  useFeed(session.api, ["approval.*", "run.*"], countPending);

  return (
    <SessionContext.Provider value={session}>
      <a class="skip" href="#content">
        Skip to content
      </a>
      <header class="top">
        <nav aria-label="Main">
          <span class="brand">agentd</span>
          <a href="#/runs" aria-current={route.page !== "approvals" ? "page" : undefined}>
            Runs
          </a>
          <a href="#/approvals" aria-current={route.page === "approvals" ? "page" : undefined}>
            Approvals{" "}
            <span class="count" aria-live="polite">
              {pending === undefined ? "" : `(${pending} pending)`}
            </span>
          </a>
        </nav>
        <div class="who">
          <span>
            {who.principal} · tenant {who.tenantId} · {who.roles.join(", ") || "no roles"}
          </span>
          <button type="button" class="secondary" onClick={() => signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="content" tabIndex={-1}>
        {route.page === "runs" && <RunsPage />}
        {route.page === "run" && <RunPage key={route.runId} runId={route.runId} />}
        {route.page === "approvals" && <ApprovalsPage />}
      </main>
    </SessionContext.Provider>
  );
}
