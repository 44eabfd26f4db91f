/**
 * An error that escapes a drive is logged by the worker: before it leaves, every secret
 * value of the run is hidden from its message and stack, and from its causes'. Never
 * replaces the error (its class and code stay what callers test for) and never throws.
 */
import type { RunSecrets } from "../kernel/run-secrets.ts";

const MAX_CAUSES = 8;

/** `err` itself, with the run's secret values hidden from its text fields. */
export function redactError(err: unknown, secrets: RunSecrets): unknown {
  if (!secrets.any()) return err;
  let e = err;
  for (let i = 0; i < MAX_CAUSES && e !== null && typeof e === "object"; i++) {
    const fields = e as Record<string, unknown>;
    // The stack repeats the message (and is what a logger prints): both are rewritten.
    for (const key of ["message", "stack"]) {
      const value = fields[key];
      if (typeof value !== "string") continue;
      try {
        fields[key] = secrets.redactor.text(value);
      } catch {
        // a frozen error: leave it (its fields are not ours to change)
      }
    }
    e = fields.cause;
  }
  return err;
}
