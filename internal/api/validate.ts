/** Input checks shared by the RPC handlers; each error names the field and what it expected. */
import { AgentdError, invalid } from "../errors.ts";

export const ULID_RE = /^[0-9A-HJKMNP-TV-Z]{26}$/;
export const SESSION_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/** A run id: a ULID. */
export function runIdField(field: string, value: string): string {
  if (value === "") throw invalid(field, "is required");
  if (!ULID_RE.test(value)) throw invalid(field, "must be a run id (26-character ULID)");
  return value;
}

/** An optional UTF-8 text field of at most `maxBytes`. */
export function textField(
  field: string,
  value: string,
  maxBytes: number,
  required = false,
): string {
  if (required && value.trim() === "") throw invalid(field, "is required");
  const n = Buffer.byteLength(value, "utf8");
  if (n > maxBytes) throw invalid(field, `is ${n} bytes; at most ${maxBytes} allowed`);
  return value;
}

/** page_size: 0 means `def`, above `max` is refused. */
export function pageSizeField(field: string, value: number, def: number, max: number): number {
  if (value === 0) return def;
  if (value > max) throw invalid(field, `must be at most ${max}`);
  return value;
}

/** Opaque page tokens: base64url JSON bound to the query that made them. */
export function encodePageToken(data: Record<string, string>): string {
  return Buffer.from(JSON.stringify(data), "utf8").toString("base64url");
}

export function decodePageToken(
  field: string,
  token: string,
  binding: Record<string, string>,
): Record<string, string> {
  let data: unknown;
  try {
    data = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw invalid(field, "is not a page token this server issued");
  }
  if (typeof data !== "object" || data === null)
    throw invalid(field, "is not a page token this server issued");
  const rec = data as Record<string, string>;
  for (const [k, v] of Object.entries(binding)) {
    if (rec[k] !== v) throw invalid(field, "belongs to a different query (filters changed)");
  }
  return rec;
}

/** The run, or NOT_FOUND: a run of another tenant is indistinguishable from no run. */
export function notFoundRun(runId: string): AgentdError {
  return new AgentdError("ENOTFOUND", `run ${runId} not found`);
}
