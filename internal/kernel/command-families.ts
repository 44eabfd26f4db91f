/**
 * What programs do with their arguments, by family: wrappers that run another command
 * (env, nice, timeout, xargs…), multi-call binaries (busybox rm is rm), shells and
 * interpreters (inline code is dynamic; a script file is reported so its provenance can be
 * checked), text tools that can run commands (awk system(), sed e, find -exec), programs
 * with destructive forms (find -delete, unlink, truncate, shred, dd of=…), shell builtins
 * that evaluate text (eval, trap, source), and programs that run commands from their options
 * (tar --to-command, rsync -e, editors). Build and package tools are in build-tools.ts,
 * git in git-command.ts. Pure; reports through `Effects`, never executes anything.
 */
import { buildTool } from "./build-tools.ts";
import { gitCommand } from "./git-command.ts";
import { type OptionSpec, scanOptions } from "./option-scan.ts";
import { awkProgramRisk, sedScriptRisk } from "./program-text.ts";
import type { ShellCommand, ShellWord } from "./shell-syntax.ts";

/** One command as the family sees it: its name (no directory) and its argument words. */
export interface Invocation {
  name: string;
  args: readonly ShellWord[];
  /** Where its standard input comes from when not inherited. */
  stdin: ShellCommand["stdin"];
  /** The file redirected into standard input (`sh < s.sh`). */
  stdinFile?: ShellWord;
}

/** What a family reports about a command. */
export interface Effects {
  /** The analysis cannot tell what runs (a reason such as "python -c"). */
  dynamic(reason: string): void;
  /** A destructive form (reason such as "find -delete"). */
  destructive(reason: string): void;
  /** A file (as written, relative to the command's directory) whose content decides what runs. */
  script(path: ShellWord): void;
  /** Files in a directory (the command's own when undefined) that decide what a tool runs. */
  scriptFiles(dir: ShellWord | undefined, files: readonly string[]): void;
  /** Shell code in an argument (sh -c CODE, eval, trap, watch): analysed as a command line. */
  code(text: string): void;
  /** A command the program runs (find -exec, xargs, a wrapper's command). */
  run(words: readonly ShellWord[], stdin?: ShellCommand["stdin"]): void;
  /** The program may write files. */
  writer(): void;
  /** A file the program writes (find -fprint F). */
  write(target: ShellWord): void;
  /** A file-name pattern the program matches itself (find -name P): `*` matches a leading dot. */
  pattern(word: ShellWord): void;
  /** The program reads configuration that can run commands from its directory (git). */
  configFromDirectory(): void;
  /** The shell's directory changes (cd DIR; undefined: to somewhere the line does not show). */
  cd(target: ShellWord | undefined): void;
}

export type Family = (inv: Invocation, fx: Effects) => void;

export const SHELLS = new Set(
  "sh bash dash zsh ash ksh mksh pdksh yash posh rbash fish csh tcsh hush".split(" "),
);

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

/** Busybox/toybox applets the analysis knows (the others are dynamic). */
const KNOWN_APPLETS = new Set([
  ...READ_ONLY,
  ..."rm rmdir unlink truncate shred dd cp mv ln chmod chown chgrp tee gzip gunzip zcat bzip2 bunzip2 xz unxz tar unzip kill killall pkill install mktemp sync patch cpio".split(
    " ",
  ),
]);

const WRAPPERS: Record<string, OptionSpec & { positionals?: number; runsCode?: boolean }> = {
  env: {
    flags: ["-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"],
    values: ["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
  },
  command: { flags: ["-p", "-v", "-V"] },
  builtin: {},
  exec: { flags: ["-c", "-l"], values: ["-a"] },
  nohup: {},
  setsid: { flags: ["-c", "-f", "-w", "--ctty", "--fork", "--wait"] },
  time: {
    flags: ["-p", "-v", "--verbose", "--portability", "-a", "--append", "-q", "--quiet"],
    values: ["-f", "--format", "-o", "--output"],
  },
  nice: { values: ["-n", "--adjustment"] },
  ionice: {
    flags: ["-t", "--ignore"],
    values: ["-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"],
  },
  stdbuf: { values: ["-i", "-o", "-e", "--input", "--output", "--error"] },
  timeout: {
    flags: ["--foreground", "--preserve-status", "-v", "--verbose"],
    values: ["-s", "--signal", "-k", "--kill-after"],
    positionals: 1,
  },
  xargs: {
    flags: [
      "-0",
      "--null",
      "-r",
      "--no-run-if-empty",
      "-t",
      "--verbose",
      "-p",
      "--interactive",
    ].concat(["-x", "--exit", "-o", "--open-tty", "--show-limits"]),
    values: ["-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "--max-lines", "-n"].concat(
      ["--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var"],
    ),
  },
  chronic: { flags: ["-e", "-v", "-d"] },
  unbuffer: { flags: ["-p"] },
  sudo: {
    flags: ["-E", "-H", "-n", "-S", "-b", "-i", "-s", "-k", "-K", "-l", "-v", "-P", "-A", "-B"],
    values: ["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"],
  },
  doas: { flags: ["-n", "-s"], values: ["-u", "-C"] },
  strace: {
    flags: ["-f", "-ff", "-c", "-C", "-T", "-t", "-tt", "-ttt", "-v", "-x", "-xx", "-y", "-yy"],
    values: ["-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-O", "-S", "-b", "-I", "-X"],
  },
  ltrace: {
    flags: ["-f", "-c", "-C", "-i", "-r", "-S", "-t", "-tt"],
    values: ["-o", "-e", "-p", "-s", "-u", "-n", "-l"],
  },
  flock: {
    flags: [
      "-s",
      "-x",
      "-n",
      "-u",
      "-o",
      "--shared",
      "--exclusive",
      "--nonblock",
      "--unlock",
    ].concat(["--close", "--no-fork", "--verbose", "-e", "-F"]),
    values: ["-w", "--timeout", "-E", "--conflict-exit-code", "-c", "--command"],
    positionals: 1,
  },
  watch: {
    flags: [
      "-b",
      "--beep",
      "-e",
      "--errexit",
      "-g",
      "--chgexit",
      "-t",
      "--no-title",
      "-x",
      "--exec",
    ].concat(["-c", "--color", "-d", "--differences", "-p", "--precise", "-r", "-w"]),
    values: ["-n", "--interval", "-q", "--equexit"],
    runsCode: true,
  },
  taskset: { flags: ["-a", "--all-tasks", "-c", "--cpu-list"], positionals: 1 },
};

/** Wrapper options whose value is a command line run by a shell. */
const CODE_OPTIONS: Record<string, string[]> = {
  env: ["-S", "--split-string"],
  flock: ["-c", "--command"],
};

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
  if (/^python[0-9.]*$|^pypy[0-9.]*$/.test(name)) return python;
  return FAMILIES.get(name);
}

function wrapper(inv: Invocation, fx: Effects): void {
  const spec = WRAPPERS[inv.name] as (typeof WRAPPERS)[string];
  const scan = scanOptions(inv.args, spec);
  for (const u of scan.unknown) fx.dynamic(`${inv.name} option ${u} the analysis does not know`);
  const codeOptions = CODE_OPTIONS[inv.name] ?? [];
  for (const v of scan.values) {
    if (codeOptions.includes(v.option)) {
      fx.dynamic(`${inv.name} ${v.option} runs a command line`);
      fx.code(v.word?.text ?? "");
    }
    if (inv.name === "env" && (v.option === "-C" || v.option === "--chdir")) fx.cd(undefined);
  }
  if (inv.name === "command" && inv.args.some((a) => a.text === "-v" || a.text === "-V")) return;
  let i = scan.operand + (spec.positionals ?? 0);
  // flock FILE -c CMD: the option comes after the lock file.
  const after = inv.args[i]?.text ?? "";
  if (codeOptions.includes(after)) {
    fx.dynamic(`${inv.name} ${after} runs a command line`);
    fx.code(inv.args[i + 1]?.text ?? "");
    return;
  }
  // env's NAME=value words come before the command.
  while (
    inv.name === "env" &&
    i < inv.args.length &&
    /^[A-Za-z_][A-Za-z0-9_]*=/.test(inv.args[i]?.text ?? "")
  )
    i++;
  const rest = inv.args.slice(i);
  if (rest.length === 0) return;
  if (spec.runsCode === true && !inv.args.some((a) => a.text === "-x" || a.text === "--exec")) {
    fx.dynamic(`${inv.name} runs its arguments with sh -c`);
    fx.code(rest.map((w) => w.text).join(" "));
    return;
  }
  if (inv.name === "xargs") {
    const flag = inv.args.find((a) => a.text.startsWith("-I"));
    const replace =
      flag === undefined
        ? undefined
        : flag.text === "-I"
          ? inv.args[inv.args.indexOf(flag) + 1]?.text
          : flag.text.slice(2);
    const token =
      replace ?? (inv.args.some((a) => /^(-i|--replace)/.test(a.text)) ? "{}" : undefined);
    const words =
      token === undefined || token === "" ? rest : placeholder(rest, token, "input xargs fills in");
    fx.run(words, "pipe");
    return;
  }
  fx.run(rest, inv.stdin);
}

/** busybox X / toybox X / coreutils --coreutils-prog=X: the applet is the command. */
function multiCall(inv: Invocation, fx: Effects): void {
  const args = inv.args;
  const prog = args[0]?.text.match(/^--coreutils-prog=(.+)$/);
  if (inv.name === "coreutils" && prog) {
    fx.run([{ ...(args[0] as ShellWord), text: prog[1] as string }, ...args.slice(1)], inv.stdin);
    return;
  }
  if (args[0]?.text === "--install") fx.dynamic(`${inv.name} --install`);
  if (args[0] === undefined || args[0].text.startsWith("-")) return;
  const applet = args[0].text.split("/").pop() ?? "";
  if (SHELLS.has(applet)) fx.dynamic(`${inv.name} ${applet}`);
  else if (!KNOWN_APPLETS.has(applet) && familyOf(applet) === undefined)
    fx.dynamic(`${inv.name} ${applet}: an applet the analysis does not know`);
  fx.run(args, inv.stdin);
}

function shell(inv: Invocation, fx: Effects): void {
  const scan = scanOptions(inv.args, {
    flags: "-e -x -u -v -n -f -a -b -h -m -C -l -p -r -s -i -E -T -P -B -H -k -t".split(" "),
    values: ["-o", "+o", "-O", "+O", "--rcfile", "--init-file"],
    codeLetters: "c",
    flagPrefixes: ["--"],
    plusOptions: true,
  });
  for (const v of scan.values)
    if ((v.option === "--rcfile" || v.option === "--init-file") && v.word !== undefined)
      fx.script(v.word);
  const stdinMode = inv.args.some((a) => /^-[a-z]*s/.test(a.text) && !a.text.startsWith("--"));
  if (scan.code !== undefined) {
    const code = scan.code.word ?? inv.args[scan.operand];
    fx.dynamic(`${inv.name} -c`);
    fx.code(code?.text ?? "");
    return;
  }
  const file = inv.args[scan.operand];
  if (file !== undefined && !stdinMode && file.text !== "-") fx.script(file);
  else stdinScript(inv, fx);
}

/** An interpreter reading its program from standard input. */
function stdinScript(inv: Invocation, fx: Effects): void {
  if (inv.stdin === "file" && inv.stdinFile !== undefined) fx.script(inv.stdinFile);
  else if (inv.stdin !== undefined) fx.dynamic(`${inv.stdin} into ${inv.name}`);
}

/** An interpreter spec: its inline-code options, options with values, module options. */
type ModuleRunner = (w: ShellWord, rest: readonly ShellWord[], fx: Effects) => void;

function interpreter(spec: OptionSpec, modules?: ModuleRunner): Family {
  return (inv, fx) => {
    let from = 0;
    // An unknown option right before the first operand may take it as its value: then the
    // script is further on. Both are reported (a few rounds at most).
    for (let round = 0; round < 4; round++) {
      const scan = scanOptions(inv.args, spec, from);
      if (scan.code !== undefined) {
        fx.dynamic(`${inv.name} ${scan.code.option} runs inline code`);
        return;
      }
      if (scan.module !== undefined) {
        const word = scan.module.word;
        if (word !== undefined && modules !== undefined)
          modules(word, inv.args.slice(scan.operand), fx);
        return;
      }
      const file = inv.args[scan.operand];
      if (file === undefined || file.text === "-") {
        if (round === 0) stdinScript(inv, fx);
        return;
      }
      fx.script(file);
      const before = inv.args[scan.operand - 1]?.text ?? "";
      if (!scan.unknown.includes(before) || before.includes("=")) return;
      from = scan.operand + 1;
    }
  };
}

/** python -m pkg.mod runs pkg/mod.py (or its __main__) from the working directory first. */
function pythonModule(w: ShellWord, rest: readonly ShellWord[], fx: Effects): void {
  const path = w.text.replace(/\./g, "/");
  if (!/^[A-Za-z0-9_/]+$/.test(path)) {
    fx.dynamic(`python -m ${w.text}`);
    return;
  }
  // python -m pip install …, python -m pytest: judged as the tool itself too.
  fx.run([w, ...rest], undefined);
  const parent = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  fx.scriptFiles(undefined, [
    `${path}.py`,
    `${path}/__main__.py`,
    `${path}/__init__.py`,
    ...(parent === "" ? [] : [`${parent}/__init__.py`]),
  ]);
}

const python = interpreter(
  {
    flags: "-b -bb -B -d -E -h -i -I -O -OO -P -q -s -S -u -v -V -x -3 --version --help".split(" "),
    values: ["-W", "-X", "--check-hash-based-pycs"],
    code: ["-c"],
    module: ["-m"],
  },
  pythonModule,
);

function node(inv: Invocation, fx: Effects): void {
  const spec: OptionSpec = {
    code: ["-e", "--eval", "-p", "--print"],
    values: ["-r", "--require", "--import", "--loader", "--experimental-loader", "-C"]
      .concat(["--conditions", "--input-type", "--title", "--env-file", "--inspect-port"])
      .concat(["--test-reporter", "--test-reporter-destination", "--test-name-pattern"])
      .concat(["--test-concurrency", "--watch-path", "--stack-size", "--run"]),
    flags: ["--test", "--watch", "--check", "-c", "--no-warnings", "--enable-source-maps"].concat([
      "-v",
      "--version",
      "-h",
      "--help",
      "-i",
      "--interactive",
    ]),
    flagPrefixes: ["--experimental-", "--no-", "--trace-", "--max-", "--inspect", "--test-"],
  };
  const scan = scanOptions(inv.args, spec);
  if (scan.code !== undefined) {
    fx.dynamic(`${inv.name} ${scan.code.option} runs inline code`);
    return;
  }
  for (const u of scan.unknown) fx.dynamic(`${inv.name} option ${u} the analysis does not know`);
  for (const v of scan.values) {
    if (v.option === "--run") fx.scriptFiles(undefined, ["package.json"]);
    const loads = ["-r", "--require", "--import", "--loader", "--experimental-loader"];
    if (loads.includes(v.option) && v.word !== undefined && /^[./]/.test(v.word.text))
      fx.script(v.word);
  }
  const testMode = inv.args.some((a) => a.text === "--test");
  const operands = inv.args.slice(scan.operand);
  if (testMode) {
    for (const w of operands) fx.script(w);
  } else if (operands[0] !== undefined && operands[0].text !== "-") fx.script(operands[0]);
  else if (!inv.args.some((a) => a.text === "--run")) stdinScript(inv, fx);
}

const perlInterpreter = interpreter({
  codeLetters: "eE",
  flags: "-w -W -X -n -p -a -l -s -t -T -U -c -d -D -i -0 -C -S -u -v -x".split(" "),
  flagPrefixes: ["-M", "-m", "-I", "-l", "-0", "-i", "-C", "-d", "-D", "-x"],
});

/** perl: -e/-E (also in clusters: -ne, -lane) is inline code; so is -M with more than a module name. */
function perl(inv: Invocation, fx: Effects): void {
  const m = inv.args.find((a) => /^-[Mm]/.test(a.text) && /[^\w:=,-]/.test(a.text.slice(2)));
  if (m !== undefined) fx.dynamic(`perl ${m.text.slice(0, 2)} with code`);
  perlInterpreter(inv, fx);
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

function sed(inv: Invocation, fx: Effects): void {
  const scripts: string[] = [];
  let operand = -1;
  let sandbox = false;
  const next = (i: number): ShellWord | undefined => inv.args[i + 1];
  for (let i = 0; i < inv.args.length; i++) {
    const w = inv.args[i] as ShellWord;
    const a = w.text;
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
    else if (/^-[nrEsuz]*i/.test(a) || a.startsWith("--in-place")) fx.writer();
    else if (!a.startsWith("-") && operand < 0 && scripts.length === 0) operand = i;
  }
  if (operand >= 0) scripts.push(inv.args[operand]?.text ?? "");
  if (sandbox) return;
  for (const script of scripts) {
    const why = sedScriptRisk(script);
    if (why !== undefined) fx.dynamic(why);
  }
}

/** Words holding a placeholder the program fills in (find's {}, xargs -I R) are computed. */
function placeholder(words: readonly ShellWord[], token: string, why: string): ShellWord[] {
  return words.map((w) =>
    w.text.includes(token) ? { ...w, expansions: [...w.expansions, why] } : w,
  );
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
      fx.run(placeholder(sub, "{}", "a file name find fills in"));
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
  if (inv.name === "rsync" && inv.args.some((a) => /^--(delete|remove-source-files)/.test(a.text)))
    fx.destructive("rsync --delete");
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
  ...Object.keys(WRAPPERS).map((n): [string, Family] => [n, wrapper]),
  ...[...SHELLS].map((n): [string, Family] => [n, shell]),
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
  ["busybox", multiCall],
  ["toybox", multiCall],
  ["coreutils", multiCall],
  ["node", node],
  ["nodejs", node],
  ["awk", awk],
  ["gawk", awk],
  ["mawk", awk],
  ["nawk", awk],
  ["sed", sed],
  ["gsed", sed],
  ["find", find],
  ["dd", dd],
  ["git", gitCommand],
  ["perl", perl],
  [
    "ruby",
    interpreter({
      code: ["-e"],
      codeLetters: "e",
      values: ["-r", "-I", "-E", "--encoding"],
      flags: "-w -W -n -p -a -l -s -c -d -v -y -x -0 -C --verbose --disable-gems".split(" "),
    }),
  ],
  [
    "php",
    interpreter(
      {
        code: ["-r", "-B", "-R", "-E", "-F", "-d"],
        values: ["-c", "-t", "-z"],
        flags: ["-n", "-q", "-H", "-a", "-l", "-s", "-w", "-e", "-i", "-v", "-m"],
        module: ["-f"],
      },
      (w, _rest, fx) => fx.script(w),
    ),
  ],
  ["lua", interpreter({ code: ["-e"], values: ["-l"], flags: ["-i", "-v", "-E", "-W"] })],
  [
    "luajit",
    interpreter({ code: ["-e"], values: ["-l", "-j", "-O", "-b"], flags: ["-i", "-v", "-E"] }),
  ],
  ["Rscript", interpreter({ code: ["-e"], flagPrefixes: ["--"] })],
  [
    "julia",
    interpreter({
      code: ["-e", "-E", "--eval", "--print"],
      values: ["-L", "--load", "-J", "-p", "-t"],
      flagPrefixes: ["--"],
    }),
  ],
  [
    "java",
    interpreter(
      {
        values: ["-cp", "-classpath", "--class-path", "-p", "--module-path", "--add-modules"],
        flagPrefixes: ["-D", "-X", "-ea", "-da", "-verbose", "--enable-preview", "-server"],
        module: ["-jar"],
      },
      (w, _rest, fx) => fx.script(w),
    ),
  ],
  ["tclsh", interpreter({})],
  ["wish", interpreter({})],
  ["osascript", interpreter({ code: ["-e"], values: ["-l"] })],
  [
    "pwsh",
    interpreter(
      { code: ["-c", "-Command", "-command", "-EncodedCommand", "-e"], module: ["-File", "-f"] },
      (w, _rest, fx) => fx.script(w),
    ),
  ],
  ["tsx", interpreter({ code: ["-e", "--eval", "-p", "--print"], flagPrefixes: ["--"] })],
  [
    "ts-node",
    interpreter({
      code: ["-e", "--eval", "-p", "--print"],
      values: ["-r", "--require", "-P", "--project"],
      flagPrefixes: ["--"],
    }),
  ],
  ["esno", interpreter({ flagPrefixes: ["--"] })],
  ["vite-node", interpreter({ flagPrefixes: ["--"] })],
]);

/** Build and package tools share the table. */
for (const name of buildTool.names) FAMILIES.set(name, buildTool.family);
