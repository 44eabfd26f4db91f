/**
 * The policy's regular expressions (`risk.denyCommandPatterns`, `redaction.patterns`),
 * matched by re2js: RE2's automata, in time linear in the text whatever the pattern, so a
 * pattern with nested or ambiguous quantifiers (`(a+)+$`, `(a|a)*b`) cannot stall a decision
 * or a redaction — a shadow candidate's or a tenant's included. The syntax is RE2's (as Go's
 * regexp): no lookaround, no backreferences; such a pattern is refused at load, saying why.
 * Indices are UTF-16 code units, as JavaScript's.
 *
 * Must never: hand a policy pattern to V8's backtracking engine.
 */
import { RE2JS } from "re2js";

export interface PolicyRegex {
  readonly source: string;
  /** Whether the pattern matches anywhere in `text`. */
  test(text: string): boolean;
  /** Every non-overlapping match, left to right, as [start, end) (empty ones included). */
  matches(text: string): Iterable<{ start: number; end: number }>;
}

/** Why `source` is not a policy regular expression, or undefined when it is one. */
export function policyRegexProblem(source: string): string | undefined {
  try {
    RE2JS.compile(source);
    return undefined;
  } catch (err) {
    return `is not a valid regular expression in RE2 syntax, which policies use (no lookaround, no backreferences): ${(err as Error).message}`;
  }
}

/** Compiles `source`; throws (the reason in the message) when policyRegexProblem would. */
export function compilePolicyRegex(source: string): PolicyRegex {
  const re = RE2JS.compile(source);
  return {
    source,
    test: (text) => re.matcher(text).find(),
    *matches(text) {
      const m = re.matcher(text);
      while (m.find()) yield { start: m.start(), end: m.end() };
    },
  };
}
