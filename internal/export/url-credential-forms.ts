/**
 * The forms a credential takes in a URL, beyond `user:password@`: a query or fragment
 * parameter named like one (token, key, sig, X-Amz-Signature, jwt, hmac, code…), a value
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

/** True when a query or fragment parameter named `name` carries a credential. */
export function isCredentialParam(name: string): boolean {
  return CREDENTIAL_PARAM.test(name.toLowerCase().replace(/[-_.]/g, ""));
}

/** Values that are a credential whatever they are called: JWT, AWS key id, GitHub and Slack tokens. */
const TOKEN_VALUE =
  /^(?:eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*|(?:AKIA|ASIA)[A-Z0-9]{16}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abposr]-[A-Za-z0-9-]{10,})$/;

/** True when `value` (a parameter's value or a path segment, decoded) is shaped like a known token. */
export function isTokenValue(value: string): boolean {
  return TOKEN_VALUE.test(value);
}

/**
 * A path segment that looks random (24+ characters of a base64url alphabet mixing upper- and
 * lower-case letters and digits). Masked in logged text, never refused at load: an ordinary
 * path can look like that.
 */
export function looksRandom(segment: string): boolean {
  return (
    /^[A-Za-z0-9_~+=-]{24,}$/.test(segment) &&
    /[a-z]/.test(segment) &&
    /[A-Z]/.test(segment) &&
    /[0-9]/.test(segment)
  );
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
  return PATH_TOKEN_SERVICES.find((s) => s.host.test(host) && s.path.test(path));
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
      const d = safeDecode(seg);
      return isTokenValue(d) || looksRandom(d) ? "***" : seg;
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
