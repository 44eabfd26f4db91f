/**
 * The shape of a capability tool: a zod input schema (validated before anything runs),
 * its JSON schema for the model, a category for the kernel, and an execute function that
 * acts only through the run's sandbox. Tools never decide policy; the kernel does.
 */
import { z } from "zod";
import type { OutputStreamName, SandboxHandle } from "../sandbox/port.ts";
import type { RunCommands } from "./command-spec.ts";

export type ToolCategory = "read" | "write" | "exec";

/** Limits every tool respects; defaults in DEFAULT_TOOL_LIMITS (policy.yaml overrides them). */
export interface ToolLimits {
  /** Most bytes repo.read returns. */
  maxFileReadBytes: number;
  /** Most stdout+stderr bytes kept from a process. */
  maxOutputBytes: number;
  /** Most matches repo.search returns. */
  maxSearchMatches: number;
  /** Largest diff repo.patch accepts, bytes. */
  maxDiffBytes: number;
  /** Timeout of process.run when the call gives none, ms. */
  defaultTimeoutMs: number;
  /** Longest timeout a call may ask for, ms. */
  maxTimeoutMs: number;
}

export const DEFAULT_TOOL_LIMITS: ToolLimits = {
  maxFileReadBytes: 256 * 1024,
  maxOutputBytes: 1024 * 1024,
  maxSearchMatches: 200,
  maxDiffBytes: 1024 * 1024,
  defaultTimeoutMs: 120_000,
  maxTimeoutMs: 30 * 60_000,
};

/** Default deny patterns: paths no tool may touch (globs relative to the workspace). */
export const DEFAULT_DENY_PATTERNS = ["**/.git", "**/.git/**"];

export interface ToolContext {
  sandbox: SandboxHandle;
  limits: ToolLimits;
  /** Globs (relative to the workspace) that no path argument may match. */
  denyPatterns: readonly string[];
  /** test.run's, lint.run's and setup.run's commands for this run (policy, else the workspace). */
  commands: RunCommands;
  /** Live output of long calls. */
  onOutput?: (stream: OutputStreamName, chunk: string) => void;
  /** Aborts the call (the process group is killed). */
  signal?: AbortSignal;
  /**
   * What the call's approval preview already computed in the sandbox (repo.patch: the
   * planned write and the file state it was planned from), for the tool to reuse.
   */
  prepared?: unknown;
  /**
   * repo.patch after an approval: the sha256 of the file the approved preview was computed
   * from ("absent" for a new file); the patch is written onto that file state only.
   */
  approvedBase?: string;
}

export interface Tool<S extends z.ZodType = z.ZodType, O = unknown> {
  /** Name the model calls, e.g. "repo.read". */
  readonly name: string;
  readonly category: ToolCategory;
  /** What the tool does, for the model. */
  readonly description: string;
  readonly input: S;
  execute(ctx: ToolContext, input: z.output<S>): Promise<O>;
}

/** The JSON schema of a tool's input, as declared to the model. */
export function toolJsonSchema(tool: Tool): Record<string, unknown> {
  return z.toJSONSchema(tool.input, { target: "draft-7", io: "input" }) as Record<string, unknown>;
}

/** A helper to define a tool with its types inferred. */
export function defineTool<S extends z.ZodType, O>(tool: Tool<S, O>): Tool<S, O> {
  return tool;
}
