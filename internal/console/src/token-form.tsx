/** Asks for the bearer token and checks it with WhoAmI before keeping it. */
import { useState } from "preact/hooks";
import { createApi, errorText } from "./api.ts";
import { saveToken } from "./token.ts";

export interface Who {
  token: string;
  tenantId: string;
  principal: string;
  roles: string[];
}

export function TokenForm(props: { message?: string; onSignedIn: (who: Who) => void }) {
  const [token, setToken] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(props.message ?? "");

  async function submit(e: Event) {
    e.preventDefault();
    const t = token.trim();
    if (t === "") {
      setError("Enter a token.");
      return;
    }
    setBusy(true);
    setError("");
    try {
      const who = await createApi(t).whoAmI({});
      saveToken(t);
      props.onSignedIn({
        token: t,
        tenantId: who.tenantId,
        principal: who.principal,
        roles: who.roles,
      });
    } catch (err) {
      setError(`This token was not accepted: ${errorText(err)}`);
      setBusy(false);
    }
  }

  return (
    <main class="signin">
      <h1>agentd console</h1>
      <form data-testid="token-form" onSubmit={submit} aria-describedby="token-help">
        <label for="token">API token</label>
        <input
          id="token"
          data-testid="token-input"
          type="password"
          autocomplete="off"
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
          aria-invalid={error !== ""}
          aria-describedby="token-error"
        />
        <p id="token-help" class="hint">
          The bearer token of your agentd account. It stays in this tab (sessionStorage) and is sent
          only to this server.
        </p>
        <p id="token-error" class="error" role="alert">
          {error}
        </p>
        <button type="submit" disabled={busy}>
          {busy ? "Checking…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
