/** agentctl's command table: usage, flags and help text of every command. */
import type { ParseArgsOptionsConfig } from "node:util";
import { DEFAULT_ADDR } from "../../internal/cli/client.ts";

/** Largest compressed workspace by default: the server's default unpacked limit (256 MiB). */
export const DEFAULT_MAX_WORKSPACE = 256 * 1024 * 1024;

export interface FlagSpec {
  type: "string" | "boolean";
  multiple?: boolean;
  short?: string;
  /** Placeholder of the value, e.g. "TEXT". */
  arg?: string;
  help: string;
}

export interface CommandSpec {
  name: string;
  /** Positional arguments, e.g. ["RUN"]. */
  args: string[];
  summary: string;
  /** Paragraphs after the flags. */
  details: string;
  flags: Record<string, FlagSpec>;
}

export const GLOBAL_FLAGS: Record<string, FlagSpec> = {
  addr: {
    type: "string",
    arg: "URL",
    help: `server address, HOST:PORT or http(s)://HOST:PORT (env AGENTD_ADDR; default ${DEFAULT_ADDR})`,
  },
  token: {
    type: "string",
    arg: "TOKEN",
    help: "bearer token (env AGENTD_TOKEN, preferred: flags show in ps; agentd dev without an auth file needs none)",
  },
  context: {
    type: "string",
    arg: "NAME",
    help: "the context (server and token file) of the config file to use (env AGENTD_CONTEXT; default its current-context; see agentctl config)",
  },
  "ca-file": {
    type: "string",
    arg: "FILE",
    help: "PEM of the CA that signed an https:// server's certificate, for a private CA (env AGENTD_CA_FILE; a context's ca-file; or add it to Node's roots with NODE_EXTRA_CA_CERTS=FILE). TRACEPARENT/TRACESTATE in the environment are sent along: the run joins that trace",
  },
  help: { type: "boolean", short: "h", help: "show this help" },
};

/** verify and replay: read a run's archive directory instead of a server. */
const ARCHIVE_FLAG: FlagSpec = {
  type: "string",
  arg: "PATH",
  help: "a run's archive directory (DIR/<tenant>/<run>): work offline from it, verified first",
};

/** -o/--output, on every command that prints a resource (internal/cli/output/). */
const OUTPUT_FLAG: FlagSpec = {
  type: "string",
  short: "o",
  arg: "FORMAT",
  help: "print the result for scripts: json, yaml, name or jsonpath=TEMPLATE (default: text for people)",
};

/** What -o does, at the end of each such command's help. */
function withOutput(details: string, what: string): string {
  return `${details === "" ? "" : `${details}\n\n`}-o/--output FORMAT prints ${what} for scripts instead of the text above:
  json               protobuf JSON (enums by name, 64-bit numbers as strings, fields at
                     their default left out); a list is {"items": [...]}
  yaml               the same document as YAML
  name               KIND/ID, one per line (run/01J…, approval/apr_…)
  jsonpath=TEMPLATE  kubectl's template syntax: -o jsonpath='{.state}',
                     -o jsonpath='{range .items[*]}{.runId}{"\\n"}{end}' (no newline is added)
A template that selects nothing prints nothing (exit 0); an unknown format or a malformed
template is a usage error (exit 64) naming the problem. Control, bidi and zero-width
characters in values are escaped (\\x1b, \\u202e), never sent to the terminal.`;
}

export const EXIT_CODES = `Exit codes:
  (run, run --follow, events --follow, wait and replay mirror the run's outcome)
  0    success; for a run: it completed
  1    the run failed (verify: the hash chain is broken)
  2    the run was cancelled
  3    the run waits for a person: an approval (run --follow --no-wait, wait --for
       approval), or it has not ended (replay)
  4    the request failed: server unreachable, token refused, not found… (the message says what to do)
  64   usage error (unknown command or flag: the message suggests the nearest)
  130  interrupted (Ctrl-C); the run itself goes on`;

const RUN_DETAILS = `Packs DIR (default: the current directory) into a workspace archive, uploads it
with the run and starts the run.

What is packed: in a git work tree, the files git sees (git ls-files --cached --others
--exclude-standard: tracked files, plus untracked ones that no .gitignore, .git/info/exclude
or global excludes file ignores); outside git, every file no .gitignore in the tree excludes.
Never packed: .git/, sockets, fifos and devices; symlinks are packed as links, never
followed, and links leading outside DIR are left out (listed on stderr). The compressed
archive may be at most --max-workspace-bytes (default 256 MiB, the server's default limit);
the error names the largest entries to add to .gitignore. Up to 4 MiB it travels inside
CreateRun; above, it is streamed first with UploadWorkspace (content-addressed: the same
tree is stored once) and the run names it by digest.

How long run waits:
  (default)           until the run ends: a status line on a terminal, then the outcome
                      (approvals, artifacts and the result are always shown)
  --follow            the same, rendering everything live: model output, tool calls and
                      their output, policy decisions, approval previews; a spinner and
                      status line on a terminal, plain lines otherwise
  --no-wait           not at all: prints the run id on stdout and exits 0 once created
  --follow --no-wait  follows until the run ends or pauses for an approval; at the pause
                      it prints the approval id and exits 3 (for CI: nobody is there to
                      answer)
  --json              events as NDJSON on stdout (canonical protobuf-JSON, one per line,
                      exactly the stored bytes) instead of the rendering; with --no-wait
                      alone: the created run as JSON

Approvals (unless --no-wait): the preview is shown (summary, files and diff, or argv and
cwd). On a terminal agentctl asks "approve? [y/N/reason]": y approves; Enter or n denies;
any other text denies with that text as the reason (the model reads it). Off a terminal
(or with --json) it prints the approval id and the agentctl approve/deny commands on
stderr and keeps following until someone decides.

stdout carries the rendering (or NDJSON, or the run id); progress notes go to stderr.
Ctrl-C stops waiting, not the run: agentctl events RUN --follow picks it up again,
agentctl cancel RUN stops it.

Exit: 0 completed, 1 failed, 2 cancelled, 3 waiting for approval (--follow --no-wait),
4 request failed, 64 usage error, 130 interrupted.`;

const CONFIG_DETAILS = `Contexts live in $AGENTCTL_CONFIG, else $XDG_CONFIG_HOME/agentd/config.yaml, else
~/.config/agentd/config.yaml (written with mode 600; refused when others may write it):

  current-context: prod
  contexts:
    prod: {addr: "https://agentd.internal:7070", token-file: "~/.config/agentd/prod.token",
           ca-file: "~/.config/agentd/prod-ca.pem"}

A token file must be readable by you only (chmod 600). What picks the server: --addr, else
AGENTD_ADDR, else the context (--context NAME, else AGENTD_CONTEXT, else current-context),
else the default; the token likewise: --token, else AGENTD_TOKEN, else the context's file;
the CA of a private https:// server: --ca-file, else AGENTD_CA_FILE, else the context's
ca-file (set with config set-context NAME --ca-file FILE), else Node's roots (to which
NODE_EXTRA_CA_CERTS=FILE adds a CA).`;

export const COMMANDS: CommandSpec[] = [
  {
    name: "run",
    args: [],
    summary: "pack a directory, start a run on it and wait for it (or follow it live)",
    details: withOutput(
      RUN_DETAILS,
      "the run: with --no-wait the created run, otherwise the run as it ended (the rendering then goes to stderr; the exit code is the outcome as always). --json (events as NDJSON) is another thing and cannot be combined with -o",
    ),
    flags: {
      prompt: { type: "string", arg: "TEXT", help: "the task for the agent (required)" },
      repo: { type: "string", arg: "DIR", help: "directory to pack (default: .)" },
      skill: {
        type: "string",
        multiple: true,
        arg: "NAME",
        help: "skill to load (repeatable)",
      },
      priority: { type: "string", arg: "N", help: "1 (highest) … 10 (lowest); default 5" },
      image: {
        type: "string",
        arg: "REF",
        help: "the sandbox image to run in (registry/name:tag or name@sha256:…); the server's policy must allow it (sandbox.images)",
      },
      session: {
        type: "string",
        arg: "ID",
        help: "session to run in (runs of a session run one at a time); default a new one",
      },
      label: {
        type: "string",
        multiple: true,
        arg: "KEY=VALUE",
        help: "label the run (repeatable; Kubernetes label syntax); repo defaults to the git remote (host/path, without credentials) or the directory name: trust rules count per repo",
      },
      "max-tokens": {
        type: "string",
        arg: "N",
        help: "the run's token budget (input + output); default: the worker's limit",
      },
      "max-cost-usd": {
        type: "string",
        arg: "USD",
        help: "the run's cost budget in US dollars, e.g. 2.50; default: none",
      },
      "max-duration": {
        type: "string",
        arg: "DURATION",
        help: "the run's wall-clock budget: 90s, 30m, 2h (time waiting for a person does not count)",
      },
      "idempotency-key": {
        type: "string",
        arg: "KEY",
        help: "make retries safe: the same key and request return the run already created (kept 24 h; stderr then says 'reused run'; default: none)",
      },
      follow: { type: "boolean", help: "render the run live" },
      "no-wait": {
        type: "boolean",
        help: "do not wait: exit once created (with --follow: exit 3 at an approval)",
      },
      json: { type: "boolean", help: "print events as NDJSON (canonical protobuf-JSON)" },
      output: OUTPUT_FLAG,
      "max-workspace-bytes": {
        type: "string",
        arg: "N",
        help: `largest compressed workspace to upload (default ${DEFAULT_MAX_WORKSPACE})`,
      },
    },
  },
  {
    name: "runs",
    args: [],
    summary: "list your runs, newest first",
    details: withOutput(
      `Lists the runs of your token's tenant, newest first. --limit caps how many are shown
(agentctl pages through the server for you); when more remain, the command to see the
next ones is printed on stderr (--page-token).`,
      'the runs ({"items": [...], "nextPageToken": "…"} when more remain; --json, the older form, prints one run per line)',
    ),
    flags: {
      state: {
        type: "string",
        arg: "STATE",
        help: "only runs in this state: queued, running, paused, completed, failed, cancelled",
      },
      session: { type: "string", arg: "ID", help: "only runs of this session" },
      selector: {
        type: "string",
        short: "l",
        arg: "SELECTOR",
        help: "only runs whose labels match, as kubectl -l: k=v, k!=v, k, !k, k in (a,b), comma-joined",
      },
      limit: { type: "string", arg: "N", help: "show at most N runs (default 50)" },
      "page-token": {
        type: "string",
        arg: "TOKEN",
        help: "continue a listing where a previous one stopped",
      },
      json: { type: "boolean", help: "one run per line as protobuf-JSON (NDJSON; see -o)" },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "get",
    args: ["RUN"],
    summary: "show one run (with its place in the queue while queued)",
    details: withOutput(
      `Shows the run's state, prompt, session, times, counters, usage and cost, its result
(summary or error), the approval it waits for, and while queued its position in the queue
and in its session's line (1 = next).

In CI: agentctl get "$RUN" -o jsonpath='{.state}'   (RUN_STATE_COMPLETED, …)`,
      "the run (--json is the same as -o json)",
    ),
    flags: {
      json: { type: "boolean", help: "the run as protobuf-JSON (the same as -o json)" },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "events",
    args: ["RUN"],
    summary: "print a run's events, one line each (or NDJSON)",
    details: withOutput(
      `Prints the run's stored events, one line each: seq, time, type and the gist of the
payload. --follow keeps printing new events until the run ends (and says how to approve
when it pauses); reconnects from the last seq after a dropped connection.

Exit: without --follow 0 once printed; with --follow the run's outcome: 0 completed,
1 failed, 2 cancelled.`,
      "the events (a list; with --follow each event as it comes, as kubectl get -w does: YAML documents begin with ---; -o name prints event/RUN/SEQ)",
    ),
    flags: {
      "from-seq": {
        type: "string",
        arg: "N",
        help: "start at seq N (inclusive; default 1)",
      },
      follow: { type: "boolean", help: "wait for new events until the run ends" },
      json: {
        type: "boolean",
        help: "NDJSON: each event's canonical protobuf-JSON (the stored bytes), one per line",
      },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "wait",
    args: ["RUN"],
    summary: "wait until a run ends (or waits for a person); the exit code is the outcome",
    details: withOutput(
      `Waits for the run without printing its events (agentctl events RUN --follow does
that), then prints one word on stdout: completed, failed, cancelled, or waiting. A run
that has ended already answers at once. Reconnects after a dropped connection.

  --for end        (default) until the run ends; a run paused for an approval is waited
                   through (someone approves or denies it, or it expires)
  --for approval   until the run waits for a person (an approval; its id and the commands
                   that resolve it go to stderr) or ends, whichever comes first

Exit: 0 completed, 1 failed, 2 cancelled, 3 waiting for an approval (--for approval),
4 request failed, 64 usage error.

In CI:
  id=$(agentctl run --no-wait --prompt "…" --idempotency-key "$CI_PIPELINE_ID")
  agentctl wait "$id"; echo "outcome: $?"`,
      "the run as the wait left it instead of the one word (the exit code is the outcome as always)",
    ),
    flags: {
      output: OUTPUT_FLAG,
      for: {
        type: "string",
        arg: "end|approval",
        help: "what to wait for: the run's end (default), or an approval or the end",
      },
    },
  },
  {
    name: "replay",
    args: ["RUN"],
    summary: "render a run from its stored events, exactly as run --follow showed it",
    details: `Renders the run's stored events with the same renderer as run --follow (plain lines
off a terminal, colors on one), without waiting for anything and without asking: approvals
show as they were requested and resolved. A run that has not ended is rendered as far as
it got (exit 3).

--archive PATH renders a run from its archive directory (agentd --archive-dir, DIR/<tenant>/<run>)
offline: no server, no token; the archive is verified whole first (exit 1 naming the file
and the problem when it does not verify). RUN may then be left out.

Exit: 0 completed, 1 failed, 2 cancelled, 3 not ended yet, 4 request failed.`,
    flags: { archive: ARCHIVE_FLAG },
  },
  {
    name: "verify",
    args: ["RUN"],
    summary: "check a run's hash chain; exit 1 naming the first bad seq",
    details: `Fetches every event of the run and checks its hash chain: seq 1, 2, 3… without gaps;
each event's hash is sha256 over its canonical protobuf-JSON without "hash" (keys sorted,
no whitespace, defaults omitted); each prev_hash is the previous event's hash (64 zeros
for seq 1). Also checks that the chain ends where the server says the run ends. Prints the
head hash: keep it to detect a rewritten log later.

--head SEQ:HASH (the last head you saw, e.g. from an earlier verify or a follow) checks that
the stored log still holds that event: a log that lost events after it (Redis lost
acknowledged writes) fails, naming the seq after which events were lost. A log holding a
log.rewound record (the loss recorded by the worker that found it) fails the same way.

--archive PATH verifies a run's archive directory (agentd --archive-dir, DIR/<tenant>/<run>)
offline: no server, no token. Besides the chain, every file is checked against the
manifest (sizes, sha256, no symlinks, nothing unlisted, no path outside the directory)
and the chain must end at head.json's head; the first problem is named by file. RUN may
then be left out (given, it must be the archive's run).

Exit: 0 the chain holds, 1 it is broken or lost events (the seq is named), 4 request failed.`,
    flags: {
      archive: ARCHIVE_FLAG,
      head: {
        type: "string",
        arg: "SEQ:HASH",
        help: "the last head you saw: fail if the stored log no longer holds it",
      },
    },
  },
  {
    name: "cancel",
    args: ["RUN"],
    summary: "cancel a run",
    details: withOutput(
      `A queued or paused run is cancelled at once. A running run gets a cancel request:
its worker stops the running tool, removes the sandbox and records run.cancelled within
a few seconds (agentctl get RUN shows it).`,
      "the run after the cancel",
    ),
    flags: {
      reason: { type: "string", arg: "TEXT", help: "why (recorded in the event)" },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "delete",
    args: ["RUN"],
    summary: "delete an ended run for good",
    details: withOutput(
      `Deletes an ended run and everything it owns: its events, artifacts and workspace
snapshots (those no other run uses), its place in listings and its idempotency key. The
tenant's event feed records run.deleted (who, --reason, when). Irreversible. A live run
(queued, running, paused, waiting for an approval) is refused: agentctl cancel RUN first.
Deleting a run again is fine (it finishes a deletion a crash interrupted).
Needs the submit role (your tenant's runs) or admin (any tenant's).

Exit: 0 deleted, 4 request failed (not found, still live, …).`,
      "the deletion's answer (runId, tenantId, deletedNow, artifactsRemoved)",
    ),
    flags: {
      reason: {
        type: "string",
        arg: "TEXT",
        help: "why, required (1-1024 characters, one line; recorded in the feed)",
      },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "purge-tenant",
    args: ["TENANT"],
    summary: "delete every ended run of a tenant (admin)",
    details: withOutput(
      `Deletes every ended run of TENANT as agentctl delete does, then records tenant.purged
in the tenant's feed. Refused while the tenant has live runs (the error names some):
cancel them first. Progress goes to stderr; an interrupted purge is resumed by running it
again. Needs the admin role.

Exit: 0 purged, 4 request failed (live runs, not admin, …).`,
      "the last progress message (runsDeleted, lastRunId, done)",
    ),
    flags: {
      reason: {
        type: "string",
        arg: "TEXT",
        help: "why, required (1-1024 characters, one line; recorded in the feed)",
      },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "approvals",
    args: [],
    summary: "list pending approvals with their previews",
    details: withOutput(
      `Lists the approvals waiting for a decision in your tenant (newest run first), each with
its preview (summary, files and diff, or argv and cwd) and the commands to resolve it.`,
      "the approvals (--json, the older form, prints one approval per line)",
    ),
    flags: {
      output: OUTPUT_FLAG,
      run: { type: "string", arg: "RUN", help: "only approvals of this run" },
      limit: { type: "string", arg: "N", help: "show at most N approvals (default 50)" },
      json: { type: "boolean", help: "one approval per line as protobuf-JSON" },
    },
  },
  {
    name: "approve",
    args: ["ID"],
    summary: "approve a pending call (the run resumes)",
    details: withOutput(
      `Approves the pending approval ID (apr_…; see agentctl approvals). The paused run goes
back on the queue and a worker carries out the call. Approving twice is fine; approving
what was denied (or expired) is refused.

--rule also asks for a rule instead of a one-off: "command" (the approved command's
family, e.g. "npm test", in the run's repository) or "host" (a network approval's host
and port). The server derives the rule from the call; it becomes a pending policy change
an admin applies (agentctl policy changes, agentctl policy apply ID). The approval itself
is still a one-off.`,
      "the approval as resolved",
    ),
    flags: {
      reason: { type: "string", arg: "TEXT", help: "why (recorded in the event)" },
      rule: {
        type: "string",
        arg: "KIND",
        help: "also propose a rule: command (this command family in this repository) or host",
      },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "deny",
    args: ["ID"],
    summary: "deny a pending call (the model is told why)",
    details: withOutput(
      `Denies the pending approval ID (apr_…). The run resumes and the model receives the
denial with the reason, so it can change its plan.`,
      "the approval as resolved",
    ),
    flags: {
      reason: { type: "string", arg: "TEXT", help: "why; the model reads it" },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "policy changes",
    args: [],
    summary: "list rules proposed from approvals (pending, applied, rejected)",
    details: withOutput(
      `Lists the policy changes people proposed when approving (agentctl approve --rule), newest
first: the rule, who proposed it, the approval it came from and the diff against the
tenant's policy file. An admin's token lists every tenant's (--tenant: one).`,
      "the policy changes",
    ),
    flags: {
      tenant: { type: "string", arg: "TENANT", help: "admin: only this tenant's changes" },
      pending: { type: "boolean", help: "only pending changes" },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "policy apply",
    args: ["ID"],
    summary: "apply a pending policy change to the tenant's policy file (admin)",
    details: withOutput(
      `Writes the pending change ID (pc_…) into the tenant's policy file and reloads it; the
next matching call is decided by the new rule. Refused when the file changed since the
change was proposed (reject it and propose again), when the tenant has no policy file of
its own, or when the change is no longer pending. Needs the admin role.`,
      "the change as applied",
    ),
    flags: { output: OUTPUT_FLAG },
  },
  {
    name: "policy reject",
    args: ["ID"],
    summary: "reject a pending policy change (admin)",
    details: withOutput(
      "Rejects the pending change ID (pc_…): it is never applied. Needs the admin role.",
      "the change as rejected",
    ),
    flags: {
      reason: { type: "string", arg: "TEXT", help: "why (recorded in the tenant feed)" },
      output: OUTPUT_FLAG,
    },
  },
  {
    name: "review override",
    args: ["CALL_OR_APPROVAL"],
    summary: "override the model reviewer's verdict on a call, after the fact (recorded)",
    details: `Records a person's verdict over the model reviewer's (approval: reviewer) on a call:
the call id (with --run RUN) or the approval id (apr_…) the reviewer asked a person in.
Needs the approve role. Nothing runs or is undone: overriding an allow whose call already
ran marks the run for attention (reviewer.overridden with attention); overriding a deny
records that the reviewer was wrong, the call stays refused (the model may propose it
again). An ask still pending is answered with agentctl approve/deny instead. Once the run
ended, the override is recorded in the tenant feed (agentctl watch shows it).`,
    flags: {
      verdict: { type: "string", arg: "allow|deny", help: "the person's verdict" },
      reason: { type: "string", arg: "TEXT", help: "why (required; recorded)" },
      run: { type: "string", arg: "RUN", help: "the run, when CALL_OR_APPROVAL is a call id" },
      json: { type: "boolean", help: "print the recorded override as protobuf-JSON" },
    },
  },
  {
    name: "policy report",
    args: [],
    summary: "what the candidate (shadow) policy would have allowed, asked or denied differently",
    details: `Reads the policy.shadow events of your tenant's runs (or of --run) written since
--since, and counts each enforced → candidate transition (auto, preview_auto, ask, deny)
and, within it, each pair of rules, with up to --examples examples each (run, seq, tool,
what the call did). A candidate is set with agentd --shadow-policy or the auth file's
tenants.<id>.shadowPolicy (docs/policy.md, "Shadow mode").

Exit: 0 once printed (also when there is no difference), 64 for a bad flag, the usual
codes for a server error.`,
    flags: {
      since: {
        type: "string",
        arg: "WHEN",
        help: "a duration back from now (90m, 24h, 7d) or a timestamp (2026-11-28T10:00:00Z); required",
      },
      run: { type: "string", arg: "RUN", help: "only this run's events" },
      examples: { type: "string", arg: "N", help: "examples per rule pair, 0-100 (default 3)" },
      "max-runs": {
        type: "string",
        arg: "N",
        help: "read at most N runs, newest first (default 10000); the report says how many more were left unread",
      },
      json: { type: "boolean", help: "the report as one JSON object" },
    },
  },
  {
    name: "artifact get",
    args: ["RUN"],
    summary: "download an artifact of a run (the patch, the uploaded workspace…)",
    details: `Downloads an artifact of the run: "patch" (the final diff of a completed run; apply it
with git apply), "workspace" (the uploaded archive, a tar), "workspace-snapshot" (the
workspace when the run last paused). The content is checked against its sha256 and
written to --out (atomically) or to stdout. A tar is not written to a terminal.`,
    flags: {
      name: {
        type: "string",
        arg: "NAME",
        help: 'artifact name: patch, workspace, workspace-snapshot (default "patch")',
      },
      digest: { type: "string", arg: "SHA256", help: "the artifact with this digest instead" },
      out: { type: "string", arg: "FILE", help: "write to FILE (default: stdout)" },
    },
  },
  {
    name: "whoami",
    args: [],
    summary: "show who the server takes you for: principal, tenant and roles",
    details: withOutput(
      `Asks the server who your token is (any valid token may ask): its name in the auth file,
its tenant and its roles (submit, read, approve, admin). The token itself is never shown.
In CI, a first step that fails early on a wrong token or a missing role:
  agentctl whoami -o jsonpath='{.roles}'`,
      "the principal (-o name prints principal/NAME)",
    ),
    flags: { output: OUTPUT_FLAG },
  },
  {
    name: "config use-context",
    args: ["NAME"],
    summary: "make NAME the current context (server and token file) of the config file",
    details: CONFIG_DETAILS,
    flags: {},
  },
  {
    name: "config set-context",
    args: ["NAME"],
    summary: "add or change a context: its server address and token file",
    details: CONFIG_DETAILS,
    flags: {
      server: {
        type: "string",
        arg: "URL",
        help: "the context's address, HOST:PORT or http(s)://HOST:PORT (required for a new context)",
      },
      "token-file": {
        type: "string",
        arg: "FILE",
        help: "file holding the context's token (mode 600; ~ and paths relative to the config file work)",
      },
    },
  },
  {
    name: "config get-contexts",
    args: [],
    summary: "list the contexts (* marks the current one)",
    details: withOutput(
      CONFIG_DETAILS,
      'the contexts ({"items": [{"name", "addr", "token-file", "ca-file", "current"}]}; -o name prints context/NAME)',
    ),
    flags: { output: OUTPUT_FLAG },
  },
  {
    name: "config current-context",
    args: [],
    summary: "print the current context's name",
    details: CONFIG_DETAILS,
    flags: {},
  },
  {
    name: "config delete-context",
    args: ["NAME"],
    summary: "remove a context",
    details: CONFIG_DETAILS,
    flags: {},
  },
  {
    name: "completion",
    args: ["SHELL"],
    summary: "print a shell completion script: bash or zsh",
    details: `bash:  source <(agentctl completion bash)      (or save it in /etc/bash_completion.d/agentctl)
zsh:   source <(agentctl completion zsh)       (or save it as _agentctl on your $fpath)`,
    flags: {},
  },
  {
    name: "version",
    args: [],
    summary: "print agentctl's version (also: agentctl --version)",
    details: "",
    flags: {},
  },
  {
    name: "help",
    args: ["[COMMAND]"],
    summary: "help for agentctl or one command (agentctl help run)",
    details: "",
    flags: {},
  },
];

export function findCommand(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name);
}

function flagLines(flags: Record<string, FlagSpec>): string[] {
  const rows = Object.entries(flags).map(([name, f]) => {
    const left = `${f.short === undefined ? "    " : `-${f.short}, `}--${name}${f.arg === undefined ? "" : ` ${f.arg}`}`;
    return [left, f.help] as const;
  });
  const width = Math.max(...rows.map(([l]) => l.length), 10) + 2;
  return rows.map(([l, h]) => `  ${l.padEnd(width)}${h}`);
}

export function usageLine(c: CommandSpec): string {
  const req = c.name === "run" ? " --prompt TEXT" : "";
  const args = c.args.length > 0 ? ` ${c.args.join(" ")}` : "";
  return `agentctl ${c.name}${args}${req}${Object.keys(c.flags).length > (req ? 1 : 0) ? " [flags]" : ""}`;
}

export function commandHelp(c: CommandSpec): string {
  const parts = [
    `Usage: ${usageLine(c)}`,
    "",
    `${c.summary[0]?.toUpperCase()}${c.summary.slice(1)}.`,
  ];
  if (Object.keys(c.flags).length > 0) parts.push("", "Flags:", ...flagLines(c.flags));
  parts.push("", "Global flags:", ...flagLines(GLOBAL_FLAGS));
  if (c.details !== "") parts.push("", c.details);
  return `${parts.join("\n")}\n`;
}

export function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  const cmds = COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`);
  return `agentctl — the command-line client of agentd

Usage: agentctl [--addr URL] [--token TOKEN] COMMAND [ARGS] [FLAGS]

Commands:
${cmds.join("\n")}

Global flags (anywhere on the line):
${flagLines(GLOBAL_FLAGS).join("\n")}

Examples:
  agentctl run --prompt "fix the failing test" --follow
  agentctl run --repo ./service --prompt "…" --follow --no-wait   # CI: exit 3 at an approval
  agentctl approvals && agentctl approve apr_…
  agentctl artifact get RUN --out fix.patch && git apply fix.patch
  agentctl replay RUN && agentctl verify RUN

${EXIT_CODES}

agentctl COMMAND --help (or agentctl help COMMAND) shows a command's flags.
`;
}

/** parseArgs options for a command: its flags plus the global ones. */
export function parseOptions(c: CommandSpec): ParseArgsOptionsConfig {
  const out: ParseArgsOptionsConfig = {};
  for (const [name, f] of Object.entries({ ...c.flags, ...GLOBAL_FLAGS })) {
    out[name] = {
      type: f.type,
      ...(f.multiple ? { multiple: true } : {}),
      ...(f.short === undefined ? {} : { short: f.short }),
    };
  }
  return out;
}
