/**
 * The `reason` of DeleteRun and PurgeTenant: required, 1-1024 characters, no control or
 * hidden characters (it is shown to people in the tenant feed and in agentctl). Errors name
 * the field. Must never accept a reason a terminal or a log line could be fooled by.
 */
import { invalid } from "../errors.ts";
import { hasHiddenChar } from "../text/hidden-chars.ts";

/** Longest reason, in characters (code points). */
export const MAX_REASON_CHARS = 1024;

export function deletionReason(field: string, value: string): string {
  if (value.trim() === "") throw invalid(field, "is required: say why (1-1024 characters)");
  const n = [...value].length;
  if (n > MAX_REASON_CHARS)
    throw invalid(field, `is ${n} characters; at most ${MAX_REASON_CHARS} allowed`);
  if (!value.isWellFormed()) throw invalid(field, "is not well-formed UTF-16 text");
  if (/[\t\n\r]/.test(value) || hasHiddenChar(value))
    throw invalid(field, "must be one line without control or hidden characters");
  return value;
}
