/**
 * What a `git …` invocation does, for the analysis: configuration that makes git run shell
 * (`-c alias.x=!…`, `-c core.*`, `git config core.pager …`), subcommands that run commands
 * (`rebase --exec`, `bisect run`, `filter-branch`, `submodule foreach`, `difftool`), and
 * subcommands that throw away the run's work (`clean`, `checkout -- …`, `restore`, `stash`,
 * `reset --hard`, `rm`, `branch -D`…). Which subcommands only read. Pure.
 */
import type { Effects, Invocation } from "./command-effects.ts";
import { insideWorkspace } from "./inside-workspace.ts";
import { scanOptions } from "./option-scan.ts";
import type { ShellWord } from "./shell-syntax.ts";

const GLOBAL = {
  flags: [
    "-p",
    "--paginate",
    "-P",
    "--no-pager",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--no-lazy-fetch",
    "--version",
    "--help",
    "-h",
    "--html-path",
    "--man-path",
    "--info-path",
    "--exec-path",
  ],
  values: ["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--attr-source", "--config-env"],
};

/** Configuration keys that cannot make git run a program. */
const SAFE_CONFIG =
  /^(user\.(name|email|signingkey)|color\..+|advice\..+|init\.defaultbranch|(commit|tag)\.gpgsign|core\.(quotepath|autocrlf|filemode|ignorecase|safecrlf|eol)|safe\.directory|log\..+|pull\.(rebase|ff)|push\.default|merge\.conflictstyle|diff\.(renames|algorithm|context)|status\..+|column\..+|i18n\..+|help\.autocorrect|rerere\.enabled|fetch\.prune|branch\.autosetupmerge)$/i;

/** Subcommands whose -o / --output names a file they write. */
const OUTPUT_OPTION = new Set([
  "log",
  "diff",
  "show",
  "format-patch",
  "archive",
  "bundle",
  "diff-tree",
  "diff-files",
  "diff-index",
  "whatchanged",
  "range-diff",
]);

/** Why a push discards a remote's history or refs (force, delete, mirror, prune), if it does. */
function pushDiscards(words: readonly string[]): string | undefined {
  for (const w of words) {
    if (/^--(force|force-with-lease|force-if-includes|delete|mirror|prune)(=.*)?$/.test(w))
      return `git push ${w.split("=")[0]}`;
    if (/^-[a-zA-Z]*[fd]/.test(w) && !w.startsWith("--")) return "git push -f/-d";
    if (!w.startsWith("-") && (w.startsWith("+") || /^:/.test(w) || /:\+/.test(w)))
      return "git push +REF / :REF (forces or deletes a ref)";
  }
  return undefined;
}

/** Subcommands that never write the work tree. */
const READ_ONLY = new Set(
  (
    "status diff log show rev-parse ls-files ls-tree cat-file describe blame grep shortlog " +
    "whatchanged show-ref for-each-ref rev-list name-rev merge-base count-objects fsck var " +
    "version help check-ignore check-attr annotate range-diff cherry diff-tree diff-files " +
    "diff-index ls-remote add commit tag branch notes fetch push remote config reflog " +
    "show-branch verify-commit verify-tag hash-object"
  ).split(" "),
);

/** Subcommands that run commands given to them or configured outside the repository. */
const RUNS_COMMANDS = new Set([
  "filter-branch",
  "filter-repo",
  "difftool",
  "mergetool",
  "send-email",
  "instaweb",
  "daemon",
  "web--browse",
  "credential",
  "credential-store",
  "credential-cache",
  "upload-pack",
  "receive-pack",
  "shell",
]);

/**
 * Hooks git runs, by subcommand. Hooks in .git/hooks need a command that names .git to be
 * written; hooks in the workspace (husky's .husky/, through a core.hooksPath the uploaded
 * repository sets) are reported as scripts so the kernel can check their provenance.
 */
const HOOKS: Record<string, string[]> = {
  commit: ["pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-rewrite"],
  merge: ["pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-merge"],
  pull: ["pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-merge", "post-checkout"],
  checkout: ["post-checkout"],
  switch: ["post-checkout"],
  clone: ["post-checkout"],
  rebase: ["pre-rebase", "post-rewrite", "post-checkout"],
  am: ["applypatch-msg", "pre-applypatch", "post-applypatch", "post-rewrite"],
  "cherry-pick": ["prepare-commit-msg", "commit-msg", "post-commit"],
  revert: ["prepare-commit-msg", "commit-msg", "post-commit"],
  push: ["pre-push"],
  gc: ["pre-auto-gc"],
  reset: [],
  branch: [],
  tag: [],
  stash: [],
  fetch: [],
  "update-ref": [],
};
const HOOK_DIRS = [".husky", ".husky/_"];

export function gitCommand(inv: Invocation, fx: Effects): void {
  const g = scanOptions(inv.args, GLOBAL);
  if (inv.args.slice(0, g.operand).some((a) => a.text.startsWith("--exec-path=")))
    fx.dynamic("git --exec-path= runs git commands from another directory");
  for (const u of g.unknown) {
    fx.dynamic(
      u.startsWith("--exec-path=")
        ? "git --exec-path="
        : `git option ${u} the analysis does not know`,
    );
  }
  // A repository outside the workspace has a configuration the run may have written (in
  // /tmp): core.fsmonitor, core.pager, hooks… run commands.
  fx.configFromDirectory();
  for (const v of g.values) {
    if (v.option === "--config-env") fx.dynamic("git --config-env");
    if (["-C", "--git-dir", "--work-tree"].includes(v.option)) {
      const raw = inv.args.find((a) => a.text.startsWith(`${v.option}=`));
      const dir =
        v.word ??
        (raw === undefined ? undefined : { ...raw, text: raw.text.slice(v.option.length + 1) });
      if (!insideWorkspace(dir))
        fx.dynamic(
          `git ${v.option} ${dir?.text.slice(0, 80) ?? ""}: a repository outside the workspace`,
        );
    }
    if (v.option !== "-c") continue;
    const key = (v.word?.text ?? "").split("=")[0] as string;
    if (!SAFE_CONFIG.test(key))
      fx.dynamic(`git -c ${key}: configuration can make git run commands`);
  }
  const sub = inv.args[g.operand]?.text;
  if (sub === undefined) return;
  const rest = inv.args.slice(g.operand + 1);
  const has = (...opts: string[]): boolean =>
    rest.some((w) => opts.some((o) => w.text === o || w.text.startsWith(`${o}=`)));
  if (has("--upload-pack", "-u", "--receive-pack", "--exec") && !READ_ONLY.has(sub))
    fx.dynamic(`git ${sub}: a remote helper command`);
  // Read-only subcommands too: `git fetch --upload-pack=./x.sh .` runs the run's script.
  if (has("--upload-pack", "--receive-pack", "--exec") || (sub === "ls-remote" && has("-u")))
    fx.dynamic(`git ${sub}: a remote helper command`);
  // A file the option names is written (overwritten) whatever the subcommand reads.
  if (OUTPUT_OPTION.has(sub) && rest.some((w) => /^(-o|--output(-directory)?)(=.*)?$/.test(w.text)))
    fx.dynamic(`git ${sub} --output writes a file the line names`);
  if (RUNS_COMMANDS.has(sub)) fx.dynamic(`git ${sub} runs commands`);
  if (sub === "config") gitConfig(rest, fx);
  // The patch names the files it writes, not the line (command-unpacks.ts).
  if ((sub === "apply" || sub === "am") && !has("--check", "--stat", "--numstat", "--summary"))
    fx.dynamic(`git ${sub} writes the files its patch names`);
  if (sub === "grep" && rest.some((w) => /^(-O|--open-files-in-pager)/.test(w.text)))
    fx.dynamic("git grep -O runs a pager");
  if (sub === "rebase" && has("-x", "--exec")) fx.dynamic("git rebase --exec runs commands");
  // A template directory the run wrote puts hooks (and config) into the new repository.
  if ((sub === "init" || sub === "clone") && has("--template"))
    fx.dynamic(`git ${sub} --template installs hooks from a directory`);
  if (sub === "submodule" && rest.some((w) => w.text === "foreach"))
    fx.dynamic("git submodule foreach runs commands");
  if (sub === "bisect" && rest[0]?.text === "run") {
    fx.dynamic("git bisect run runs a command");
    fx.run(rest.slice(1));
  }
  const hooks = HOOKS[sub];
  if (hooks !== undefined) {
    const all = [...hooks, "reference-transaction"];
    fx.scriptFiles(
      undefined,
      all.flatMap((h) => HOOK_DIRS.map((d) => `${d}/${h}`)),
    );
  }
  const why = destructive(sub, rest);
  if (why !== undefined) fx.destructive(why);
  if (!READ_ONLY.has(sub)) fx.writer();
}

/** A literal directory inside the workspace (relative without leaving it, or under /workspace). */
function gitConfig(rest: readonly ShellWord[], fx: Effects): void {
  const words = rest.map((w) => w.text);
  const reads = [
    "--get",
    "--get-all",
    "--get-regexp",
    "--get-urlmatch",
    "--list",
    "-l",
    "get",
    "list",
  ];
  if (words.some((w) => w === "--edit" || w === "-e" || w === "edit")) {
    fx.dynamic("git config --edit runs an editor");
    return;
  }
  if (words.some((w) => reads.includes(w))) return;
  const positional = words.filter((w, k) => !w.startsWith("-") && !isOptionValue(words, k));
  const key = positional[0] === "set" || positional[0] === "unset" ? positional[1] : positional[0];
  const writes =
    positional.length >= 2 ||
    words.some((w) =>
      /^--(add|replace-all|unset|unset-all|rename-section|remove-section)$/.test(w),
    );
  if (writes && !SAFE_CONFIG.test(key ?? "")) {
    fx.dynamic(`git config ${key ?? ""}: configuration can make git run commands`);
  }
}

function isOptionValue(words: string[], k: number): boolean {
  const prev = words[k - 1];
  return prev === "--file" || prev === "-f" || prev === "--blob" || prev === "--type";
}

/** Why a git subcommand discards work (uncommitted changes, files, refs), if it does. */
function destructive(sub: string, rest: readonly ShellWord[]): string | undefined {
  const words = rest.map((w) => w.text);
  const has = (...opts: string[]): boolean => words.some((w) => opts.includes(w));
  const dry = has("-n", "--dry-run");
  const positional = words.filter((w) => !w.startsWith("-"));
  switch (sub) {
    case "clean":
      return dry ? undefined : "git clean";
    case "checkout":
      if (has("--", ".", "-f", "--force", "-p", "--patch", "--ours", "--theirs", "--merge", "-m"))
        return "git checkout -- (discards changes)";
      if (positional.length >= 2 || positional.some((p) => /[./]/.test(p) && !has("-b", "-B")))
        return "git checkout PATH (discards changes)";
      return undefined;
    case "checkout-index":
      return has("-f", "--force") || words.some((w) => /^-[a-z]*f/.test(w))
        ? "git checkout-index -f (overwrites the work tree)"
        : undefined;
    case "read-tree":
      return has("-u") && has("--reset", "-m")
        ? "git read-tree -u (overwrites the work tree)"
        : undefined;
    case "restore":
      return has("-W", "--worktree") || !has("-S", "--staged") ? "git restore" : undefined;
    case "stash":
      return positional[0] === "list" || positional[0] === "show" ? undefined : "git stash";
    case "reset":
      return has("--hard", "--merge", "--keep") ? "git reset --hard" : undefined;
    case "rm":
      return dry || has("--cached") ? undefined : "git rm";
    case "mv":
      // Without -f git refuses to move onto an existing file; with it, it replaces it.
      return !dry && (has("--force") || words.some((w) => /^-[a-zA-Z]*f/.test(w)))
        ? "git mv -f (replaces an existing file)"
        : undefined;
    case "switch":
      return has("--discard-changes", "-f", "--force") ? "git switch --discard-changes" : undefined;
    case "branch":
    case "tag":
      return has("-D", "-d", "--delete") ? `git ${sub} --delete` : undefined;
    case "push":
      return pushDiscards(words);
    case "update-ref":
      return has("-d", "--stdin") ? "git update-ref -d" : undefined;
    case "reflog":
      return positional[0] === "expire" || positional[0] === "delete"
        ? "git reflog expire"
        : undefined;
    case "gc":
      return words.some((w) => w.startsWith("--prune")) ? "git gc --prune" : undefined;
    case "prune":
      return dry ? undefined : "git prune";
    case "worktree":
      return positional[0] === "remove" || positional[0] === "prune"
        ? "git worktree remove"
        : undefined;
    case "submodule":
      return positional[0] === "deinit" ? "git submodule deinit" : undefined;
    default:
      return undefined;
  }
}
