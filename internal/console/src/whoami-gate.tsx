/**
 * A token kept from before is checked again (WhoAmI) when the page loads: it may have been
 * revoked, its roles may have changed. Refused: back to the form; server unreachable: say so.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { useEffect, useState } from "preact/hooks";
import { createApi, errorText } from "./api.ts";
import type { Who } from "./token-form.tsx";

export function WhoAmIGate(props: {
  token: string;
  onSignedIn: (who: Who) => void;
  onRefused: (why?: string) => void;
}) {
  const { token, onSignedIn, onRefused } = props;
  const [error, setError] = useState("");
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    let live = true;
    setError("");
    void attempt;
    createApi(token)
      .whoAmI({})
      .then((w) => {
        if (live)
          onSignedIn({ token, tenantId: w.tenantId, principal: w.principal, roles: w.roles });
      })
      .catch((err: unknown) => {
        if (!live) return;
        const refused =
          err instanceof ConnectError &&
          (err.code === Code.Unauthenticated || err.code === Code.PermissionDenied);
        if (refused) onRefused(`Your token was not accepted: ${errorText(err)}`);
        else setError(`The server did not answer: ${errorText(err)}`);
      });
    return () => {
      live = false;
    };
  }, [token, onSignedIn, onRefused, attempt]);
  return (
    <main class="signin">
      <h1>agentd console</h1>
      <p role="status">{error || "Signing in…"}</p>
      {error && (
        <p class="actions">
          <button type="button" onClick={() => setAttempt((n) => n + 1)}>
            Try again
          </button>
          <button type="button" class="secondary" onClick={() => onRefused()}>
            Use another token
          </button>
        </p>
      )}
    </main>
  );
}
