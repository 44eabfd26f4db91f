/**
 * Credentials in a sink URL: finding them (so the export config refuses such a URL at load)
 * and masking them in any text that names a URL (so a log line or a stored dead letter
 * never carries them, whatever produced the text). A sink's credentials belong in
 * `headers` (`$ENV.NAME` values) or the webhook `secret`, never in its URL. Must never:
 * return or echo the credential it found.
 */

/** Query parameter names that carry a credential (matched case-insensitively, `-`/`_` ignored). */
const CREDENTIAL_PARAM =
  /^(x)?(access|auth|api|client|refresh|id|bearer|session|private)?(token|key|secret|password|passwd|pwd|pass|sig|signature|auth|authorization|credentials?|code|sessionid)$/;

/** What makes `url` carry a credential, in words without the value; undefined when none. */
export function urlCredentialProblem(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const u = new URL(url);
  if (u.username !== "" || u.password !== "")
    return "must not carry credentials (user:password@); put them in headers as $ENV.NAME";
  for (const name of u.searchParams.keys()) {
    const bare = name.toLowerCase().replace(/[-_.]/g, "");
    if (CREDENTIAL_PARAM.test(bare))
      return `must not carry a credential in its query (the parameter ${JSON.stringify(
        name.slice(0, 40),
      )}); put it in headers as $ENV.NAME`;
  }
  return undefined;
}

// scheme://userinfo@ — userinfo is everything up to the last "@" before the path.
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#"'<>]*@/gi;
// name=value in a query, where name looks like a credential.
const QUERY_PARAM = /([?&])([^=&#\s"'<>]+)=([^&#\s"'<>]*)/g;

/** `text` with every URL's userinfo and credential-like query values replaced by "***". */
export function redactUrlCredentials(text: string): string {
  return text.replace(USERINFO, "$1***@").replace(QUERY_PARAM, (all, sep, name) => {
    const bare = String(name).toLowerCase().replace(/[-_.]/g, "");
    return CREDENTIAL_PARAM.test(bare) ? `${sep}${name}=***` : all;
  });
}
