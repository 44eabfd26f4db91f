/**
 * The policy's `reviewer` section (zod): which model reviews calls under
 * `approval: reviewer`, with what rubric, how long it may take, how sure it must be, and
 * which facts of a call always need a person whatever the model says (`personFor`). It
 * must never accept a value that would let a reviewer decide with no bound: the timeout
 * and the rubric have ceilings, and an unknown key is an error naming the field.
 */
import { z } from "zod";
import { Duration } from "../policy-units.ts";

/** Facts of a call that can require a person (reviewer.personFor); see person-facts.ts. */
export const PERSON_FACTS = [
  "highRiskCommand",
  "dynamicShell",
  "runWrittenScript",
  "touchesSecrets",
  "touchesConfig",
  "touchesBuild",
  "highImpact",
  "mentionsDeniedPath",
  "deletesFile",
] as const;
export type PersonFact = (typeof PERSON_FACTS)[number];

/** What a reviewer may never allow without a person when the policy does not say. */
export const DEFAULT_PERSON_FOR: PersonFact[] = [
  // Destructive and outbound commands (rm, find -delete, git reset --hard, curl …).
  "highRiskCommand",
  // Inline interpreter code and computed command lines: the preview cannot show what runs.
  "dynamicShell",
  "runWrittenScript",
  "touchesSecrets",
  // A repo.patch that deletes a file.
  "deletesFile",
];

/** Longest rubric (the policy's instructions to the reviewer). */
export const MAX_RUBRIC = 16 * 1024;
/** Longest reviewer timeout: a run waits on it while holding its lease. */
export const MAX_REVIEWER_TIMEOUT = 5 * 60_000;

export const ReviewerSchema = z
  .object({
    /** The reviewer model's id (e.g. "gpt-4.1-mini"); required once a capability says reviewer. */
    model: z
      .string()
      .min(1)
      .max(256)
      .regex(/^[\x21-\x7e]+$/, "must be a model id (printable ASCII, no spaces)")
      .optional(),
    /** What the reviewer is told to judge by (the platform team's rules, in words). */
    rubric: z.string().min(1).max(MAX_RUBRIC).optional(),
    /** How long the model may take; past it a person is asked. Default 30s, at most 5m. */
    timeout: Duration.refine((ms) => ms > 0 && ms <= MAX_REVIEWER_TIMEOUT, {
      message: 'must be above 0 and at most 5m (e.g. "30s")',
    }).default(30_000),
    /** Below this confidence (0..1) an allow or deny becomes a question for a person. */
    minConfidence: z.number().min(0).max(1).default(0.8),
    /**
     * Facts that make a call need a person whatever the reviewer says: its allow becomes
     * ask (both recorded). The strict profile lists all of them.
     */
    personFor: z.array(z.enum(PERSON_FACTS)).max(PERSON_FACTS.length).default(DEFAULT_PERSON_FOR),
  })
  .strict();

export type ReviewerConfig = z.output<typeof ReviewerSchema>;

export const REVIEWER_DEFAULTS: ReviewerConfig = {
  timeout: 30_000,
  minConfidence: 0.8,
  personFor: DEFAULT_PERSON_FOR,
};
