/**
 * What programs do with their arguments, by family, for the analysis: text tools that can
 * run commands (awk system(), sed e, find -exec), programs with destructive forms (find
 * -delete, unlink, truncate, shred, dd of=…), shell builtins that evaluate text (eval, trap,
 * source) or move the shell (cd), programs that run commands from their options (tar
 * --to-command, rsync -e) or are made for it (editors, script, parallel); and the table of
 * every family: wrappers (command-wrappers.ts), shells and interpreters (interpreters.ts),
 * build tools (build-tools.ts), git (git-command.ts). Pure; reports through `Effects`.
 */
import { buildTool } from "./build-tools.ts";
import { archiverDestroys, DESTROYING_FAMILIES } from "./command-destroys.ts";
import { type Effects, type Family, type Invocation, withPlaceholder } from "./command-effects.ts";
import {
  EMPTY_SOURCES,
  EMPTYING_FAMILIES,
  outputFileEmpties,
  sedInPlaceEmpties,
} from "./command-empties.ts";
import { UNPACKERS, unpacksInput } from "./command-unpacks.ts";
import { WRAPPER_FAMILIES } from "./command-wrappers.ts";
import { gitCommand } from "./git-command.ts";
import { interpreterFamily } from "./interpreters.ts";
import { scanOptions } from "./option-scan.ts";
import { awkProgramRisk, sedScriptRisk } from "./program-text.ts";
import type { ShellWord } from "./shell-syntax.ts";

/**
 * Programs that read files but never write them or run other programs (for "the line may
 * write the script it runs" and for busybox applets the analysis knows).
 */
export const READ_ONLY = new Set(
  (
    "ls cat echo printf grep egrep fgrep rg ag head tail wc pwd true false test [ : cd pushd " +
    "popd sleep date which type whoami id uname hostname basename dirname realpath readlink " +
    "stat du df diff cmp comm cut tr nl tac rev fold paste join column seq expr " +
    "yes md5sum sha1sum sha256sum sha512sum b2sum cksum base64 base32 od hexdump jq " +
    "more printenv mkdir touch exit return shift set unset export read wait jobs getopts " +
    "local readonly declare typeset tput stty clear locale nproc free uptime ps strings " +
    "awk gawk mawk nawk sed find xargs env nice nohup timeout time command builtin exec " +
    "stdbuf ionice setsid chronic unbuffer flock watch ulimit umask"
  ).split(" "),
);

/** Programs that run commands, code or an editor from their arguments or stdin. */
const RUNS_COMMANDS = new Set(
  (
    "vi vim nvim view vimdiff ex ed red emacs emacsclient script tmux screen at batch crontab " +
    "gdb lldb valgrind systemd-run unshare chrt setarch linux32 linux64 faketime eatmydata " +
    "proxychains proxychains4 tini dumb-init firejail bwrap runcon sg newgrp ssh-agent " +
    "dbus-launch dbus-run-session xvfb-run parallel sem entr catchsegv cpulimit prlimit numactl " +
    "start-stop-daemon daemonize su runuser pkexec fakeroot fakechroot proot setpriv capsh chpst " +
    "softlimit setuidgid envdir ifne vipe pee m4 dc socat expect nsenter chroot run-parts " +
    "rlwrap ldd perf torsocks trickle scriptlive scriptreplay"
  ).split(" "),
);

/** Options with which ordinary programs run a command (tar --to-command=…, rsync -e …). */
const COMMAND_OPTIONS: Record<string, string[]> = {
  tar: ["--to-command", "-I", "--use-compress-program", "--checkpoint-action", "-F"].concat([
    "--info-script",
    "--new-volume-script",
    "--rsh-command",
    "--rmt-command",
  ]),
  zip: ["-TT", "--unzip-command"],
  sort: ["--compress-program"],
  rsync: ["-e", "--rsh", "--rsync-path"],
  man: ["-P", "--pager", "-H", "--html"],
  split: ["--filter"],
  wget: ["--use-askpass", "-e", "--execute"],
  scp: ["-S"],
  ssh: ["-o"],
  rg: ["--pre"],
};

/** Programs that destroy file content or remove files (not mv/cp: their effect shows in the diff). */
const DESTROYS = new Set(
  "rm unlink shred truncate rmdir wipe srm rimraf fallocate wipefs blkdiscard".split(" "),
);

/** The family of `name`, if the analysis has one. */
export function familyOf(name: string): Family | undefined {
  // Looked up at call time: command-wrappers.ts imports this module too.
  return FAMILIES.get(name) ?? WRAPPER_FAMILIES.get(name) ?? interpreterFamily(name);
}

function awk(inv: Invocation, fx: Effects): void {
  const scan = scanOptions(inv.args, {
    values: ["-F", "-v", "--assign", "--field-separator", "-W"],
    flags: [
      "-b",
      "-c",
      "-C",
      "-d",
      "-D",
      "-g",
      "-M",
      "-n",
      "-N",
      "-O",
      "-P",
      "-r",
      "-s",
      "-S",
      "-t",
      "-V",
    ].concat([
      "--posix",
      "--traditional",
      "--sandbox",
      "--lint",
      "--re-interval",
      "--characters-as-bytes",
    ]),
    code: ["-e", "--source", "-l", "--load", "-i", "--include", "-E", "--exec"],
    module: ["-f", "--file"],
  });
  for (const u of scan.unknown) fx.dynamic(`${inv.name} option ${u} the analysis does not know`);
  if (scan.code !== undefined) {
    fx.dynamic(`${inv.name} ${scan.code.option}`);
    return;
  }
  if (awkW(inv, scan, fx)) return;
  if (scan.module !== undefined) {
    if (scan.module.word !== undefined) fx.script(scan.module.word);
    else fx.dynamic(`${inv.name} -f`);
    return;
  }
  const program = inv.args[scan.operand];
  if (program === undefined) return;
  const why = awkProgramRisk(program.text);
  if (why !== undefined) fx.dynamic(why);
}

/** `-W` values that change neither what runs nor what is read (mawk and gawk). */
const AWK_SAFE_W =
  /^(v|version|dump|interactive|posix_space|usage|help|posix|traditional|lint(=\w+)?|re-interval|characters-as-bytes|sandbox|sprintf=\d+|random=\d+)$/;

/**
 * awk -W: mawk's `-W exec FILE` reads the program from FILE (like -f); gawk's `-W source=…`,
 * `-W file=…`, `-W load=…` are code or files. True when the program is accounted for.
 */
function awkW(inv: Invocation, scan: ReturnType<typeof scanOptions>, fx: Effects): boolean {
  for (const v of scan.values) {
    if (v.option !== "-W") continue;
    const w = v.word?.text ?? "";
    if (AWK_SAFE_W.test(w)) continue;
    if (w === "exec" || w === "e") {
      const file = inv.args[scan.operand];
      if (file !== undefined) fx.script(file);
      else fx.dynamic(`${inv.name} -W exec`);
      return true;
    }
    fx.dynamic(`${inv.name} -W ${w.slice(0, 40)}`);
  }
  return false;
}

function sed(inv: Invocation, fx: Effects): void {
  const scripts: string[] = [];
  let operand = -1;
  let sandbox = false;
  let inPlace = false;
  let quiet = false;
  let scriptFile = false;
  const next = (i: number): ShellWord | undefined => inv.args[i + 1];
  for (let i = 0; i < inv.args.length; i++) {
    const w = inv.args[i] as ShellWord;
    const a = w.text;
    // -n (GNU: also inside -ne, -nE…; -in is -i with the suffix "n").
    if (a === "--quiet" || a === "--silent" || /^-[rEsuz]*n/.test(a)) quiet = true;
    if (/^-[nrEsuz]*f/.test(a) || a.startsWith("--file")) scriptFile = true;
    if (a === "-e" || a === "--expression" || /^-[nrEsuz]+e$/.test(a)) {
      scripts.push(next(i)?.text ?? "");
      i++;
    } else if (a.startsWith("--expression=")) scripts.push(a.slice(13));
    else if (/^-[nrEsuz]*e./.test(a)) scripts.push(a.slice(a.indexOf("e") + 1));
    else if (a === "-f" || a === "--file" || /^-[nrEsuz]+f$/.test(a)) {
      const f = next(i);
      if (f !== undefined) fx.script(f);
      i++;
    } else if (a.startsWith("--file=")) fx.script({ ...w, text: a.slice(7) });
    else if (/^-[nrEsuz]*f./.test(a)) fx.script({ ...w, text: a.slice(a.indexOf("f") + 1) });
    else if (a === "--sandbox") sandbox = true;
    else if (a === "-l" || a === "--line-length") i++;
    else if (/^-[nrEsuz]*i/.test(a) || a.startsWith("--in-place")) {
      fx.writer();
      inPlace = true;
    } else if (!a.startsWith("-") && operand < 0 && scripts.length === 0 && !scriptFile)
      operand = i;
  }
  if (operand >= 0) scripts.push(inv.args[operand]?.text ?? "");
  sedInPlaceEmpties({ inPlace, quiet, scriptFile, scripts }, fx);
  if (sandbox) return;
  for (const script of scripts) {
    const why = sedScriptRisk(script);
    if (why !== undefined) fx.dynamic(why);
  }
}

const FIND_PATTERNS = /^-(i?name|i?path|i?wholename|lname|ilname)$/;

function find(inv: Invocation, fx: Effects): void {
  const args = inv.args;
  for (let k = 0; k < args.length; k++) {
    const a = (args[k] as ShellWord).text;
    const p = args[k + 1];
    if (FIND_PATTERNS.test(a) && p !== undefined) {
      fx.pattern(p);
      // -iname and friends ignore case: the lower-case form is compared too.
      if (a.startsWith("-i")) fx.pattern({ ...p, text: p.text.toLowerCase() });
    }
    if (a === "-delete") {
      fx.destructive("find -delete");
      fx.writer();
    } else if (a === "-exec" || a === "-execdir" || a === "-ok" || a === "-okdir") {
      let end = k + 1;
      while (
        end < args.length &&
        args[end]?.text !== ";" &&
        !(args[end]?.text === "+" && args[end - 1]?.text === "{}")
      )
        end++;
      const sub = args.slice(k + 1, end);
      const name = sub[0]?.text.split("/").pop() ?? "";
      if (DESTROYS.has(name)) fx.destructive(`find ${a} ${name}`);
      fx.run(withPlaceholder(sub, "{}", "a file name find fills in"));
      k = end;
    } else if (/^-f(print0?|printf|ls)$/.test(a)) {
      const target = args[k + 1];
      if (target !== undefined) fx.write(target);
      fx.writer();
    }
  }
}

function destroys(inv: Invocation, fx: Effects): void {
  fx.destructive(inv.name);
  fx.writer();
}

function dd(inv: Invocation, fx: Effects): void {
  fx.writer();
  const of = inv.args.find((a) => a.text.startsWith("of="));
  if (of !== undefined) fx.destructive("dd of=");
}

/** tar, rsync, sort…: ordinary unless an option hands them a command to run. */
function commandOptions(inv: Invocation, fx: Effects): void {
  const opts = COMMAND_OPTIONS[inv.name] ?? [];
  inv.args.forEach((w, k) => {
    const a = w.text;
    const hit = opts.find(
      (o) =>
        a === o ||
        a.startsWith(`${o}=`) ||
        (o.length === 2 && o.startsWith("-") && new RegExp(`^-[A-Za-z]*${o[1]}`).test(a)) ||
        (inv.name === "tar" &&
          k === 0 &&
          o.length === 2 &&
          /^[A-Za-z]+$/.test(a) &&
          a.includes(o[1] as string)),
    );
    if (hit === undefined) return;
    if (inv.name === "ssh" && !/command/i.test(`${a} ${inv.args[k + 1]?.text ?? ""}`)) return;
    fx.dynamic(`${inv.name} ${hit} runs a command`);
  });
  if (inv.name !== "man" && inv.name !== "rg") fx.writer();
  if (inv.name === "sort") outputFileEmpties(inv, fx);
  archiverDestroys(inv, fx);
  if (inv.name === "rsync" && inv.args.some((a) => /^--(delete|remove-source-files)/.test(a.text)))
    fx.destructive("rsync --delete");
  if (inv.name === "rsync" && inv.args.some((a) => EMPTY_SOURCES.has(a.text)))
    fx.destructive("rsync /dev/null (empties the target)");
}

function builtins(inv: Invocation, fx: Effects): void {
  const args = inv.args;
  switch (inv.name) {
    case "eval":
      fx.dynamic("eval");
      fx.code(args.map((a) => a.text).join(" "));
      return;
    case ".":
    case "source":
      fx.dynamic(`${inv.name} runs a file in this shell`);
      return;
    case "trap":
      if (args[0] !== undefined && !args[0].text.startsWith("-")) {
        fx.dynamic("trap runs a command line");
        fx.code(args[0].text);
      }
      return;
    case "alias":
      if (args.some((a) => a.text.includes("="))) fx.dynamic("alias");
      return;
    case "hash":
      if (args.some((a) => a.text.startsWith("-p"))) fx.dynamic("hash -p");
      return;
    case "enable":
    case "fc":
    case "let":
      if (args.length > 0 || inv.name === "fc") fx.dynamic(inv.name);
      return;
    case "cd":
    case "pushd":
      fx.cd(args.find((a) => !a.text.startsWith("-") || a.text === "-"));
      return;
    case "popd":
      fx.cd(undefined);
      return;
  }
}

function runsCommands(inv: Invocation, fx: Effects): void {
  fx.dynamic(`${inv.name} runs commands given in its arguments or input`);
}

const FAMILIES = new Map<string, Family>([
  ...DESTROYING_FAMILIES,
  ...EMPTYING_FAMILIES,
  ...[...RUNS_COMMANDS].map((n): [string, Family] => [n, runsCommands]),
  ...Object.keys(COMMAND_OPTIONS).map((n): [string, Family] => [n, commandOptions]),
  ...[...DESTROYS].map((n): [string, Family] => [n, destroys]),
  ...[
    "eval",
    ".",
    "source",
    "trap",
    "alias",
    "hash",
    "enable",
    "fc",
    "let",
    "cd",
    "pushd",
    "popd",
  ].map((n): [string, Family] => [n, builtins]),
  ["awk", awk],
  ["gawk", awk],
  ["mawk", awk],
  ["nawk", awk],
  ["sed", sed],
  ["gsed", sed],
  ["find", find],
  ["dd", dd],
  ["git", gitCommand],
]);

/** Build and package tools share the table. */
for (const name of buildTool.names) FAMILIES.set(name, buildTool.family);

/** Patches and archives: what their input names is written (command-unpacks.ts). */
for (const name of UNPACKERS) {
  const before = FAMILIES.get(name);
  FAMILIES.set(name, (inv, fx) => {
    if (before === undefined) fx.writer();
    else before(inv, fx);
    unpacksInput(inv, fx);
  });
}
