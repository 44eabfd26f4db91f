/**
 * The forms a credential takes in a URL, beyond `user:password@`: a query, fragment or
 * `;` path parameter named like one (token, key, sig, X-Amz-Signature, jwt, hmac, code, or
 * any name holding such a word: app_secret, personal_access_token, token[]…), a value
 * shaped like a known token whatever its name (a JWT, an AWS key id, a GitHub or Slack
 * token), and the services that carry their secret in the path (Slack, Discord, Teams,
 * Zapier, Telegram webhooks). For each, where the credential goes instead, in words.
 * url-credentials.ts refuses a sink URL holding one and masks every one in logged text.
 *
 * Must never: return or echo a credential's value; match an ordinary URL's parameter
 * (`format`, `tenant`, `v`, `sv`, `expires`…) or an ordinary path.
 */

/**
 * Parameter names that carry a credential, tested on the name lowercased with `-`, `_` and
 * `.` removed: a vendor prefix (x-amz-, x-goog-, aws, google…), an optional kind (access,
 * api, client, security, subscription…) and the credential word (token, key, signature,
 * credential, jwt, hmac, code…).
 */
const CREDENTIAL_PARAM =
  /^(?:x|aws|amz|goog|google|ms)*(?:access|account|auth|api|bearer|client|id|master|oauth|private|refresh|sas|security|session|shared|signing|subscription)?(?:token|key|secret|password|passwd|pwd|pass|sig|signature|auth|authorization|credentials?|code|sessionid|jwt|hmac|accesskeyid|accessid)$/;

/**
 * Words that make a parameter name a credential wherever they stand in it (`secret_key`,
 * `personal_access_token`, `apiKey`, `token[]`): a whole word, so `keyword`, `monkey`,
 * `codec` or `signed` are not.
 */
const CREDENTIAL_WORDS = new Set([
  "secret",
  "token",
  "key",
  "apikey",
  "password",
  "passwd",
  "pwd",
  "pw",
  "passphrase",
  "bearer",
  "auth",
  "authorization",
  "credential",
  "credentials",
  "signature",
  "sig",
  "session",
  "jwt",
  "hmac",
]);

/** The words of a parameter name: split on `_ - .`, brackets, spaces and camelCase, lowercased. */
function nameWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[-_.[\]\s]+/)
    .filter((w) => w !== "");
}

/** True when a query, fragment or path parameter named `name` (decoded) carries a credential. */
export function isCredentialParam(name: string): boolean {
  const bare = name.replace(/\[[^\]]*\]$/, "");
  const flat = bare.toLowerCase().replace(/[-_.]/g, "");
  return (
    CREDENTIAL_PARAM.test(flat) ||
    // A name that begins or ends with a credential word run together (`secretkey`, `apisecret`).
    /^(?:secret|token|password|passwd|passphrase|apikey)|(?:secret|token|password|passwd|passphrase|apikey)$/.test(
      flat,
    ) ||
    nameWords(name).some((w) => CREDENTIAL_WORDS.has(w))
  );
}

/**
 * Values that are a credential whatever they are called: JWT, AWS key id, GitHub, Slack,
 * OpenAI and Anthropic (`sk-…`), GitLab (`glpat-`), npm (`npm_`) and SendGrid (`SG.`) tokens.
 */
const TOKEN_VALUE =
  /^(?:eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*|(?:AKIA|ASIA)[A-Z0-9]{16}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{30,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})$/;

/** True when `value` (a parameter's value or a path segment, decoded) is shaped like a known token. */
export function isTokenValue(value: string): boolean {
  return TOKEN_VALUE.test(value);
}

/**
 * A path segment that looks random: 24+ characters of a base64url alphabet mixing upper- and
 * lower-case letters and digits, or 32+ hex digits (a webhook secret, an HMAC). Masked in
 * logged text, never refused at load: an ordinary path can look like that.
 */
export function looksRandom(segment: string): boolean {
  if (/^[0-9a-fA-F]{32,}$/.test(segment)) return true;
  return (
    /^[A-Za-z0-9_~+=-]{24,}$/.test(segment) &&
    /[a-z]/.test(segment) &&
    /[A-Z]/.test(segment) &&
    /[0-9]/.test(segment)
  );
}

/** The `;name=value` parameters of a URL's path segments (`/a;token=x/b`), as one parameter list. */
export function pathParams(path: string): URLSearchParams {
  const params = path.split("/").flatMap((seg) => seg.split(";").slice(1));
  return new URLSearchParams(params.join("&"));
}

const RELAY =
  "the service takes it nowhere else, so send to a relay that keeps the service's URL in its environment (docs/observability.md, Approvals in Slack) and give the relay's own key in headers as $ENV.NAME";

/** A service whose webhook URL carries its secret in the path. */
interface PathTokenService {
  /** What the URL is, for the message ("a Slack webhook URL"). */
  what: string;
  host: RegExp;
  /** The path that holds a secret. */
  path: RegExp;
  /** Path segments kept as they are when masking (the fixed words before the secret ones). */
  keep: number;
}

const PATH_TOKEN_SERVICES: readonly PathTokenService[] = [
  {
    what: "a Slack webhook URL",
    host: /^hooks\.slack(?:-gov)?\.com$/,
    path: /^\/(?:services|workflows|triggers)\/./,
    keep: 1,
  },
  {
    what: "a Discord webhook URL",
    host: /^(?:(?:ptb|canary)\.)?discord(?:app)?\.com$/,
    path: /^\/api\/(?:v\d+\/)?webhooks\/./,
    keep: 2,
  },
  {
    what: "a Microsoft Teams webhook URL",
    host: /(?:^|\.)webhook\.office\.com$|^outlook\.office(?:365)?\.com$/,
    path: /^\/webhook(?:b2)?\/./,
    keep: 1,
  },
  { what: "a Zapier webhook URL", host: /^hooks\.zapier\.com$/, path: /^\/hooks\/./, keep: 2 },
  { what: "a Telegram bot URL", host: /^api\.telegram\.org$/, path: /^\/(?:file\/)?bot./, keep: 0 },
];

/** The service whose secret is in this URL's path, if any (`host` lowercased, no port). */
function pathTokenService(host: string, path: string): PathTokenService | undefined {
  // A fully qualified name (`hooks.slack.com.`) is the same host.
  const bare = host.replace(/\.+$/, "");
  return PATH_TOKEN_SERVICES.find((s) => s.host.test(bare) && s.path.test(path));
}

/** Why a URL with `host` and `path` carries a credential in its path, in words; undefined when not. */
export function pathCredentialProblem(host: string, path: string): string | undefined {
  const service = pathTokenService(host, path);
  if (service !== undefined)
    return `must not carry a credential: ${service.what} holds its secret in the path; ${RELAY}`;
  const segments = path.split("/").map(safeDecode);
  const i = segments.findIndex(isTokenValue);
  if (i >= 0)
    return `must not carry a credential in its path (segment ${i} is shaped like a token); put it in headers as $ENV.NAME`;
  return undefined;
}

/** Where a credential in the query parameter `name` goes instead, in words. */
export function paramAdvice(name: string): string {
  const bare = name.toLowerCase().replace(/[-_.]/g, "");
  if (bare === "code")
    return "Azure Functions take the key as a header: put it in headers as x-functions-key: $ENV.NAME";
  if (/^(?:x(?:amz|goog)|awsaccesskeyid|googleaccessid|sig$|signature$)/.test(bare))
    return "a presigned or SAS URL is itself the credential and cannot be split off: deliver to a receiver that takes a header credential (headers, e.g. Authorization: $ENV.NAME) or to a relay that holds the URL";
  return "put it in headers as $ENV.NAME (e.g. Authorization: $ENV.NAME)";
}

/** `path` (a URL's path as written) with the secret segments of a path-token service, token-shaped and random-looking segments masked. */
export function maskPath(host: string, path: string): string {
  const service = pathTokenService(host, path);
  const segments = path.split("/");
  return segments
    .map((seg, i) => {
      // segments[0] is "" (the path starts with "/").
      if (service !== undefined && i > service.keep && seg !== "") return "***";
      // A segment's `;name=value` parameters are masked with the query's (url-credentials.ts).
      const semi = seg.indexOf(";");
      const head = semi < 0 ? seg : seg.slice(0, semi);
      const d = safeDecode(head);
      return isTokenValue(d) || looksRandom(d) ? `***${seg.slice(head.length)}` : seg;
    })
    .join("/");
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
