/**
 * The schema of policy.yaml (zod). Strict everywhere: an unknown key is an error, so a
 * typo never silently turns a rule off. Sizes accept bytes or "256KiB"/"1MiB"/"1GiB";
 * durations accept milliseconds or "500ms"/"30s"/"5m"/"1h". docs/policy.md is the reference.
 */

import picomatch from "picomatch";
import { z } from "zod";
import { PROGRAM_RE, REPO_RE, SUBCOMMAND_RE } from "./approved-command-words.ts";
import { imagePatternProblem } from "./image-policy.ts";
import { HostEntry, NetworkSchema } from "./network-schema.ts";
import { policyRegexProblem } from "./policy-regex.ts";
import { Duration, Size } from "./policy-units.ts";
import { REVIEWER_DEFAULTS, ReviewerSchema } from "./reviewer/reviewer-schema.ts";

export { Duration, Size } from "./policy-units.ts";

/**
 * A glob (picomatch syntax) that must compile. strictBrackets makes unbalanced [ { ( throw;
 * picomatch answers a pattern it cannot turn into a regex (e.g. "[z-a]", a trailing "\\")
 * with one that matches nothing, which would silently disable the rule, so that is refused too.
 */
export const Glob = z
  .string()
  .min(1)
  .superRefine((g, ctx) => {
    let why: string | undefined;
    try {
      if (picomatch.makeRe(g, { dot: true, strictBrackets: true }).source === "$^")
        why = "it can never match";
    } catch (err) {
      why = (err as Error).message;
    }
    if (why !== undefined)
      ctx.addIssue({ code: "custom", message: `is not a valid glob (${why})` });
  });

/** A regular expression (RE2 syntax, no flags: kernel/policy-regex.ts) that must compile. */
export const Regex = z
  .string()
  .min(1)
  .superRefine((r, ctx) => {
    const why = policyRegexProblem(r);
    if (why !== undefined) ctx.addIssue({ code: "custom", message: why });
  });

/** A sandbox.images pattern (kernel/image-policy.ts). */
const ImagePattern = z.string().superRefine((p, ctx) => {
  const why = imagePatternProblem(p);
  if (why !== undefined) ctx.addIssue({ code: "custom", message: why });
});

const ENV_ONLY = /^\$ENV\.[A-Z_][A-Z0-9_]{0,127}$/;

/**
 * Credentials for one registry. The password (or token) is only ever a `$ENV.NAME`, resolved
 * by the worker's secret providers when it pulls: a literal would sit in the policy file.
 * The name need not (and should not) be in secrets.allow: a run's commands cannot use it.
 */
const RegistryAuth = z
  .object({
    /** The registry host, with its port when it has one: "registry.example.com:5000". */
    registry: z
      .string()
      .regex(
        /^(?:[a-z0-9]|[a-z0-9][a-z0-9-]*[a-z0-9])(?:\.(?:[a-z0-9]|[a-z0-9][a-z0-9-]*[a-z0-9]))*(?::\d{1,5})?$/,
        'must be a lowercase registry host with an optional port ("registry.example.com:5000")',
      ),
    username: z.string().min(1).max(256),
    password: z
      .string()
      .regex(ENV_ONLY, "must be $ENV.NAME (a literal secret would sit in the policy)"),
  })
  .strict();

export const CAPABILITY_NAMES = [
  "repo.read",
  "repo.search",
  "repo.patch",
  "process.run",
  "test.run",
  "lint.run",
  "setup.run",
] as const;
export type CapabilityName = (typeof CAPABILITY_NAMES)[number];

const Capability = z
  .object({
    /**
     * never: no approval; always: every call waits for a person; risk: the risk profile
     * decides; reviewer: every call goes to the model reviewer first (the `reviewer` section).
     */
    approval: z.enum(["never", "always", "risk", "reviewer"]),
    /** Timeout of one call. */
    timeout: Duration.optional(),
  })
  .strict();

const Counter = z
  .object({
    gte: z.number().int().nonnegative().optional(),
    lte: z.number().int().nonnegative().optional(),
  })
  .strict()
  .refine((c) => c.gte !== undefined || c.lte !== undefined, { message: "give gte and/or lte" });

const TrustRule = z
  .object({
    /** Named in every decision it changes. */
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "must be [a-z0-9._-], at most 64 characters"),
    /** The capability the rule applies to. */
    tool: z.enum(CAPABILITY_NAMES),
    /** Counters of the repository (all must hold). */
    when: z
      .object({
        successfulCalls: Counter.optional(),
        failedCalls: Counter.optional(),
        revertedPatches: Counter.optional(),
        manualOverrides: Counter.optional(),
      })
      .strict(),
    /** relax: an approval the risk profile asks for is skipped (preview+auto); tighten: every call needs approval. */
    // biome-ignore lint/suspicious/noThenProperty: the policy's own field name ("when … then …")
    then: z.enum(["relax", "tighten"]),
  })
  .strict();

/**
 * A command family a person approved and an admin applied (ApplyPolicyChange): calls of
 * process.run in `repo` whose line starts with `command` run without asking where only a
 * high-risk command, build/config files or impact asked (approved-commands.ts).
 */
const ApprovedCommand = z
  .object({
    /** The family: a program and its subcommand ("npm test"), at most three words. */
    command: z.string().refine(
      (c) => {
        const [program, ...rest] = c.split(" ");
        return (
          PROGRAM_RE.test(program ?? "") &&
          rest.length <= 2 &&
          rest.every((w) => SUBCOMMAND_RE.test(w))
        );
      },
      { message: 'must be a program and its subcommand words, e.g. "npm test"' },
    ),
    /** The repository (the run's `repo` label; "default" for runs without one). */
    repo: z.string().regex(REPO_RE, "must be a repo label value (or default)"),
    /** The policy change it came from (ListPolicyChanges). */
    change: z
      .string()
      .regex(/^pc_[a-f0-9]{20}$/, "must be a policy change id (pc_…)")
      .optional(),
  })
  .strict();

export const PolicySchema = z
  .object({
    version: z.literal(1),
    workspace: z
      .object({
        /** Host directory `agentd dev` copies into a run that was created without an archive. */
        root: z.string().min(1).default("."),
        /** Paths (globs relative to the workspace) no tool may touch; calls naming them are denied. */
        denyPatterns: z.array(Glob).default(["**/.git", "**/.git/**"]),
      })
      .strict()
      .default({ root: ".", denyPatterns: ["**/.git", "**/.git/**"] }),
    capabilities: z
      .object(
        Object.fromEntries(CAPABILITY_NAMES.map((n) => [n, Capability.optional()])) as Record<
          CapabilityName,
          z.ZodOptional<typeof Capability>
        >,
      )
      .strict()
      .default({}),
    risk: z
      .object({
        /** Command names (or "git push"-style prefixes) that make a command need approval. */
        highRiskCommands: z.array(z.string().min(1)).default([]),
        /** Command names that are refused outright. */
        denyCommands: z.array(z.string().min(1)).default([]),
        /** Regular expressions over the whole command line that are refused outright. */
        denyCommandPatterns: z.array(Regex).default([]),
        /** Paths that hold secrets (touchesSecrets). */
        secretPaths: z.array(Glob).default([]),
        /** Configuration files (touchesConfig). */
        configPaths: z.array(Glob).default([]),
        /** Build files (touchesBuild). */
        buildPaths: z.array(Glob).default([]),
        /** Changed lines from which a patch is medium / high impact. */
        impact: z
          .object({
            mediumLines: z.number().int().positive().default(50),
            highLines: z.number().int().positive().default(300),
          })
          .strict()
          .refine((i) => i.mediumLines < i.highLines, {
            message: "mediumLines must be below highLines",
            path: ["highLines"],
          })
          .default({ mediumLines: 50, highLines: 300 }),
        /** Which facts make a risk-governed call wait for approval. */
        approvalWhen: z
          .object({
            highRiskCommand: z.boolean().default(true),
            dynamicShell: z.boolean().default(true),
            /** A command runs a file (script, Makefile, package.json) the run itself wrote or changed. */
            runWrittenScript: z.boolean().default(true),
            touchesSecrets: z.boolean().default(true),
            touchesConfig: z.boolean().default(true),
            touchesBuild: z.boolean().default(true),
            impactAtLeast: z.enum(["low", "medium", "high", "never"]).default("high"),
          })
          .strict()
          .default({
            highRiskCommand: true,
            dynamicShell: true,
            runWrittenScript: true,
            touchesSecrets: true,
            touchesConfig: true,
            touchesBuild: true,
            impactAtLeast: "high",
          }),
      })
      .strict()
      .default({
        highRiskCommands: [],
        denyCommands: [],
        denyCommandPatterns: [],
        secretPaths: [],
        configPaths: [],
        buildPaths: [],
        impact: { mediumLines: 50, highLines: 300 },
        approvalWhen: {
          highRiskCommand: true,
          dynamicShell: true,
          runWrittenScript: true,
          touchesSecrets: true,
          touchesConfig: true,
          touchesBuild: true,
          impactAtLeast: "high",
        },
      }),
    limits: z
      .object({
        /** Most stdout+stderr bytes kept from a process. */
        maxStdout: Size.default(1024 * 1024),
        /** Largest diff repo.patch accepts. */
        maxDiffSize: Size.default(1024 * 1024),
        /** Most bytes repo.read returns. */
        maxFileRead: Size.default(256 * 1024),
        /** Largest final patch of a run; a run whose changes are larger fails with ETOOLARGE. */
        maxPatchSize: Size.default(64 * 1024 ** 2),
      })
      .strict()
      .default({
        maxStdout: 1024 * 1024,
        maxDiffSize: 1024 * 1024,
        maxFileRead: 256 * 1024,
        maxPatchSize: 64 * 1024 ** 2,
      }),
    redaction: z
      .object({
        /** Names whose values are redacted (KEY=value, "key": "value"), case-insensitive substrings. */
        keys: z.array(z.string().min(1)).default([]),
        /** Regular expressions whose matches are redacted. */
        patterns: z.array(Regex).default([]),
      })
      .strict()
      .default({ keys: [], patterns: [] }),
    secrets: z
      .object({
        /** Secret names a `$ENV.NAME` placeholder may resolve. Nothing else is resolvable. */
        allow: z
          .array(z.string().regex(/^[A-Z_][A-Z0-9_]{0,127}$/, "must be an environment-style name"))
          .default([]),
        /** Where values come from, in order: env (the worker's environment) and/or file (DIR/NAME). */
        providers: z
          .array(
            // Discriminated on `type`, so an error names the field at fault, not "invalid input".
            z.discriminatedUnion("type", [
              z.object({ type: z.literal("env") }).strict(),
              z.object({ type: z.literal("file"), dir: z.string().min(1) }).strict(),
            ]),
          )
          .default([{ type: "env" }]),
      })
      .strict()
      .default({ allow: [], providers: [{ type: "env" }] }),
    /** Egress through the proxy (issue #16; validated, not yet enforced). */
    network: NetworkSchema,
    sandbox: z
      .object({
        /**
         * The image of every run's container. Unset: chosen per run (the workspace's
         * `.agent/config.yaml` image, else detection, else DEFAULT_SANDBOX_IMAGE; see
         * worker/run-image.ts). The warm pool keeps containers of policyImage(p).
         */
        image: z.string().min(1).max(512).optional(),
        cpu: z.number().positive().max(64).default(1),
        memory: Size.default(1024 ** 3),
        pids: z.number().int().min(16).max(32768).default(256),
        tmp: Size.default(256 * 1024 ** 2),
        /**
         * Size of /workspace, enforced in the container (ENOSPC past it). At least 1 MiB: a
         * tmpfs of size 0 would have no limit at all.
         */
        workspaceSize: Size.refine((n) => n >= 1024 ** 2 && n <= 256 * 1024 ** 3, {
          message: 'must be between 1MiB and 256GiB (e.g. "1GiB")',
        }).default(1024 ** 3),
        /**
         * Size of the dependency cache tmpfs /cache (sandbox/cache-env.ts), saved after a
         * setup and restored for later runs; 0: no /cache and no dependency caching.
         */
        cacheSize: Size.refine((n) => n === 0 || (n >= 1024 ** 2 && n <= 256 * 1024 ** 3), {
          message: 'must be 0 (no cache) or between 1MiB and 256GiB (e.g. "1GiB")',
        }).default(1024 ** 3),
        /** allowlist: the run's own network, out only through the egress proxy (`network`). */
        network: z.enum(["none", "allowlist"]).default("none"),
        /** Deprecated: entries are added to network.allow (same syntax, same checks). */
        allowlist: z.array(HostEntry).max(256).default([]),
        /**
         * Images a run may name itself (CreateRun `image`, `.agent/config.yaml` `image:`):
         * globs over normalised references (kernel/image-policy.ts). Empty: none.
         */
        images: z.array(ImagePattern).max(256).default([]),
        /** Only references pinned by digest (name@sha256:…) are taken (the strict profile). */
        imageDigests: z.boolean().default(false),
        /** Credentials for pulling from private registries; passwords as $ENV.NAME. */
        registryAuth: z.array(RegistryAuth).max(32).default([]),
        /**
         * A run whose container was lost after writes the log records that agentd cannot
         * reproduce (commands since the last snapshot; repo.patch calls are re-applied):
         * `fail` ends it (ESANDBOX_LOST, naming those calls), `continue` tells the model
         * which calls' effects are gone and goes on. Either way `sandbox.lost` records
         * them (worker/workspace-recovery.ts). Default fail: a completed run's patch is
         * what people and CI act on, and must not silently lack an effect the run relied on.
         */
        onLost: z.enum(["fail", "continue"]).default("fail"),
      })
      .strict()
      .refine((s) => s.network === "allowlist" || s.allowlist.length === 0, {
        message: "allowlist needs network: allowlist",
        path: ["allowlist"],
      })
      .default({
        cpu: 1,
        memory: 1024 ** 3,
        pids: 256,
        tmp: 256 * 1024 ** 2,
        workspaceSize: 1024 ** 3,
        cacheSize: 1024 ** 3,
        network: "none",
        allowlist: [],
        images: [],
        imageDigests: false,
        registryAuth: [],
        onLost: "fail",
      }),
    tools: z
      .object({
        /** test.run's command line; "{name}" is replaced by the quoted test name. */
        test: z.string().min(1).optional(),
        /** lint.run's command line. */
        lint: z.string().min(1).optional(),
        /**
         * The setup step's command line (setup.run, before the model's first step); wins
         * over `.agent/config.yaml` commands.setup and the lockfile detection.
         */
        setup: z
          .string()
          .min(1)
          .max(64 * 1024)
          .optional(),
      })
      .strict()
      .default({}),
    approvals: z
      .object({
        /** A pending approval older than this is denied automatically; unset: never. */
        expireAfter: Duration.optional(),
      })
      .strict()
      .default({}),
    trust: z
      .object({ rules: z.array(TrustRule).default([]) })
      .strict()
      .default({ rules: [] }),
    /** Command families approved into the policy (docs/policy.md "Rules from approvals"). */
    approvedCommands: z.array(ApprovedCommand).max(1024).default([]),
    /** The model reviewer (`approval: reviewer`); docs/policy.md, "Model reviewer". */
    reviewer: ReviewerSchema.default(REVIEWER_DEFAULTS),
  })
  .strict()
  // A capability that says reviewer needs a model to ask and a rubric to ask it with.
  .superRefine((p, ctx) => {
    for (const [tool, cap] of Object.entries(p.capabilities)) {
      if (cap?.approval !== "reviewer") continue;
      for (const field of ["model", "rubric"] as const) {
        if (p.reviewer[field] === undefined)
          ctx.addIssue({
            code: "custom",
            message: `is required: capabilities.${tool}.approval is reviewer`,
            path: ["reviewer", field],
          });
      }
    }
  })
  // Presets widen the egress allowlist; without sandbox.network: allowlist the sandbox has
  // no network at all, and a preset there is a policy that says one thing and does another.
  .refine((p) => p.network.presets.length === 0 || p.sandbox.network === "allowlist", {
    message:
      "network.presets needs sandbox.network: allowlist (with network: none there is no network to reach a registry over)",
    path: ["network", "presets"],
  });

export type Policy = z.output<typeof PolicySchema>;

/** The base sandbox image: what a run gets when neither the policy nor detection picks one. */
export const DEFAULT_SANDBOX_IMAGE = "agentd-sandbox-base:latest";

/** The policy's sandbox image, the base image when it names none (the warm pool's image). */
export function policyImage(p: Policy): string {
  return p.sandbox.image ?? DEFAULT_SANDBOX_IMAGE;
}
export type TrustRuleConfig = z.output<typeof TrustRule>;
export type ApprovalMode = "never" | "always" | "risk" | "reviewer";
