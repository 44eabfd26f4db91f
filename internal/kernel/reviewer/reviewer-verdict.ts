/**
 * Parses the reviewer model's answer into a verdict (zod). Anything that is not exactly
 * one JSON object of the expected shape (a code fence around it is tolerated) is
 * `undefined`: the caller asks a person. Must never guess a verdict from prose.
 */
import { z } from "zod";

export const VerdictSchema = z
  .object({
    verdict: z.enum(["allow", "deny", "ask"]),
    reasoning: z.string().max(64 * 1024),
    confidence: z.number().min(0).max(1),
  })
  .strict();

export type ModelVerdict = z.output<typeof VerdictSchema>;

/** The verdict in `text`, or undefined when it is not one. */
export function parseVerdict(text: string): ModelVerdict | undefined {
  const body = text
    .trim()
    .replace(/^```(?:json)?\s*\n?/i, "")
    .replace(/\n?```$/, "")
    .trim();
  if (!body.startsWith("{") || !body.endsWith("}")) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  const parsed = VerdictSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
