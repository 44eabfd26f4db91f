/**
 * The export config (`--export-config FILE`, AGENTD_EXPORT_CONFIG): the sinks that receive
 * the log's events (webhooks, OTLP logs), validated at start with every problem named by
 * file, line and field. Secrets never live in the file: a webhook's HMAC key is
 * `$ENV.NAME` or `secretFile: PATH`, read at start. Must never: start with a sink it cannot
 * deliver to as configured (a missing secret, a bad URL), or log a secret.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import {
  formatIssues,
  issueAtPath,
  parseYamlFile,
  syntaxIssues,
  type YamlIssue,
  zodIssues,
} from "../config/yaml-issues.ts";
import { AgentdError } from "../errors.ts";
import { urlCredentialProblem } from "./url-credentials.ts";

const NAME_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const TYPE_RE = /^[a-z][a-z_]*(\.[a-z_]+)*(\.\*)?$/;
const ENV_RE = /^\$ENV\.([A-Za-z_][A-Za-z0-9_]*)$/;
const HEADER_RE = /^[A-Za-z0-9-]{1,64}$/;

const httpUrl = z
  .string()
  .refine(
    (u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol),
    "must be an http:// or https:// URL",
  );

const common = {
  name: z.string().regex(NAME_RE, "must be [a-z0-9-], 1 to 63 characters"),
  /** Event types (or families "tool.*"); empty = every type. */
  types: z
    .array(
      z.string().regex(TYPE_RE, 'must be an event type, e.g. "approval.requested" or "tool.*"'),
    )
    .max(64)
    .default([]),
  /** Tenants whose events go to this sink; empty = every tenant. */
  tenants: z.array(z.string().min(1).max(128)).max(1000).default([]),
  /** Where a sink without a stored cursor starts: "now" (the feed's head) or "oldest". */
  start: z.enum(["now", "oldest"]).default("now"),
  headers: z
    .record(z.string().regex(HEADER_RE, "must be a header name"), z.string().max(4096))
    .default({}),
  timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  /**
   * Deliveries tried per event before it is dead-lettered. With the default backoff, 20
   * attempts span 6.5 to 13 minutes (retry-schedule.ts): a 5-minute receiver outage loses
   * nothing.
   */
  maxAttempts: z.number().int().min(1).max(100).default(20),
  backoff: z
    .object({
      initialMs: z.number().int().min(10).max(600_000).default(500),
      maxMs: z.number().int().min(10).max(3_600_000).default(60_000),
    })
    .strict()
    .default({ initialMs: 500, maxMs: 60_000 }),
};

const WebhookSchema = z
  .object({
    ...common,
    type: z.literal("webhook"),
    url: httpUrl,
    secret: z
      .string()
      .regex(
        ENV_RE,
        "must be $ENV.NAME (the key comes from the environment; use secretFile for a file)",
      )
      .optional(),
    secretFile: z.string().min(1).optional(),
  })
  .strict();

const OtlpLogsSchema = z
  .object({
    ...common,
    type: z.literal("otlp-logs"),
    /** The collector's OTLP/HTTP logs endpoint, e.g. http://collector:4318/v1/logs. */
    endpoint: httpUrl,
  })
  .strict();

export const ExportConfigSchema = z
  .object({
    sinks: z.array(z.discriminatedUnion("type", [WebhookSchema, OtlpLogsSchema])).max(32),
    /** Lease of a sink: a process that died stops delivering; another takes over after it. */
    leaseTtlMs: z.number().int().min(1000).max(600_000).default(10_000),
  })
  .strict();

export interface ExportConfig {
  sinks: Sink[];
  leaseTtlMs: number;
}

export type SinkConfig = z.infer<typeof WebhookSchema> | z.infer<typeof OtlpLogsSchema>;
export type WebhookConfig = z.infer<typeof WebhookSchema> & { key: Buffer };
export type OtlpLogsConfig = z.infer<typeof OtlpLogsSchema>;
export type Sink = WebhookConfig | OtlpLogsConfig;

/** Parses and checks a config text; secrets are read from `env` and files. */
export function parseExportConfig(
  text: string,
  source: string,
  env: Record<string, string | undefined>,
): ({ ok: true } & ExportConfig) | { ok: false; errors: YamlIssue[] } {
  const file = parseYamlFile(text, source);
  const { doc } = file;
  const at = (path: readonly PropertyKey[], key: boolean, message: string): YamlIssue =>
    issueAtPath(file, path, key, message);
  if (doc.errors.length > 0) return { ok: false, errors: syntaxIssues(file) };
  const input = doc.toJS({ maxAliasCount: 100 }) ?? {};
  const parsed = ExportConfigSchema.safeParse(input);
  if (!parsed.success) {
    // A value given as `secret`, a header or a URL may carry a key pasted in: never echo it.
    const secret = (path: readonly PropertyKey[]) =>
      ["secret", "headers", "url", "endpoint"].some((f) => path.includes(f));
    const errors = zodIssues(parsed.error.issues, input, ExportConfigSchema, at, undefined, secret);
    return { ok: false, errors };
  }
  const errors: YamlIssue[] = [];
  const sinks: Sink[] = [];
  const names = new Set<string>();
  parsed.data.sinks.forEach((s, i) => {
    if (names.has(s.name))
      errors.push(at(["sinks", i, "name"], false, `another sink is named ${s.name}`));
    names.add(s.name);
    if (s.backoff.maxMs < s.backoff.initialMs)
      errors.push(at(["sinks", i, "backoff", "maxMs"], false, "must be at least initialMs"));
    const urlField = s.type === "webhook" ? "url" : "endpoint";
    const credentials = urlCredentialProblem(s.type === "webhook" ? s.url : s.endpoint);
    if (credentials !== undefined) errors.push(at(["sinks", i, urlField], false, credentials));
    const headers = resolveHeaders(s.headers, env, (name, message) =>
      errors.push(at(["sinks", i, "headers", name], false, message)),
    );
    if (s.type === "otlp-logs") {
      sinks.push({ ...s, headers });
      return;
    }
    const key = webhookKey(s, env, (field, message) =>
      errors.push(at(["sinks", i, field], false, message)),
    );
    if (key !== undefined) sinks.push({ ...s, headers, key });
  });
  return errors.length > 0
    ? { ok: false, errors }
    : { ok: true, sinks, leaseTtlMs: parsed.data.leaseTtlMs };
}

/** Header values, `$ENV.NAME` ones read from the environment (unset: an error). */
function resolveHeaders(
  headers: Record<string, string>,
  env: Record<string, string | undefined>,
  fail: (name: string, message: string) => void,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const m = ENV_RE.exec(value);
    if (m === null) {
      out[name] = value;
      continue;
    }
    const v = env[m[1] as string];
    if (v === undefined || v === "") fail(name, `the environment variable ${m[1]} is not set`);
    else out[name] = v;
  }
  return out;
}

/** The HMAC key of a webhook, from `$ENV.NAME` or `secretFile` (exactly one of them). */
function webhookKey(
  s: z.infer<typeof WebhookSchema>,
  env: Record<string, string | undefined>,
  fail: (field: string, message: string) => void,
): Buffer | undefined {
  if ((s.secret === undefined) === (s.secretFile === undefined)) {
    fail(
      s.secret === undefined ? "type" : "secretFile",
      "give the signing key as secret: $ENV.NAME or secretFile: PATH (one of them)",
    );
    return undefined;
  }
  let value: string | undefined;
  if (s.secret !== undefined) {
    const name = (ENV_RE.exec(s.secret) as RegExpExecArray)[1] as string;
    value = env[name];
    if (value === undefined || value === "")
      fail("secret", `the environment variable ${name} is not set`);
  } else {
    try {
      value = readFileSync(s.secretFile as string, "utf8").trim();
    } catch (err) {
      fail("secretFile", `cannot read it: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
    }
  }
  if (value === undefined || value === "") return undefined;
  if (Buffer.byteLength(value) < 16) {
    fail(s.secret !== undefined ? "secret" : "secretFile", "the key must be at least 16 bytes");
    return undefined;
  }
  return Buffer.from(value);
}

/** Loads the export config file or throws EVALIDATION listing every issue, one per line. */
export function loadExportConfig(
  path: string,
  env: Record<string, string | undefined>,
): ExportConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new AgentdError(
      "EVALIDATION",
      `cannot read the export config ${path}: ${(err as NodeJS.ErrnoException).code ?? "error"}`,
      { field: "export-config" },
    );
  }
  const r = parseExportConfig(text, path, env);
  if (r.ok) return { sinks: r.sinks, leaseTtlMs: r.leaseTtlMs };
  throw new AgentdError(
    "EVALIDATION",
    `invalid export config ${path}:\n${formatIssues(r.errors)}`,
    { field: r.errors[0]?.field },
  );
}
