/**
 * Credentials in a sink URL: finding them (so the export config refuses such a URL at load)
 * and masking them in any text that names a URL (so a log line or a stored dead letter
 * never carries them, whatever produced the text). The forms (userinfo, credential-named
 * query, fragment and `;` path parameters, token-shaped values, secrets in the path of Slack,
 * Discord, Teams, Zapier and Telegram webhooks) are url-credential-forms.ts's; every form
 * refused is also masked. A sink's credentials belong in `headers` (`$ENV.NAME` values) or
 * the webhook `secret`, never in its URL. Must never: return or echo the credential it found.
 */
import {
  isCredentialParam,
  isTokenValue,
  maskPath,
  paramAdvice,
  pathCredentialProblem,
  pathParams,
} from "./url-credential-forms.ts";

/** What makes `url` carry a credential, in words without the value; undefined when none. */
export function urlCredentialProblem(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const u = new URL(url);
  if (u.username !== "" || u.password !== "")
    return "must not carry credentials (user:password@); put them in headers as $ENV.NAME";
  const inPath = pathCredentialProblem(u.hostname.toLowerCase(), u.pathname);
  if (inPath !== undefined) return inPath;
  for (const [where, params] of [
    ["path", pathParams(u.pathname)],
    ["query", u.searchParams],
    ["fragment", new URLSearchParams(u.hash.slice(1))],
  ] as const) {
    let n = 0;
    for (const [name, value] of params) {
      n++;
      if (isCredentialParam(name))
        return `must not carry a credential in its ${where} (the parameter ${JSON.stringify(
          name.slice(0, 40),
        )}); ${paramAdvice(name)}`;
      // The name is not quoted: a value-only parameter's "name" is the value.
      if (isTokenValue(value) || isTokenValue(name))
        return `must not carry a credential in its ${where} (parameter ${n} is shaped like a token); put it in headers as $ENV.NAME`;
    }
  }
  return undefined;
}

// scheme://userinfo@ — userinfo is everything up to the last "@" before the path. Wider
// than the URL parser reads it, never narrower: quotes, `<>` and `\` do not end it (text
// may hold the URL JSON-escaped), and the special schemes (http, ws, ftp…) also take the
// forms the parser reads as `https://u:p@h`: `https:u:p@h`, `https:/u:p@h`, `https:\\u:p@h`.
const USERINFO = /\b((?:https?|wss?|ftp|file):[/\\]*|[a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi;
// scheme://authority/path — the path up to a query, a fragment or the end of the URL.
const URL_PATH = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#"'<>]*)(\/[^\s?#"'<>]*)/gi;
// name=value in a query, a fragment or a path segment (`;name=value`), or a bare value.
const QUERY_PARAM = /([?&#;])([^=&#;\s"'<>]+)(?:=([^&#;\s"'<>]*))?/g;

/** `text` with every URL credential form masked: userinfo, credential paths, parameters. */
export function redactUrlCredentials(text: string): string {
  return text
    .replace(USERINFO, "$1***@")
    .replace(URL_PATH, (_all, scheme: string, authority: string, path: string) => {
      const host = authority
        .slice(authority.lastIndexOf("@") + 1)
        .replace(/:\d*$/, "")
        .toLowerCase();
      return `${scheme}${authority}${maskPath(host, path)}`;
    })
    .replace(QUERY_PARAM, (all, sep: string, name: string, value: string | undefined) => {
      if (value === undefined) return isTokenValue(safeDecode(name)) ? `${sep}***` : all;
      return isCredentialParam(safeDecode(name)) || isTokenValue(safeDecode(value))
        ? `${sep}${name}=***`
        : all;
    });
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
