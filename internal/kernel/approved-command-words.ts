/**
 * The words of an `approvedCommands` rule (approved-commands.ts), shared with the policy's
 * schema. Must never admit a path, an option, a glob or a shell metacharacter.
 */

/** A program name: a word on PATH, never a path or an option. */
export const PROGRAM_RE = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/;
/** A subcommand (or script name) word. */
export const SUBCOMMAND_RE = /^[A-Za-z0-9][A-Za-z0-9:._-]{0,63}$/;
/** A repository: the run's `repo` label (a Kubernetes label value), or "default". */
export const REPO_RE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
